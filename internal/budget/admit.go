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
	s = s.live()
	s.mu.Lock()
	if s.retired.Load() { // retired since live looked
		s.mu.Unlock()
		return s.Admit(ctx, c)
	}
	now := time.Now()
	start := now
	if c.Budgeted {
		for _, t := range s.takesLocked(c) {
			if t.l.documented() && t.amount > t.l.fitSize() {
				s.mu.Unlock()
				return nil, Event{}, &NeverFitsError{Level: t.l.name, Unit: t.l.unit, Amount: t.amount, Size: t.l.fitSize()}
			}
		}
	}
	w := &c.w
	s.seq++
	w.seq, w.at, w.c = s.seq, nil, c
	s.waiting++
	var slow *time.Timer // fires when the attempt has waited SlowAfter, for c.OnSlow
	fail := func(err error) (*Ticket, Event, error) {
		w.leave()
		s.waiting--
		s.mu.Unlock()
		if slow != nil {
			slow.Stop()
		}
		return nil, Event{}, err
	}
	var reason string
	var wait time.Duration
	var waitFrom time.Time // when wait was worked out
	for {
		if ctx.Err() != nil {
			return fail(&HoldError{Reason: reason, Err: ctxErr(ctx)})
		}
		if err := s.blockedLocked(c, now); err != nil {
			return fail(err)
		}
		g, d, why := s.holdLocked(c, now)
		lease, refusal := "", false
		if g == nil && s.sharedActiveLocked(now) {
			var err error
			lease, d, why, refusal, err = s.acquireSharedLocked(c, now)
			now = time.Now()
			if err != nil {
				return fail(err)
			}
			if why == "" && lease == "" {
				continue // the store failed: the local budget decides
			}
			if why != "" {
				g = &s.storeGate
			}
		}
		if g == nil {
			passed := w.at
			if passed != nil && passed.head() == w {
				passed = nil
			}
			s.takeLocked(c, now)
			if passed != nil {
				passed.wakeHead() // it passed the first waiter, which looks again (and lets the next try)
			}
			var waited time.Duration
			if reason != "" { // held at least once, not merely slowed by a store's round trip
				waited = now.Sub(start)
				s.waits++
				s.waited += waited
			}
			c.ticket = Ticket{s: s, c: c, taken: c.takes, budgeted: c.Budgeted, lease: lease, ref: s.leases[lease], start: now}
			s.lastUse = now
			s.mu.Unlock()
			if slow != nil {
				slow.Stop()
			}
			maybeSweep(now)
			return &c.ticket, Event{Wait: waited, Reason: reason}, nil
		}
		reason, wait, waitFrom = why, d, now
		if asked, ok := s.serverWaitLocked(g, d, why, refusal, now); ok && c.MaxHold > 0 && asked > c.MaxHold {
			return fail(&HoldError{Reason: why, Wait: asked, Err: ErrHoldTooLong})
		}
		var statusDue time.Time // when it asks again for the status, held all along
		if c.OnHeld != nil && g.level != nil {
			statusDue = s.reaskDueLocked(g.level)
		}
		// It says what holds it when that changes, and again when the
		// level that holds it is due a status (reaskDueLocked): the
		// first status may have come too early to show the level
		// refilling, and the calls that wait all along need the next.
		sayHeld := c.OnHeld != nil && (c.heldSaid != why || !statusDue.IsZero() && !now.Before(statusDue))
		c.heldSaid = why
		if deadline, ok := ctx.Deadline(); ok && wait != forever && deadline.Sub(now) < wait {
			if sayHeld {
				// It waits for the status out of every queue, so that it
				// holds no one back, the status request least of all.
				w.leave()
				s.mu.Unlock()
				if asked := c.OnHeld(why); asked != nil {
					select {
					case <-asked:
					case <-ctx.Done():
					}
					s.mu.Lock()
					now = time.Now()
					continue
				}
				s.mu.Lock()
			}
			return fail(&HoldError{Reason: why, Wait: wait, Err: context.DeadlineExceeded})
		}
		if w.wake == nil {
			w.wake = make(chan struct{}, 1)
		}
		select {
		case <-w.wake: // what it said is in the state just read
		default:
		}
		w.enter(g)
		head := g.head() == w
		timerWait := wait
		if head && g.level != nil && len(g.q.ws) > 1 {
			// A cheap call behind may fit before the first does: look
			// again whenever the level frees something, and let the
			// waiters behind try to pass (level.backfills).
			timerWait = min(timerWait, g.level.nextFree(now))
			if w.promisedBy == g.level {
				// When its promise runs out, what was held back to keep
				// it may go: look again then.
				if d := w.promised.Add(w.slack).Sub(now); d > 0 {
					timerWait = min(timerWait, d+time.Millisecond)
				}
			}
			g.wakeBehind()
		}
		if d, held := s.slowStartDueLocked(now); head && g == &s.slotGate && held {
			timerWait = min(timerWait, d)
		}
		if head && !statusDue.IsZero() {
			next := statusDue
			if !next.After(now) {
				next = now.Add(statusEvery) // it asks now: the next is due then
			}
			timerWait = min(timerWait, next.Sub(now))
		}
		s.mu.Unlock()
		if sayHeld {
			c.OnHeld(why)
		}

		var timer *time.Timer
		var timeout <-chan time.Time
		if head && timerWait > 0 && timerWait != forever {
			timer = time.NewTimer(timerWait)
			timeout = timer.C
		}
		var speak <-chan time.Time
		if c.OnSlow != nil && !c.slowSaid {
			if slow == nil {
				slow = time.NewTimer(start.Add(SlowAfter).Sub(now))
			}
			speak = slow.C
		}
	held:
		for {
			select {
			case <-w.wake:
			case <-timeout:
			case <-ctx.Done():
			case <-speak:
				// Still held: say so once, then go on waiting for what
				// the attempt waited for.
				speak = nil
				s.mu.Lock()
				c.slowSaid = true
				sw := s.slowLocked(c, reason, wait, waitFrom, start)
				s.mu.Unlock()
				c.OnSlow(ctx, sw)
				continue
			}
			break held
		}
		if timer != nil {
			timer.Stop()
		}
		s.mu.Lock()
		now = time.Now()
	}
}

