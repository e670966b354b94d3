package budget

import (
	"context"
	"math"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
)

// storeLevel is l's model for the store: a level that showed it frees in
// steps (level.steps) frees only by its log, its moment and the answers,
// as the local budget has it; any other refills at its rate, since the
// processes that share a level learn its shape one by one, and one that
// took a level for a bucket's would stop the refill the others count on.
// A level the contract gives a capacity beyond its quota (the key's
// bucket) refills too: a process that first hears of it after others
// drained it below its quota reads the bucket's t as a step's. A level of
// this key alone is bounded by its log (level.logAvailable). It holds the
// documented capacity, or what the server showed it to hold.
func storeLevel(l *level, amount float64, now time.Time) budgetstore.Level {
	sl := budgetstore.Level{Name: l.name, Amount: amount, Size: l.fitSize()}
	sl.Taken = takenOf(l, sl.Size, now)
	if !l.steps || l.refills() || l.documentedBucket() {
		sl.Rate = l.rate(now)
	}
	if !l.shared && l.window > 0 && l.quota > 0 {
		sl.Quota, sl.Window = l.quota*l.share, l.window
	}
	return sl
}

// pacedLevel is storeLevel with the level's pace while it paces calls (it
// spreads them, or a refusal cut its share), as the local budget has it:
// what an Acquire takes.
func pacedLevel(l *level, amount float64, now time.Time) budgetstore.Level {
	sl := storeLevel(l, amount, now)
	l.pace.adapt(now)
	rate := l.paceRate(now)
	if l.pace.spreadOnly(now) && l.documentedBucket() {
		// The store refills it as a bucket (storeLevel): a steps reading
		// of a drained bucket spreads nothing.
		return sl
	}
	logged := l.pace.spread && sl.Quota > 0 && sl.Rate == 0
	if logged {
		// The store slows the spread and lowers its burst as the key's
		// log requires (what is left over the time until its oldest take
		// leaves), from the takes of every process; this process's log
		// holds its own.
		rate = l.grossRate()
	}
	if l.pace.paces(now) && rate > 0 && !math.IsInf(rate, 0) {
		sl.Pace, sl.Burst = l.pace.now()*rate, l.pace.burst(rate)
		if logged {
			sl.Burst = max(sl.Burst, spreadBurst*l.size())
		}
	}
	return sl
}

// acquireSharedLocked asks the store to admit c; s.mu is released during the
// request. It returns the lease when admitted, else why not and how long at
// least to wait, and whether the wait is one a refusal asked for
// (budgetstore.Grant.Refusal). A store that fails returns no lease and no reason: the
// caller falls back to the local budget, and the lease, which the store may
// have granted all the same, is released once the store answers again. A
// quota the store knows to be exhausted is the local refusal error, and so
// is a panic of the store or of the logger.
func (s *State) acquireSharedLocked(c *Call, now time.Time) (string, time.Duration, string, bool, error) {
	takes := s.takesLocked(c)
	levels := make([]budgetstore.Level, 0, len(takes))
	for _, t := range takes {
		levels = append(levels, pacedLevel(t.l, t.amount, now))
	}
	req := budgetstore.Acquire{
		Lease:         leaseID(),
		LeaseTTL:      leaseTTL,
		Levels:        levels,
		Cost:          c.Cost,
		KeyRate:       s.levels[Key].rate(now),
		MaxInFlight:   s.parallel,
		RefusalLimit:  RefusalLimit,
		RefusalWindow: RefusalWindow,
		Unbudgeted:    !c.Budgeted,
		Process:       s.member,
		ProcessTTL:    processTTL,
		Reservation:   s.reservationLocked(now),
	}
	ref := leaseRef{st: s.shared, seq: s.storeSeq, key: s.sharedKey}
	s.mu.Unlock()
	grant, err := safely(PanicStore, func() (budgetstore.Grant, error) {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		return ref.st.Acquire(ctx, ref.key, req)
	})
	logErr := s.storeResult(err, &grant.Members, false)
	s.mu.Lock()
	now = time.Now()
	s.reservationDoneLocked(req.Reservation, now)
	if err == nil {
		s.reservationStoredLocked(req.Reservation)
	}
	if err != nil || logErr != nil && grant.Admitted {
		// The store may have run it: end the lease there.
		s.keepLocked(pendingOp{leaseRef: ref, rel: budgetstore.Release{Lease: req.Lease, RefusalWindow: RefusalWindow, MaxInFlight: s.parallel}, at: now})
	}
	_, panicked := err.(*PanicError)
	switch {
	case panicked:
		return "", 0, "", false, err
	case err != nil || logErr != nil:
		return "", 0, "", false, logErr
	case grant.Admitted:
		ref.ttl = grant.LeaseTTL
		if ref.ttl <= 0 {
			ref.ttl = req.LeaseTTL
		}
		if s.leases == nil {
			s.leases = map[string]leaseRef{}
		}
		s.leases[req.Lease] = ref
		s.startKeeperLocked()
		s.heldLocked(req.Levels, grant.Levels, now)
		return req.Lease, 0, "", false, nil
	case grant.Reason == "quota" && len(grant.Policy) <= MaxNameBytes:
		s.blocks[grant.Policy] = block{until: sooner(grant.Until, now.Add(maxHold)), name: grant.Policy}
		if err := s.blockedLocked(c, now); err != nil {
			return "", 0, "", false, err
		}
		return "", sharedPoll, "quota", false, nil // the store knows a level this process has not learned yet
	case grant.Wait <= 0:
		return "", sharedPoll, grant.Reason, false, nil
	}
	return "", grant.Wait, grant.Reason, grant.Refusal, nil
}

// heldLocked keeps each pooled level that an admitted attempt took from
// (asked) no higher than the store said it holds after the take (held)
// plus the take, which the attempt's admission takes off the model next:
// the model then counts the other processes' takes too, and a share of it
// when the store fails (part) is a share of what the key has left. The
// store's figure is a word on the level, as an answer's r is (unconfirmed).
// Grants read in another order than the store gave them may take a call of
// this process off twice; that errs low, and the next word sets it right.
// A figure the store could not have meant (not a number, or more in debt
// than the level's size) is passed over.
func (s *State) heldLocked(asked, held []budgetstore.Level, now time.Time) {
	for _, h := range held {
		l := s.levels[h.Name]
		if l == nil || !l.pooled || math.IsNaN(h.Amount) || math.IsInf(h.Amount, 0) || h.Amount < -l.fitSize() {
			continue
		}
		for _, a := range asked {
			if a.Name == h.Name {
				l.refill(now)
				l.unconfirmed = 0
				l.cap(h.Amount + a.Amount)
			}
		}
	}
}

// takenOf is how far below size the model holds l.
func takenOf(l *level, size float64, now time.Time) float64 {
	return min(max(size-l.wholeLeft(now), 0), size)
}
