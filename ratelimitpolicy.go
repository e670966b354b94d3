package bodo

import "fmt"

// String says what is left of the level out of what it holds when full,
// its quota per window and when it is full again, such as "key: 553 of 600
// points left (300 per 60s), full again in 10s". A level that reports no
// capacity holds its quota; parallel has no window.
func (p RateLimitPolicy) String() string {
	s := fmt.Sprintf("%s: %d of %d %s left", p.Name, p.Remaining, p.Capacity.Or(p.Quota), p.Unit)
	if w, ok := p.Window.Get(); ok {
		s += fmt.Sprintf(" (%d per %ds)", p.Quota, w)
	}
	if p.ResetSeconds > 0 {
		s += fmt.Sprintf(", full again in %ds", p.ResetSeconds)
	}
	return s
}
