package budget

import "time"

// Spend sets a level as if this key's own calls had just left only left of
// it: the server's word is left and the key's log holds the rest of the
// quota, taken now. Tests of the callers use it to make calls queue.
func (s *State) Spend(name string, left float64) {
	s = s.lock()
	defer s.mu.Unlock()
	now := time.Now()
	l := s.levels[name]
	if l == nil {
		return
	}
	l.refill(now)
	l.tokens, l.at = left, now
	if !l.shared {
		l.log.add(now, now, l.logAvailable(now)-left, l.window)
	}
}

// SetQuota sets a level's quota and documented capacity (0: none), as a
// plan other than the documented one would.
func (s *State) SetQuota(name string, quota, capacity float64) {
	s = s.lock()
	defer s.mu.Unlock()
	if l := s.levels[name]; l != nil {
		l.quota, l.capacity = quota, capacity
	}
}
