package bodo

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// RateLimitPolicy is one rate-limit level of the key and its state as the
// server counts it now, an entry of RateLimitStatus.Policies. On the wire
// Window and Reset are whole seconds (window, resetSeconds).
type RateLimitPolicy struct {
	// Name is the level: key, write, parallel, principal, org, delete,
	// delete-day, egress, or a policy of the server's own.
	Name string
	// Unit is what the level counts: points, requests, records or
	// concurrent-requests.
	Unit  string
	Quota int // what the level grants per Window, in Unit
	// Window is the quota's window; zero for parallel, which counts the
	// calls in flight.
	Window time.Duration
	// Capacity is what the level holds when full: Quota, or more for a
	// token bucket with a burst (the key level's 600 points).
	Capacity  int
	Remaining int // what is left now, in Unit
	// Reset is how long until the level is full again; zero when it is.
	Reset time.Duration
}

// String says what is left of the level out of what it holds when full,
// its quota per window and when it is full again, such as "key: 553 of 600
// points left (300 per 1m0s), full again in 10s". Parallel has no window.
func (p RateLimitPolicy) String() string {
	s := fmt.Sprintf("%s: %d of %d %s left", p.Name, p.Remaining, p.Capacity, p.Unit)
	if p.Window > 0 {
		s += fmt.Sprintf(" (%d per %v)", p.Quota, p.Window)
	}
	if p.Reset > 0 {
		s += fmt.Sprintf(", full again in %v", p.Reset)
	}
	return s
}

// rateLimitPolicyJSON is the wire form of a RateLimitPolicy.
type rateLimitPolicyJSON struct {
	Name         string     `json:"name"`
	Quota        int        `json:"quota"`
	Window       Opt[int64] `json:"window,omitzero"`
	Unit         string     `json:"unit"`
	Remaining    int        `json:"remaining"`
	ResetSeconds int64      `json:"resetSeconds"`
	Capacity     Opt[int]   `json:"capacity,omitzero"`
}

// maxSeconds is the longest duration in whole seconds that time.Duration
// holds.
const maxSeconds = math.MaxInt64 / int64(time.Second)

// UnmarshalJSON reads the wire form: window and resetSeconds in seconds,
// capacity absent when it is the quota. A negative number, or seconds
// longer than a time.Duration holds, is an error.
func (p *RateLimitPolicy) UnmarshalJSON(b []byte) error {
	var w rateLimitPolicyJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	capacity := w.Capacity.Or(w.Quota)
	if w.Quota < 0 || w.Remaining < 0 || capacity < 0 {
		return fmt.Errorf("bodo: rate-limit policy %q: a negative quota, remaining or capacity", w.Name)
	}
	reset, err := seconds(w.Name, "resetSeconds", w.ResetSeconds)
	if err != nil {
		return err
	}
	window, err := seconds(w.Name, "window", w.Window.Value())
	if err != nil {
		return err
	}
	*p = RateLimitPolicy{Name: w.Name, Unit: w.Unit, Quota: w.Quota, Window: window,
		Capacity: capacity, Remaining: w.Remaining, Reset: reset}
	return nil
}

func seconds(policy, member string, n int64) (time.Duration, error) {
	if n < 0 || n > maxSeconds {
		return 0, fmt.Errorf("bodo: rate-limit policy %q: %s %d is out of range", policy, member, n)
	}
	return time.Duration(n) * time.Second, nil
}

// MarshalJSON writes the wire form, Window and Reset rounded up to whole
// seconds, leaving out a zero Window and a Capacity that is the quota.
func (p RateLimitPolicy) MarshalJSON() ([]byte, error) {
	w := rateLimitPolicyJSON{Name: p.Name, Quota: p.Quota, Unit: p.Unit, Remaining: p.Remaining,
		ResetSeconds: ceilSeconds(p.Reset)}
	if p.Window > 0 {
		w.Window = Int64(ceilSeconds(p.Window))
	}
	if p.Capacity != p.Quota {
		w.Capacity = Int(p.Capacity)
	}
	return json.Marshal(w)
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
