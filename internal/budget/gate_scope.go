package budget

import (
	"net/http"
	"time"
)

// scopeLocked holds c while a learned policy not tied to its kind may bind
// it: the kind sent the policy's quota within the policy's window and a
// call of it is still in flight (run.holds). The call goes when that
// answer has come, alone, so a burst meets a policy whose scope the server
// has not shown with one call, not with all it has in flight (rule 3).
func (s *State) scopeLocked(c *Call, now time.Time) (*gate, time.Duration, string) {
	for _, l := range s.order {
		if l.known {
			continue
		}
		if r := l.runOf(c.kind(), c.Target); r != nil && r.holds(l.quota*l.share, l.window, now) {
			return &r.gate, forever, l.name
		}
	}
	return nil, 0, ""
}

// scopeSentLocked counts c, admitted at now, in the runs of its kind.
func (s *State) scopeSentLocked(c *Call, now time.Time) {
	c.runs = c.runs[:0]
	for _, l := range s.order {
		if l.known {
			continue
		}
		if r := l.runOf(c.kind(), c.Target); r != nil && !r.cleared {
			if a := l.amountFor(c.Cost); a > 0 {
				r.send(a, l.window, now)
				c.runs = append(c.runs, levelRun{l, r})
			}
		}
	}
}

// scopeEndedLocked ends c's attempt in the runs it counted in, with its
// answer a (nil: none came), and lets the calls they held look again.
func scopeEndedLocked(c *Call, a *Answer) {
	accepted := a != nil && a.Status >= http.StatusOK && a.Status < http.StatusMultipleChoices
	for _, lr := range c.runs {
		lr.r.end(accepted, lr.l.quota*lr.l.share)
		lr.r.gate.wakeHead()
	}
	c.runs = c.runs[:0]
}

// levelRun is a run and the policy it counts for.
type levelRun struct {
	l *level
	r *run
}
