package budget

import "time"

// The lockout guard. The server locks a key for 5 minutes after more than 50
// refusals in 60 s; the client keeps the key's refusals, plus the attempts in
// flight that could still be refused, at or below half of that in any 60 s
// window, and holds further attempts on the key until the window clears.
const (
	RefusalLimit  = 25
	RefusalWindow = 60 * time.Second
)

// guardLocked holds w while the refusals of the guard's window and the
// attempts in flight reach RefusalLimit (or the fallback share's part of
// it): until the oldest refusal leaves the window, or forever when only
// an answer can free the guard.
func (s *State) guardLocked(w *waiter, share fallbackShare, now time.Time) (*gate, time.Duration, string) {
	s.pruneRefusalsLocked(now)
	guard := RefusalLimit
	if share.on {
		guard = share.refusals
	}
	if len(s.refusals)+s.reserved >= guard || s.guardGate.ahead(w) {
		d := forever
		if len(s.refusals)+s.reserved < guard {
			d = 0
		} else if len(s.refusals) > 0 {
			d = s.refusals[0].Add(RefusalWindow).Sub(now)
		}
		if share.on {
			d = min(d, s.reprobeLocked(now))
		}
		return &s.guardGate, d, ReasonGuard
	}
	return nil, 0, ""
}

func (s *State) pruneRefusalsLocked(now time.Time) {
	cut := 0
	for cut < len(s.refusals) && now.Sub(s.refusals[cut]) >= RefusalWindow {
		cut++
	}
	s.refusals = s.refusals[cut:]
}
