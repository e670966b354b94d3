package sandbox

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Fault is what WithFaults injects into one request.
type Fault struct {
	// Overloaded, 429 or 503, answers OVERLOADED before anything else
	// happens: no points, no state change, no refusal towards a lockout.
	// Any other non-zero value means 503.
	Overloaded int
	// RetryAfter is the wait an OVERLOADED answer asks for; default 1s. It
	// may be sub-second: retryAfterMs carries it rounded up to a
	// millisecond, Retry-After rounded up to a second (at least 1).
	RetryAfter time.Duration
	// HintInBodyOnly leaves Retry-After out of the OVERLOADED answer: the
	// wait is only in the problem's retryAfterMs.
	HintInBodyOnly bool
	// DropAfterCommit serves the request fully (state changed, points
	// charged, an idempotent answer stored) and then drops the connection
	// without an answer.
	DropAfterCommit bool
	// Delay holds the answer back this long; the call stays in flight and
	// its Idempotency-Key stays in use meanwhile.
	Delay time.Duration
}

// overloadWait is the wait an OVERLOADED answer for f announces.
func overloadWait(f Fault) time.Duration {
	if f.RetryAfter <= 0 {
		return time.Second
	}
	return f.RetryAfter
}

func overloadedAnswer(c *call, f Fault) answer {
	status := f.Overloaded
	if status != http.StatusTooManyRequests {
		status = http.StatusServiceUnavailable
	}
	a := retryable(c.problem(status, codeOverloaded,
		msg{"Die Instanz ist gerade ausgelastet; versuche es nach Retry-After mit etwas Zufallsabstand erneut.",
			"The instance is overloaded right now; try again after Retry-After with some random spread."}), overloadWait(f))
	if f.HintInBodyOnly {
		a.header.Del("Retry-After")
	}
	return a
}

// randomOverload answers a share of the HTTP requests (drawn from seed, per
// server) 503 OVERLOADED with the wait only in the body, uniformly between
// lo and hi; WithFaults still comes first.
func randomOverload(share float64, lo, hi time.Duration, seed uint64) Option {
	return func(c *config) {
		var mu sync.Mutex
		rng := rand.New(rand.NewPCG(seed, 0x6f7665726c6f6164))
		c.overload = func() Fault {
			mu.Lock()
			defer mu.Unlock()
			if rng.Float64() >= share {
				return Fault{}
			}
			wait := lo + time.Duration(rng.Int64N(int64(hi-lo)/int64(time.Millisecond)+1))*time.Millisecond
			return Fault{Overloaded: http.StatusServiceUnavailable, RetryAfter: wait, HintInBodyOnly: true}
		}
	}
}
