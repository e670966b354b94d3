package budget

import "time"

// paceLocked holds c for the key's pace, unless it is a PastLevels call:
// until the pace has the call's unit (paceUnitLocked), or until the rate
// the server showed for the key level changes.
func (s *State) paceLocked(c *Call, now time.Time) (*gate, time.Duration, string) {
	if c.PastLevels {
		return nil, 0, ""
	}
	amount, rate := s.paceUnitLocked(c, now)
	d := s.pace.wait(amount, rate, now)
	if until := s.levels[Key].observedUntil; d > 0 && now.Before(until) {
		d = min(d, until.Sub(now)) // the rate changes then: look again
	}
	if d > 0 || s.paceGate.ahead(&c.w) {
		return &s.paceGate, d, ReasonPace
	}
	return nil, 0, ""
}

// meanCostWeight is the weight of each admitted call in State.meanCost.
const meanCostWeight = 0.05

// paceUnitLocked is what c takes from the key's pace, and the pace's rate
// at a share of 1: the call's points at the key level's rate, or while a
// limiter that gave no hint may be in front, one request at the pace's
// requestRate. Such a limiter most likely counts requests, and a burst of
// cheap calls is a burst to it; its rate does not change with what the
// calls cost.
func (s *State) paceUnitLocked(c *Call, now time.Time) (amount, rate float64) {
	if s.pace.counting(now) {
		return 1, s.pace.requestRate
	}
	return c.Cost, s.levels[Key].rate(now)
}

// adaptLocked raises the key's pace by a step per quiet interval since its
// last change; raised, it wakes the calls that wait for the pace and the
// slots. While calls wait for the pace, or for the slots its cut share
// leaves, the pace binds (pace.skipIdle).
func (s *State) adaptLocked(now time.Time) {
	if limit := s.pace.capOf(s.parallel); s.paceGate.head() != nil || limit < s.parallel && s.slotGate.head() != nil {
		s.pace.boundAt = now
	}
	if s.pace.adapt(now) {
		s.slotGate.wakeHead()
		s.paceGate.wakeHead()
	}
}
