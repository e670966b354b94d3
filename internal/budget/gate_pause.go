package budget

import "time"

// pauseLocked holds every call while the key is locked out, and a budgeted
// call while the server's wait for every call of the key runs (heldUntil):
// the later of the two, and a budgeted call behind the calls that wait
// for it already.
func (s *State) pauseLocked(c *Call, now time.Time) (*gate, time.Duration, string) {
	pausedUntil := s.lockedUntil
	why := ReasonLockout
	if c.Budgeted && s.heldUntil.After(pausedUntil) {
		pausedUntil, why = s.heldUntil, ReasonServer
	}
	if now.Before(pausedUntil) || c.Budgeted && s.pauseGate.ahead(&c.w) {
		return &s.pauseGate, max(pausedUntil.Sub(now), 0), why
	}
	return nil, 0, ""
}

// serverWaitLocked returns how long g holds a call for a wait the server
// asked of the key, given d and why from holdLocked or the shared store
// (refusal: the store's wait is a refusal's); false when what holds it is
// the client's own model (a level's tokens, the pace, the slots, the
// guard).
func (s *State) serverWaitLocked(g *gate, d time.Duration, why string, refusal bool, now time.Time) (time.Duration, bool) {
	switch {
	case g == &s.pauseGate, refusal, g == &s.storeGate && why == ReasonLockout:
		return d, true
	case g.level != nil && now.Before(g.level.holdUntil):
		return g.level.holdUntil.Sub(now), true
	}
	return 0, false
}
