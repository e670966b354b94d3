package budget

import "time"

// sharedLocked holds w, with the shared store active, behind the calls
// that wait for the store, while slow start holds the key, and at the
// slots of the fallback share while that applies; the store itself is
// asked after (acquireSharedLocked).
func (s *State) sharedLocked(w *waiter, share fallbackShare, now time.Time) (*gate, time.Duration, string) {
	if s.storeGate.ahead(w) {
		return &s.storeGate, 0, ReasonStore
	}
	if _, held := s.slowStartDueLocked(now); held || s.slotGate.ahead(w) {
		return &s.slotGate, forever, ReasonInFlight
	}
	return s.overShareLocked(share, now)
}

// drainingLocked holds every budgeted call of a process that lost the
// store until the calls the store admitted on others' shares have ended
// (drainLocked).
func (s *State) drainingLocked(share fallbackShare, now time.Time) (*gate, time.Duration, string) {
	if share.on && now.Before(s.drainUntil) {
		return &s.slotGate, s.drainUntil.Sub(now), ReasonInFlight
	}
	return nil, 0, ""
}
