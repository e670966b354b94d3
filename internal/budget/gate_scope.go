package budget

import "time"

// scopeLocked holds c while a learned policy not tied to its kind may bind
// it (rule 3): the kind sent the policy's quota within the policy's window
// and a call of it is in flight, or a call of it waits already (run.wait).
// It goes when that answer has come, alone, so that a burst meets a policy
// whose scope the server has not shown with one call, not with all it has
// in flight.
func (s *State) scopeLocked(c *Call, now time.Time) (g *gate, d time.Duration, why string) {
	s.eachRunLocked(c, func(l *level, r *run) bool {
		if wait := r.wait(l.quota*l.share, l.window, now); wait > 0 || r.gate.ahead(&c.w) {
			g, d, why = &r.gate, wait, l.name
			return false
		}
		return true
	})
	return g, d, why
}

// eachRunLocked calls f with each run of c's kind on a learned policy not
// tied to it (level.runOf) until f returns false; a key that learned no
// policy has none, and costs its calls nothing here.
func (s *State) eachRunLocked(c *Call, f func(*level, *run) bool) {
	if s.bounds.policies+s.bounds.partitions == 0 {
		return
	}
	for _, l := range s.order {
		if r := l.runOf(c.kind(), c.Target); r != nil && !f(l, r) {
			return
		}
	}
}

// scopeSentLocked counts c, sent at now, in the runs of its kind, once per
// attempt: a call that asks the shared store counts while it does, since
// the store's round trip lets other calls look meanwhile.
func (s *State) scopeSentLocked(c *Call, now time.Time) {
	if c.scoped {
		return
	}
	c.scoped = true
	c.runs = c.runsBuf[:0]
	s.eachRunLocked(c, func(l *level, r *run) bool {
		if a := l.amountFor(c.Cost); a > 0 && !r.cleared {
			r.send(a, l.window, now)
			l.usedAt = now
			c.runs = append(c.runs, levelRun{r: r, amount: a, start: r.start, past: r.sent > l.quota*l.share})
		}
		return true
	})
}

// leaveRuns takes c's attempt out of the runs it counted in, and what it
// counted in the window it was sent in when unsent (the shared store did
// not admit it); accepted (a 2xx answer) clears the runs it was past the
// quota of: only the answer to a call sent past the quota, in the window
// it was sent in, says that the policy does not bind the kind. The calls
// they held look again.
func leaveRuns(c *Call, unsent, accepted bool) {
	for _, lr := range c.runs {
		lr.r.inflight--
		if lr.r.start.Equal(lr.start) {
			if unsent {
				lr.r.sent -= lr.amount
			}
			lr.r.cleared = lr.r.cleared || accepted && lr.past
		}
		lr.r.gate.wakeHead()
	}
	c.runs, c.scoped = c.runs[:0], false
}

// levelRun is what an attempt counted in the run r of a policy.
type levelRun struct {
	r      *run
	amount float64
	start  time.Time // the run's window it counted in
	past   bool      // it was sent past the quota
}
