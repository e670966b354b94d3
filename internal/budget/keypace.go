package budget

import "time"

// meanCostWeight is the weight of each admitted call in State.meanCost.
const meanCostWeight = 0.05

// paceUnitLocked is what c takes from the key's pace, and the pace's rate
// at a share of 1: the call's points at the key level's rate, or while a
// limiter that gave no hint may be in front, one request at the rate of
// requests that the key level's rate allows calls of the mean cost. Such
// a limiter most likely counts requests, and a burst of cheap calls is a
// burst to it.
func (s *State) paceUnitLocked(c *Call, now time.Time) (amount, rate float64) {
	rate = s.levels[Key].rate(now)
	if s.pace.hintless.IsZero() || now.Sub(s.pace.hintless) >= hintlessFor {
		return c.Cost, rate
	}
	return 1, rate / max(s.meanCost, 1)
}

// adaptLocked raises the key's pace and those of its levels by a step per
// quiet interval since their last change; a raised one wakes its waiters.
func (s *State) adaptLocked(now time.Time) {
	if s.pace.adapt(now) {
		s.slotGate.wakeHead()
		s.paceGate.wakeHead()
	}
}
