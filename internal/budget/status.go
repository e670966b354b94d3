package budget

import "time"

// A level the server rarely names (RateLimit carries only the narrowest
// policy, so the org level of a key that others drain may show only in a
// refusal) can hold calls on a word of the server that is long out of date.
// When a call has waited SlowAfter for such a level, the client asks GET
// /v1/rate_limit (WantsStatus) and hands the answer to ObserveStatus.
const (
	// StaleAfter is how old the server's last word on a level may be
	// before a call held by it makes the client ask for the status.
	StaleAfter = 30 * time.Second
	// statusEvery spaces the status requests of one key.
	statusEvery = 30 * time.Second
)

// LevelStatus is one level of the key's rate-limit status as the server
// reported it (GET /v1/rate_limit).
type LevelStatus struct {
	Name      string
	Remaining float64
}

// WantsStatus reports whether the client should ask the server for the key's
// rate-limit status now, because a call is held by the named level and the
// server has said nothing of it for StaleAfter. It answers true at most
// once per statusEvery.
func (s *State) WantsStatus(name string, now time.Time) bool {
	s = s.live()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.levels[name]
	if l == nil || now.Sub(l.seenAt) < StaleAfter || now.Before(s.statusAt.Add(statusEvery)) {
		return false
	}
	s.statusAt = now
	return true
}

// ObserveStatus takes the server's word on every level of a rate-limit
// status: what it reports left, less the attempts in flight it cannot have
// counted. A refusal's wait still holds its level until it ends.
func (s *State) ObserveStatus(levels []LevelStatus) {
	s = s.live()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, st := range levels {
		l := s.levels[st.Name]
		if l == nil {
			continue
		}
		l.refill(now)
		l.seenMax = max(l.seenMax, st.Remaining)
		if l.quota > 0 && st.Remaining > l.quota*l.share+0.5 {
			l.bucket = true
		}
		l.tokens = st.Remaining - l.inflight
		l.sinceSeen = 0
		l.seenAt = now
		l.gate.wakeHead()
	}
}
