package budget

import (
	"slices"
	"time"
)

// anyPolicy is the policy of an exhausted quota, in a shared store, whose
// scope no process knew: it holds every call (budgetstore.Release.Block).
const anyPolicy = "*"

// block is an exhausted quota: until when, and for a policy the client has
// no model of, the one operation it refused.
type block struct {
	until time.Time
	op    string
	name  string
}

// blockedLocked returns the local refusal of a call that would hit an
// exhausted quota.
func (s *State) blockedLocked(c *Call, now time.Time) error {
	for id, b := range s.blocks {
		if !now.Before(b.until) {
			delete(s.blocks, id)
			continue
		}
		if b.op != "" && b.op == c.Op || b.name == anyPolicy || b.op == "" && slices.ContainsFunc(s.takesLocked(c), func(t take) bool { return t.l.name == b.name }) {
			return &ExhaustedError{Policy: b.name, Until: b.until}
		}
	}
	return nil
}
