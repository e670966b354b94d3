package budget

import (
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
)

// reservation is what the store was told of the slots this process holds
// in flight outside leases (budgetstore.Reservation).
type reservation struct {
	seq      uint64 // numbers the reservations sent, from 1
	sent     int    // the slots of the latest one sent
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
	r := budgetstore.Reservation{Slots: s.reservedLocked(now), Seq: s.reservation.seq, TTL: leaseTTL}
	r.Calls = min(s.unleased, r.Slots)
	s.reservation.sent = r.Slots
	return r
}

// unsentLocked holds a call that would go on the process's share while no
// request to the store has carried the share yet, and has the keeper send
// one: the others that still reach the store leave the share to this
// process only once the store has it.
func (s *State) unsentLocked(share fallbackShare, now time.Time) (*gate, time.Duration, string) {
	if !share.on || s.reservation.sent >= s.reservedLocked(now) {
		return nil, 0, ""
	}
	select {
	case s.kickLocked() <- struct{}{}:
	default:
	}
	s.startKeeperLocked()
	return &s.slotGate, sharedPoll, ReasonInFlight
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
