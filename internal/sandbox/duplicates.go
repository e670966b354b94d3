package sandbox

import "encoding/json"

// DuplicateContactNames reports how many contact names were created more
// than once (names) and how many contacts those creates made beyond the
// first of each name (extra). It reads the event log, so a duplicate that was
// deleted since still counts. A workload that gives every contact a unique
// name sees a duplicate only when a create took effect twice: a write that
// was retried without reusing its Idempotency-Key.
func (s *Server) DuplicateContactNames() (names, extra int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]int{}
	for _, ev := range s.events {
		if ev.typ != "contact.created" {
			continue
		}
		var c struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(ev.data, &c) != nil {
			continue
		}
		seen[c.Name]++
	}
	for _, n := range seen {
		if n > 1 {
			names++
			extra += n - 1
		}
	}
	return names, extra
}
