package budget

import (
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
)

// release collects what an attempt with a lease tells the store; its
// methods do nothing on a nil release (no lease).
type release struct {
	budgetstore.Release
	ref leaseRef
}

// releaseFor starts the release of t's lease, if it has one, with the
// linger of its slot, and notes how long t's call took (the drain,
// storeResult).
func (s *State) releaseFor(t *Ticket, linger time.Duration) *release {
	now := time.Now()
	s.rollLongestLocked(now)
	s.longest = max(s.longest, now.Sub(t.start))
	if t.lease == "" {
		return nil
	}
	delete(s.leases, t.lease)
	return &release{Release: budgetstore.Release{Lease: t.lease, Linger: linger, RefusalLimit: RefusalLimit, RefusalWindow: RefusalWindow}, ref: t.ref}
}

// refund gives amount of l back; with turn, with the level's pace, whose
// turn goes back too.
func (r *release) refund(l *level, amount float64, turn bool, now time.Time) {
	if r != nil && turn {
		r.Refund = append(r.Refund, pacedLevel(l, amount, now))
	} else if r != nil {
		r.Refund = append(r.Refund, storeLevel(l, amount, now))
	}
}

func (r *release) left(l *level, remaining float64, reset time.Duration, now time.Time) {
	if r != nil {
		sl := storeLevel(l, remaining, now)
		sl.Reset = max(reset, 0)
		markSteps(&sl, l, now)
		r.Left = append(r.Left, sl)
	}
}

// markSteps tells the store in sl to refill l for no one until its moment
// (budgetstore.Level.Steps), and how long until that moment, while l
// refills only from its moments (defers).
func markSteps(sl *budgetstore.Level, l *level, now time.Time) {
	if l.defers(now) {
		sl.Steps, sl.Reset = true, l.moment.at.Sub(now)
	}
}

// resay tells the shared store again of the words on l this release
// carries, as the model now takes them (defers): a refusal that showed l
// frees in steps came after its own word was taken.
func (r *release) resay(l *level, now time.Time) {
	if r == nil {
		return
	}
	for i := range r.Left {
		if sl := &r.Left[i]; sl.Name == l.name {
			sl.Rate = l.rate(now)
			markSteps(sl, l, now)
		}
	}
}

func (r *release) owe(l *level, owe float64, hold time.Duration, now time.Time) {
	if r != nil {
		sl := storeLevel(l, owe, now)
		sl.Hold = max(hold, 0)
		markSteps(&sl, l, now)
		r.Owe = append(r.Owe, sl)
	}
}

func (r *release) pause(until time.Time) {
	if r != nil {
		r.PausedUntil = later(r.PausedUntil, until)
	}
}

func (r *release) cut(factor float64) {
	if r != nil {
		r.Cut, r.CutFactor = true, factor
	}
}

func (r *release) block(policy string, until time.Time) {
	if r != nil {
		r.Block, r.BlockUntil = policy, until
	}
}

// releaseSharedLocked sends rel to the store its lease came from; it
// unlocks s.mu.
func (s *State) releaseSharedLocked(rel *release, refused bool, now time.Time) {
	if rel == nil {
		s.mu.Unlock()
		return
	}
	rel.Refused, rel.MaxInFlight, rel.Process = refused, s.parallel, s.member
	if rel.ref.seq == s.storeSeq && s.sharedActiveLocked(now) { // one kept for the keeper would count as sent (unsentLocked)
		rel.Reservation = s.reservationLocked(now)
	}
	s.sendLocked(pendingOp{leaseRef: rel.ref, rel: rel.Release, at: now}, now)
}

// refundSharedLocked gives amount of l back in the store that admitted c's
// last attempt; it unlocks s.mu. An attempt admitted on the local budget
// took nothing there.
func (s *State) refundSharedLocked(c *Call, l *level, amount float64, now time.Time) {
	if c.ticket.lease == "" {
		s.mu.Unlock()
		return
	}
	sl := storeLevel(l, amount, now)
	sl.ID = leaseID() // the store applies it once, however often a lost reply makes it come
	s.sendLocked(pendingOp{leaseRef: c.ticket.ref, refund: []budgetstore.Level{sl}, at: now}, now)
}

// sendLocked sends op now; it unlocks s.mu. While op's store is the
// current one and down, or when the send fails, the keeper sends it later,
// so that the slot it frees and what it teaches are not lost for a lease
// time. A failure counts against the store only while that is current.
func (s *State) sendLocked(op pendingOp, now time.Time) {
	if op.seq == s.storeSeq && !s.sharedActiveLocked(now) {
		s.keepLocked(op)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if err := s.send(op, now); err != nil {
		s.mu.Lock()
		s.keepLocked(op)
		current := op.seq == s.storeSeq
		s.mu.Unlock()
		if current {
			_ = s.storeResult(err, nil, false)
		}
	}
}