// slowLocked describes c, held since start: reason and wait are what
// holdLocked said at waitFrom. Held by a level, c is said to wait for the
// level of its call it waits for longest, for what the calls ahead of it in
// its queue and it need of that level; of levels it waits for equally long,
// the one of its class (write, delete, egress) rather than the points.
func (s *State) slowLocked(c *Call, reason string, wait time.Duration, waitFrom, start time.Time) SlowWait {
	now := time.Now()
	w := &c.w
	sw := SlowWait{Op: c.Op, Reason: reason, Waited: now.Sub(start), Remaining: -1}
	g := w.at
	if g == nil {
		return sw
	}
	for _, o := range g.q.ws {
		if o.seq > w.seq {
			sw.Behind++
		}
	}
	if g.level == nil {
		if wait != forever {
			sw.Remaining = max(wait-now.Sub(waitFrom), 0)
		}
		return sw
	}
	longest := time.Duration(0)
	for _, t := range c.takes {
		l := t.l
		need := l.need(t.amount)
		for _, o := range g.q.ws {
			if o.seq < w.seq && o.c != nil {
				for _, ot := range o.c.takes {
					if ot.l == l {
						need += l.need(ot.amount)
					}
				}
			}
		}
		l.refill(now)
		d := l.wait(need, now)
		if d == forever && l.grossRate() > 0 {
			d = durationOf(max(need-l.available(now), 0) / l.grossRate())
		}
		if d != forever {
			d = max(d, l.holdUntil.Sub(now))
		}
		if d > 0 && d >= longest {
			longest, sw.Reason = d, l.name
		}
	}
	if longest != forever {
		sw.Remaining = longest // 0: it goes as soon as it looks again
	}
	return sw
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
	if !s.learned && s.inflight == 1 {
		s.slowStartAt = now
	}
	c.reported = nil
	c.attempts++
	takes := s.takesLocked(c)
	for i := range takes {
		t := &takes[i]
		t.mark, t.landed = t.l.admitted, t.l.landed
		t.l.admitted += t.amount
		t.l.tokens -= t.amount
		t.l.sinceSeen += t.amount
		t.l.inflight += t.amount
		t.l.pace.take(t.l.need(t.amount), now)
		t.l.usedAt = now
	}
	amount, _ := s.paceUnitLocked(c, now)
	s.pace.take(amount, now)
	if s.meanCost == 0 {
		s.meanCost = c.Cost
	}
	s.meanCost += (c.Cost - s.meanCost) * meanCostWeight
	if c.Status {
		c.landedAt = make(map[*level]float64, len(s.levels))
		for _, l := range s.levels {
			c.landedAt[l] = l.landed
		}
	}
}
