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

// pruneRefusalsLocked drops the refusals older than the guard's window.
func (s *State) pruneRefusalsLocked(now time.Time) {
	cut := 0
	for cut < len(s.refusals) && now.Sub(s.refusals[cut]) >= RefusalWindow {
		cut++
	}
	if cut > 0 {
		s.refusals = s.refusals[cut:]
	}
}
