package budget

import "time"

// sharedLocked holds c, with the shared store active, behind the calls
// that the store holds for the key as a whole or at a level c takes from,
// while slow start holds the key, and at the slots of the fallback share
// while that applies; the store itself is asked after
// (acquireSharedLocked).
func (s *State) sharedLocked(c *Call, share fallbackShare, now time.Time) (*gate, time.Duration, string) {
	w := &c.w
	if s.storeGate.ahead(w) {
		return &s.storeGate, 0, ReasonStore
	}
	for _, t := range s.takesLocked(c) {
		if t.l.storeGate.ahead(w) {
			return &t.l.storeGate, 0, ReasonStore
		}
	}
	if _, held := s.slowStartDueLocked(now); held || s.slotGate.ahead(w) {
		return &s.slotGate, forever, ReasonInFlight
	}
	return s.overShareLocked(share, now)
}

// storeGateLocked is where c waits when the store held it for why: at
// the level why names, when c takes from it, so that the calls that take
// nothing from that level pass; else for the key as a whole.
func (s *State) storeGateLocked(c *Call, why string) *gate {
	for _, t := range s.takesLocked(c) {
		if t.l.name == why {
			return &t.l.storeGate
		}
	}
	return &s.storeGate
}

// drainingLocked holds every budgeted call of a process that lost the
// store until the calls the store admitted on others' shares have ended
// (storeResult), and until a request to the store has carried its share
// (unsentLocked).
func (s *State) drainingLocked(share fallbackShare, now time.Time) (*gate, time.Duration, string) {
	if share.on && now.Before(s.drainUntil) {
		return &s.slotGate, s.drainUntil.Sub(now), ReasonInFlight
	}
	return s.unsentLocked(share, now)
}
