package gen

import "fmt"

// String says what is left of the level out of what it holds when full,
// its quota per window and when it is full again, such as "key: 553 of 600
// points left (300 per 60s), full again in 10s". A level that reports no
// capacity holds its quota; parallel has no window.
func (p RateLimitPolicy) String() string {
	capacity := p.Quota
	if p.Capacity != nil {
		capacity = *p.Capacity
	}
	s := fmt.Sprintf("%s: %d of %d %s left", p.Name, p.Remaining, capacity, p.Unit)
	if p.Window != nil {
		s += fmt.Sprintf(" (%d per %ds)", p.Quota, *p.Window)
	}
	if p.ResetSeconds > 0 {
		s += fmt.Sprintf(", full again in %ds", p.ResetSeconds)
	}
	return s
}
