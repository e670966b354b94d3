package budget

import (
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
)

// reservation is what the store was told of the slots this process holds
// in flight outside leases (budgetstore.Reservation).
type reservation struct {
	seq         uint64    // numbers the reservations sent, from 1
	doneSeq     uint64    // the latest one whose request came back, answered or not: the store has it if it had the request at all
	sent        int       // its slots; 0 once the store may have dropped it
	storedSeq   uint64    // the latest one a request the store answered carried
	stored      int       // its slots
	storedUntil time.Time // when the store drops it at the latest
	redrain     bool      // the store may not hold the share (an outage began, or the keeper ended in one): the share goes only after a drain from when a request carrying it came back
	redrainSeq  uint64    // the last one numbered before redrain was set: one numbered after it carries the share
}

// redrainLocked notes that the store may no longer hold the share: only a
// request built from now on carries it.
func (s *State) redrainLocked() {
	s.reservation.redrain, s.reservation.redrainSeq = true, s.reservation.seq
}

// reservedLocked is how many slots this process holds outside leases: its
// calls in flight that the store gave no lease, and, while it keeps to its
// share of the key, the rest of that share, which it may take at any
// moment without asking the store. A leased slot that lingers counts in
// the rest as well: the store drops its lease as the linger ends, when
// the process frees the slot, before any request can tell it so.
func (s *State) reservedLocked(now time.Time) int {
	if s.shared == nil {
		return 0
	}
	r := s.unleased
	if sh := s.shareLocked(now); sh.on {
		r = max(r, sh.slots-(s.inflight-s.unleased-s.lingering))
	}
	return min(max(r, 0), s.parallel)
}

// reservationLocked is the reservation a request to the store carries now.
func (s *State) reservationLocked(now time.Time) budgetstore.Reservation {
	s.reservation.seq++
	r := budgetstore.Reservation{Slots: s.reservedLocked(now), Seq: s.reservation.seq, TTL: leaseTTL}
	r.Calls = min(s.unleased, r.Slots)
	return r
}

// reservationDoneLocked notes that the request that carried r came back,
// answered or not: the store has r by now if it had the request at all.
// When the store may not have held the share until then, the others may
// have taken it meanwhile: their calls end before this process's go on
// it. A request built before it may not have held the share carries only
// the calls without a lease, if any: the drain waits for one built since.
func (s *State) reservationDoneLocked(r budgetstore.Reservation, now time.Time) {
	if r.Seq <= s.reservation.doneSeq {
		return
	}
	s.reservation.doneSeq, s.reservation.sent = r.Seq, r.Slots
	if s.reservation.redrain && r.Seq > s.reservation.redrainSeq && r.Slots > 0 {
		s.reservation.redrain = false
		s.drainUntil = later(s.drainUntil, now.Add(s.drainLocked(now)))
	}
}

// unsentLocked holds a call that would go on the process's share while no
// request that carried the share has come back yet, and has the keeper
// send one: the others that still reach the store leave the share to this
// process only once the store has it.
func (s *State) unsentLocked(share fallbackShare, now time.Time) (*gate, time.Duration, string) {
	if !share.on || s.reservation.sent >= s.reservedLocked(now) {
		return nil, 0, ""
	}
	s.kickKeeperLocked()
	s.startKeeperLocked()
	return &s.slotGate, sharedPoll, ReasonInFlight
}

// reservationStoredLocked notes that the store had r.
func (s *State) reservationStoredLocked(r budgetstore.Reservation) {
	if r.Seq > s.reservation.storedSeq {
		s.reservation.storedSeq, s.reservation.stored = r.Seq, r.Slots
		s.reservation.storedUntil = time.Now().Add(r.TTL)
	}
}

// reservingLocked reports whether the store is to hear of this process's
// reservation: the store holds slots for it that it may no longer need,
// or it has calls that hold or may take slots outside leases. A process
// on its share with no call leaves the store to drop the share; the next
// call sends it again (keeperEndedLocked).
func (s *State) reservingLocked(now time.Time) bool {
	return s.reservation.stored > 0 && now.Before(s.reservation.storedUntil) ||
		(s.inflight > 0 || s.waiting > 0) && s.reservedLocked(now) > 0
}

// keeperEndedLocked notes that the keeper ended: while the store is down,
// it no longer hears of the share, and drops it (redrain).
func (s *State) keeperEndedLocked() {
	if !s.sharedRetryAt.IsZero() {
		s.reservation.sent = 0
		s.redrainLocked()
	}
}
