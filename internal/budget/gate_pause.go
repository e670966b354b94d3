package budget

import "time"

// pauseLocked holds every call while the key is locked out (lockGate),
// and a budgeted call while the server's wait for every call of the key
// runs (serverGate, heldUntil), each behind the calls that wait there
// already. A call without a budget meets the lockout only.
func (s *State) pauseLocked(c *Call, now time.Time) (*gate, time.Duration, string) {
	if now.Before(s.lockedUntil) || s.lockGate.ahead(&c.w) {
		return &s.lockGate, max(s.lockedUntil.Sub(now), 0), ReasonLockout
	}
	if c.Budgeted && (now.Before(s.heldUntil) || s.serverGate.ahead(&c.w)) {
		return &s.serverGate, max(s.heldUntil.Sub(now), 0), ReasonServer
	}
	return nil, 0, ""
}

// serverWaitLocked returns how long g holds c for a wait the server asked
// of the key, given d and why from holdLocked or the shared store
// (refusal: the store's wait is a refusal's): a refusal's, or the moment
// of a level's word when c waits for it and whatever shape the level has
// it would wait longer than c's MaxHold (a refusal would ask as much);
// false when what holds it is the client's own model (a level's refill or
// log, the pace, the slots, the guard).
func (s *State) serverWaitLocked(c *Call, g *gate, d time.Duration, why string, refusal bool, now time.Time) (time.Duration, bool) {
	switch {
	case g == &s.lockGate, g == &s.serverGate, refusal, g == &s.storeGate && why == ReasonLockout:
		return d, true
	case g.level != nil && now.Before(g.level.holdUntil):
		return g.level.holdUntil.Sub(now), true
	case g.level != nil && now.Before(g.level.moment.at) && !now.Add(d).Before(g.level.moment.at) &&
		g.level.leastWait(s.amountLocked(c, g.level)) > c.MaxHold:
		return g.level.moment.at.Sub(now), true
	}
	return 0, false
}
