package budget

import (
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
)

// reservation is what the store was told of the slots this process holds
// in flight outside leases (budgetstore.Reservation).
type reservation struct {
	seq      uint64 // numbers the reservations sent, from 1
	heardSeq uint64 // the latest one a request the store answered carried
	heard    int    // its slots
}

// reservedLocked is how many slots this process holds outside leases: its
// calls in flight that the store gave no lease, and, while it keeps to its
// share of the key, the rest of that share, which it may take at any
// moment without asking the store.
func (s *State) reservedLocked(now time.Time) int {
	if s.shared == nil {
		return 0
	}
	r := s.unleased
	if sh := s.shareLocked(now); sh.on {
		r = max(r, sh.slots-(s.inflight-s.unleased))
	}
	return min(max(r, 0), s.parallel)
}

// reservationLocked is the reservation a request to the store carries now.
func (s *State) reservationLocked(now time.Time) budgetstore.Reservation {
	s.reservation.seq++
	return budgetstore.Reservation{Slots: s.reservedLocked(now), Seq: s.reservation.seq, TTL: leaseTTL}
}

// reservationHeardLocked notes that the store had r.
func (s *State) reservationHeardLocked(r budgetstore.Reservation) {
	if r.Seq > s.reservation.heardSeq {
		s.reservation.heardSeq, s.reservation.heard = r.Seq, r.Slots
	}
}

// reservingLocked reports whether the store is to hear of this process's
// reservation: it holds slots outside leases, or the store last heard it
// did.
func (s *State) reservingLocked(now time.Time) bool {
	return s.reservation.heard > 0 || s.reservedLocked(now) > 0
}
