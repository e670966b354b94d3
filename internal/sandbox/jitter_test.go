package sandbox

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestJitteredLatencyReordersAnswers: each round trip lies within base ±
// jitter, answers come back in another order than their requests left,
// and the same seed draws the same round trips.
func TestJitteredLatencyReordersAnswers(t *testing.T) {
	trips := func(seed uint64) []time.Duration {
		var out []time.Duration
		synctest.Test(t, func(t *testing.T) {
			s := New(WithJitteredLatency(400*time.Millisecond, 300*time.Millisecond), WithSeed(seed))
			c := newTester(t, s)
			var mu sync.Mutex
			var order []int
			rtt := make([]time.Duration, 6)
			var wg sync.WaitGroup
			for i := range 6 { // the parallel quota
				start := time.Now()
				wg.Go(func() {
					c.do("GET", "/v1/me", nil)
					rtt[i] = time.Since(start)
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
				})
				time.Sleep(time.Millisecond)
				synctest.Wait()
			}
			wg.Wait()
			for i, d := range rtt {
				if d < 100*time.Millisecond || d > 700*time.Millisecond {
					t.Errorf("round trip %d took %v, want within 100-700 ms", i, d)
				}
			}
			inOrder := true
			for i, n := range order {
				inOrder = inOrder && i == n
			}
			if inOrder {
				t.Errorf("answers came back in the order sent: %v", order)
			}
			out = rtt
		})
		return out
	}
	a, b := trips(7), trips(7)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 7 drew %v, then %v", a, b)
		}
	}
}

// TestAJitteredRequestIsEarlyBySendingTime: a request sent before the
// refusal's answer reached the client is not early however late it
// arrives; one sent after it, within the wait, is.
func TestAJitteredRequestIsEarlyBySendingTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex // the server asks for faults from the requests' goroutines
		overload := true
		s := New(WithJitteredLatency(400*time.Millisecond, 300*time.Millisecond), WithSeed(3),
			WithFaults(func(r *http.Request) Fault {
				mu.Lock()
				defer mu.Unlock()
				if overload {
					overload = false
					return Fault{Overloaded: http.StatusTooManyRequests, RetryAfter: 5 * time.Second}
				}
				return Fault{}
			}))
		c := newTester(t, s)
		var wg sync.WaitGroup
		wg.Go(func() { c.do("GET", "/v1/me", nil) }) // refused
		time.Sleep(time.Millisecond)
		wg.Go(func() { c.do("GET", "/v1/me", nil) }) // on its way meanwhile
		wg.Wait()
		wantEarly(t, s, 0, map[string]int{})
		c.do("GET", "/v1/me", nil) // sent after the answer, within the wait
		wantEarly(t, s, 1, map[string]int{codeOverloaded: 1})
	})
}

// TestARequestBetweenTwoWaitsIsNotEarly: a request sent after one answer's
// wait ended and before a second answer, given meanwhile, reached the
// client is not early, though the second wait began before the first
// ended: no client could have held it.
func TestARequestBetweenTwoWaitsIsNotEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex // the server asks for faults from the requests' goroutines
		waits := []time.Duration{600 * time.Millisecond, 2 * time.Second}
		s := New(WithLatency(400*time.Millisecond), WithFaults(func(r *http.Request) Fault {
			mu.Lock()
			defer mu.Unlock()
			if len(waits) == 0 {
				return Fault{}
			}
			w := waits[0]
			waits = waits[1:]
			return Fault{Overloaded: http.StatusTooManyRequests, RetryAfter: w}
		}))
		c := newTester(t, s)
		var wg sync.WaitGroup
		wg.Go(func() { c.do("GET", "/v1/me", nil) }) // at 0: waits until 0.6 s, the client hears it at 0.4 s
		time.Sleep(300 * time.Millisecond)
		wg.Go(func() { c.do("GET", "/v1/me", nil) }) // at 0.3 s: waits until 2.3 s, heard at 0.7 s
		time.Sleep(350 * time.Millisecond)
		c.do("GET", "/v1/me", nil) // at 0.65 s: the first wait is over, the second unheard of
		wantEarly(t, s, 0, map[string]int{})
		c.do("GET", "/v1/me", nil) // at 1.05 s: within the second wait
		wantEarly(t, s, 1, map[string]int{codeOverloaded: 1})
		wg.Wait()
	})
}
