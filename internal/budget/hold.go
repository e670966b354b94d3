package budget

import (
	"context"
	"time"
)

// holdLocked waits, the state's lock left meanwhile, while g holds the
// attempt for d because of why (refusal: the shared store's wait is a
// refusal's), until what it waits for may have changed; it returns with
// the lock held again. It fails the attempt with a HoldError when the
// server's wait is longer than the call's MaxHold or the context's
// deadline falls before the wait ends.
func (a *attempt) holdLocked(ctx context.Context, g *gate, d time.Duration, why string, refusal bool, now time.Time) error {
	s, c, w := a.s, a.c, &a.c.w
	a.reason, a.wait, a.waitFrom = why, d, now
	if asked, ok := s.serverWaitLocked(c, g, d, why, refusal, now); ok && c.MaxHold > 0 && asked > c.MaxHold {
		return &HoldError{Reason: why, Wait: asked, Err: ErrHoldTooLong}
	}
	// When it asks again for the status, held all along: only about a
	// level the status takes nothing from (not points), which cannot
	// refuse it; a points level the model believes empty may, and then
	// says itself when it frees (t).
	var statusDue time.Time
	if c.OnHeld != nil && g.level != nil && g.level.unit != "points" {
		statusDue, _ = s.statusDueLocked(g.level)
	}
	// It says what holds it when that changes, and again when the
	// level that holds it is due a status (statusDue): the
	// first status may have come too early to show the level
	// refilling, and the calls that wait all along need the next.
	// A status that failed at once (the budget would not let it out) is
	// due again at once: the call asks at most once per idleStatusEvery,
	// so that it never spins on it.
	tell := c.OnHeld != nil && (c.heldReason != why || !statusDue.IsZero() && !now.Before(statusDue)) &&
		(c.heldAt.IsZero() || !now.Before(c.heldAt.Add(idleStatusEvery)))
	c.heldReason = why
	if tell {
		c.heldAt = now
	}
	if deadline, ok := ctx.Deadline(); ok && a.wait != forever && deadline.Sub(now) <= a.wait {
		if tell {
			// It waits for the status out of every queue, so that it
			// holds no one back, the status request least of all.
			w.leave()
			s.mu.Unlock()
			asked, err := a.onHeld(why)
			if asked != nil {
				select {
				case <-asked:
				case <-ctx.Done():
				}
			}
			s.mu.Lock()
			if err != nil || asked != nil {
				return err
			}
		}
		return &HoldError{Reason: why, Wait: a.wait, Err: context.DeadlineExceeded}
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
	timerWait := a.wait
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
		if !w.wokeBehind.Equal(now) {
			// Once per moment: a waiter behind that looks again and
			// wakes it (passing it, or moving) changes nothing more
			// until time moves or an answer comes, which wakes it anyway.
			w.wokeBehind = now
			g.wakeBehind()
		}
	}
	if d, held := s.slowStartDueLocked(now); head && g == &s.slotGate && held {
		timerWait = min(timerWait, d)
	}
	if head && !statusDue.IsZero() {
		next := statusDue
		if !next.After(now) {
			next = now.Add(idleStatusEvery) // it asks now: the next is due then at the soonest
		}
		timerWait = min(timerWait, next.Sub(now))
	}
	if !head && !(why == ReasonPace && g.firstOfSize(w)) {
		// Only the first of the queue looks again on its own, and the
		// first of a size behind it that waits for the level's pace (it
		// may pass the first, and no one else wakes it then); the calls
		// of its size behind it go in their order.
		timerWait = 0
	}
	s.mu.Unlock()
	var err error
	if tell {
		_, err = a.onHeld(why)
	}
	if err == nil {
		err = a.sleep(ctx, timerWait, now)
	}
	s.mu.Lock()
	return err
}

// onHeld tells c.OnHeld what holds the attempt now, without the state's
// lock; a panic there is the attempt's error, as one of OnSlow is.
func (a *attempt) onHeld(why string) (<-chan struct{}, error) {
	return safely(PanicStatus, func() (<-chan struct{}, error) { return a.c.OnHeld(why), nil })
}

// sleep waits, without the state's lock, until the attempt is woken, d
// passes (none when 0 or forever) or ctx ends; Call.OnSlow hears of the
// call meanwhile once it has waited SlowAfter. A panic in OnSlow (the
// client's logger) ends the wait with a PanicError: the attempt fails with
// it and leaves its queue, and the key's other calls go on.
func (a *attempt) sleep(ctx context.Context, d time.Duration, now time.Time) error {
	s, c, w := a.s, a.c, &a.c.w
	var timer *time.Timer
	var timeout <-chan time.Time
	if d > 0 && d != forever {
		timer = time.NewTimer(d)
		defer timer.Stop()
		timeout = timer.C
	}
	var speak <-chan time.Time
	if c.OnSlow != nil && !c.slowReported {
		if a.slow == nil {
			a.slow = time.NewTimer(a.start.Add(SlowAfter).Sub(now))
		}
		speak = a.slow.C
	}
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
			c.slowReported = true
			sw := a.slowLocked()
			s.mu.Unlock()
			if _, err := safely(PanicLogger, func() (struct{}, error) { c.OnSlow(ctx, sw); return struct{}{}, nil }); err != nil {
				return err
			}
			continue
		}
		return nil
	}
}

// slowLocked describes a's call c, held since start: reason and wait are
// what holdLocked said at waitFrom. Held by a level, c is said to wait for
// the level of its call it waits for longest, for what the calls ahead of
// it in its queue and it need of that level; of levels it waits for equally
// long, the one of its class (write, delete, egress) rather than the points.
func (a *attempt) slowLocked() SlowWait {
	now := time.Now()
	c, w := a.c, &a.c.w
	sw := SlowWait{Op: c.Op, Reason: a.reason, Waited: now.Sub(a.start), Remaining: -1}
	g := w.at // the gate holdLocked entered before the attempt slept
	for _, o := range g.q.ws {
		if o.seq > w.seq {
			sw.Behind++
		}
	}
	if g.level == nil {
		if a.wait != forever {
			sw.Remaining = max(a.wait-now.Sub(a.waitFrom), 0)
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
