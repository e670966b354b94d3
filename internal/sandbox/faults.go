package sandbox

import (
	"net/http"
	"time"
)

// Fault is what WithFaults injects into one request.
type Fault struct {
	// Overloaded, 429 or 503, answers OVERLOADED before anything else
	// happens: no points, no state change, no refusal towards a lockout.
	// Any other non-zero value means 503.
	Overloaded int
	// RetryAfter is the wait an OVERLOADED answer asks for; default 1s.
	RetryAfter time.Duration
	// DropAfterCommit serves the request fully (state changed, points
	// charged, an idempotent answer stored) and then drops the connection
	// without an answer.
	DropAfterCommit bool
	// Delay holds the answer back this long; the call stays in flight and
	// its Idempotency-Key stays in use meanwhile.
	Delay time.Duration
}

func overloadedAnswer(c *call, f Fault) answer {
	status := f.Overloaded
	if status != http.StatusTooManyRequests {
		status = http.StatusServiceUnavailable
	}
	wait := f.RetryAfter
	if wait <= 0 {
		wait = time.Second
	}
	return retryable(problem{Status: status, Code: codeOverloaded, Instance: c.path, RequestID: c.reqID,
		Detail: "Die Instanz ist gerade ausgelastet; versuche es nach Retry-After mit etwas Zufallsabstand erneut."}, wait)
}
