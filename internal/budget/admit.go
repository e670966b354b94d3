package budget

import (
	"context"
	"time"
)

// Admit lets one attempt of c go. It refuses at once, without sending, a
// call that a known exhausted quota would refuse or that can never fit a
// documented level; otherwise it waits until every gate of the call lets it
// go: the server's waits, the lockout guard, and for a budgeted call each
// level it takes from, the pace and the in-flight cap (or the shared
// store). When ctx's deadline falls before the earliest moment it could go,
// it fails at once. A state that left the map of For (IdleTTL) passes the
// call on to the key's state there.
func (s *State) Admit(ctx context.Context, c *Call) (*Ticket, Event, error) {
	s = s.lock()
	now := time.Now()
	if err := s.fitsLocked(c); err != nil {
		s.mu.Unlock()
		return nil, Event{}, err
	}
	a := attempt{s: s, c: c, start: now}
	w := &c.w
	s.seq++
	w.seq, w.at, w.c = s.seq, nil, c
	s.waiting++
	for {
		if ctx.Err() != nil {
			return a.fail(&HoldError{Reason: a.reason, Err: ctxErr(ctx)})
		}
		if err := s.blockedLocked(c, now); err != nil {
			return a.fail(err)
		}
		g, d, why := s.holdLocked(c, now)
		c.flight = g == nil && s.slowStart.left > 0 // in the flight, also if it closes during the store's round trip
		lease, refusal := "", false
		if g == nil && s.sharedActiveLocked(now) {
			var err error
			if c.Budgeted {
				s.scopeSentLocked(c, now)
			}
			lease, d, why, refusal, err = s.acquireSharedLocked(c, now)
			now = time.Now()
			if lease == "" { // not admitted (err, why or a failed store)
				leaveRuns(c, true, false)
			}
			if err != nil {
				return a.fail(err)
			}
			if why == "" && lease == "" {
				continue // the store failed: the local budget decides
			}
			if why != "" {
				g = s.storeGateLocked(c, why)
			}
		}
		if g == nil {
			return a.admitLocked(lease, now)
		}
		if err := a.holdLocked(ctx, g, d, why, refusal, now); err != nil {
			return a.fail(err)
		}
		now = time.Now()
	}
}

// attempt is one Admit of a call: when it started, what held it last and
// the timer of Call.OnSlow.
type attempt struct {
	s        *State
	c        *Call
	start    time.Time
	reason   string        // what held it last: a level's name or a Reason constant
	wait     time.Duration // how long that was to hold it, worked out at waitFrom
	waitFrom time.Time
	slow     *time.Timer // fires when the attempt has waited SlowAfter, for c.OnSlow
}

// fitsLocked returns the refusal of a budgeted call bigger than a
// documented level can ever hold.
func (s *State) fitsLocked(c *Call) error {
	if !c.Budgeted {
		return nil
	}
	for _, t := range s.takesLocked(c) {
		if t.l.documented() && t.amount > t.l.fitSize() {
			return &NeverFitsError{Level: t.l.name, Unit: t.l.unit, Amount: t.amount, Size: t.l.fitSize()}
		}
	}
	return nil
}

// fail ends the attempt with err: it leaves its queue and the state's lock.
func (a *attempt) fail(err error) (*Ticket, Event, error) {
	s := a.s
	a.c.w.leave()
	s.waiting--
	s.mu.Unlock()
	return nil, Event{}, err
}

// admitLocked lets the attempt go with the shared store's lease, if any:
// it takes the call's demand, counts its wait and leaves the state's lock.
func (a *attempt) admitLocked(lease string, now time.Time) (*Ticket, Event, error) {
	s, c := a.s, a.c
	at := c.w.at
	s.takeLocked(c, now)
	if at != nil {
		at.wakeHead() // the first waiter, which it may have passed, looks again (and lets the next try)
	}
	var waited time.Duration
	if a.reason != "" { // held at least once, not merely slowed by a store's round trip
		waited = now.Sub(a.start)
		s.waits++
		s.waited += waited
	}
	c.ticket = Ticket{s: s, c: c, taken: c.takes, lease: lease, ref: s.leases[lease], start: now, flight: c.flight && c.Budgeted,
		unleased: c.Budgeted && lease == "" && s.shared != nil}
	if c.ticket.unleased {
		s.unleased++
		s.startKeeperLocked()
	}
	s.lastUse = now
	s.mu.Unlock()
	maybeSweep(now)
	return &c.ticket, Event{Wait: waited, Reason: a.reason}, nil
}

// takeLocked admits c: it leaves its queue and takes its demand.
func (s *State) takeLocked(c *Call, now time.Time) {
	c.w.leave()
	s.waiting--
	s.reserved++
	if !c.Budgeted {
		return
	}
	s.inflight++
	s.sent = s.sent.plus(sentCount{1, c.Cost})
	s.open = s.open.plus(sentCount{1, c.Cost})
	c.others = s.open.minus(s.sent).minus(sentCount{1, c.Cost})
	if !s.slowStart.learned && s.inflight == 1 {
		s.slowStart.at = now
	}
	s.joinFlightLocked(c, now)
	c.reported = nil
	if !c.Status {
		s.status.sentAt = now
	}
	takes := s.takesLocked(c)
	for i := range takes {
		t := &takes[i]
		t.mark, t.charged, t.freed = t.l.charged+t.l.inflight, t.l.charged, t.l.freedBy(now)
		t.early = t.l.early(t.amount, now)
		t.l.take(t.amount, now)
		t.probe = t.l.sent(now)
		t.l.inflight += t.amount
		t.l.pace.take(t.l.need(t.amount), now)
		t.l.usedAt = now
	}
	s.scopeSentLocked(c, now)
	amount, rate := s.paceUnitLocked(c, now)
	s.pace.arrived(rate, now)
	s.pace.take(amount, now)
	if s.meanCost == 0 {
		s.meanCost = c.Cost
	}
	s.meanCost += (c.Cost - s.meanCost) * meanCostWeight
	if c.Status {
		c.chargedAt = make(map[*level]float64, len(s.levels))
		for _, l := range s.levels {
			c.chargedAt[l] = l.charged
		}
	}
}
