package sandbox

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Fault is what WithFaults injects into one request.
type Fault struct {
	// Overloaded, 429 or 503, answers OVERLOADED before anything else
	// happens: no points, no state change, no refusal towards a lockout.
	// Any other non-zero value means 503.
	Overloaded int
	// RateLimited, a policy of the key (key, write, parallel, principal,
	// org, delete, an extra policy, or lockout), answers an authenticated
	// request 429 RATE_LIMITED by that policy, with the headers and members
	// of a real refusal; nothing changes and it does not count towards a
	// lockout.
	RateLimited string
	// QuotaExhausted, egress or delete-day, answers an authenticated
	// request 429 QUOTA_EXHAUSTED by that quota, resetsAt RetryAfter from
	// now (default: when the key's quota resets), like RateLimited.
	QuotaExhausted string
	// RetryAfter is the wait an injected answer asks for; default 1s, for a
	// lockout LockoutDuration. It may be sub-second: retryAfterMs carries
	// it rounded up to a millisecond, Retry-After rounded up to a second
	// (at least 1).
	RetryAfter time.Duration
	// HintInBodyOnly leaves Retry-After out of the injected answer: the
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
		var rng *rand.Rand
		c.overload = func() Fault {
			mu.Lock()
			defer mu.Unlock()
			if rng == nil { // at the first request, when WithSeed is in
				rng = rand.New(rand.NewPCG(seed^c.seed, 0x6f7665726c6f6164))
			}
			if rng.Float64() >= share {
				return Fault{}
			}
			wait := lo + time.Duration(rng.Int64N(int64(hi-lo)/int64(time.Millisecond)+1))*time.Millisecond
			return Fault{Overloaded: http.StatusServiceUnavailable, RetryAfter: wait, HintInBodyOnly: true}
		}
	}
}

// refuses reports whether f injects a refusal of the key's limits.
func (f Fault) refuses() bool { return f.RateLimited != "" || f.QuotaExhausted != "" }

// faultRefusal is the refusal f injects into a call of k at now; an error
// when f names no policy of the server.
func (s *Server) faultRefusal(k *apiKey, f Fault, now time.Time) (*refusal, error) {
	if f.RateLimited != "" && f.QuotaExhausted != "" {
		return nil, fmt.Errorf("the fault is both RateLimited %q and QuotaExhausted %q", f.RateLimited, f.QuotaExhausted)
	}
	if p := f.QuotaExhausted; p != "" {
		var at time.Time
		switch {
		case p != policyEgress && p != policyDeleteDay:
			return nil, fmt.Errorf("QuotaExhausted %q: the quotas are %s and %s", p, policyEgress, policyDeleteDay)
		case f.RetryAfter > 0:
			at = now.Add(f.RetryAfter + time.Second - 1).Truncate(time.Second) // resetsAt has whole seconds
		case p == policyEgress:
			at = k.egress.resetsAt()
		default:
			at = k.deleteDay.resetsAt()
		}
		return &refusal{status: http.StatusTooManyRequests, code: codeQuotaExhausted, policy: p,
			detail: refusalDetails[p], wait: at.Sub(now), resetsAt: at}, nil
	}
	p := f.RateLimited
	if !slices.Contains(s.rateLimitedPolicies(), p) {
		return nil, fmt.Errorf("RateLimited %q: the policies are %v", p, s.rateLimitedPolicies())
	}
	wait := f.RetryAfter
	if wait <= 0 {
		wait = time.Second
		if p == policyLockout {
			wait = s.lim.LockoutDuration
		}
	}
	ref := &refusal{status: http.StatusTooManyRequests, code: codeRateLimited, policy: p, detail: refusalDetails[p], wait: wait}
	if ref.detail == (msg{}) {
		ref.detail = msg{"Die Grenze %q dieses Schlüssels ist erreicht.", "This key's limit %q is reached."}
		ref.args = []any{p}
	}
	return ref, nil
}

// rateLimitedPolicies are the policies a RateLimited fault may name.
func (s *Server) rateLimitedPolicies() []string {
	out := []string{policyKey, policyWrite, policyParallel, policyPrincipal, policyOrg, policyDelete}
	for _, x := range s.extras {
		out = append(out, x.Name)
	}
	return append(out, policyLockout)
}

// faultAnswer is the answer of a call c of k that f refuses: the refusal's
// problem and headers as the server's own refusal of that policy has them
// (a lockout's RateLimit names key). For a fault that names no policy of
// the server it is 500 INTERNAL, without RateLimit, and ok is false.
func (s *Server) faultAnswer(c *call, k *apiKey, f Fault) (a answer, ok bool) {
	ref, err := s.faultRefusal(k, f, c.now)
	if err != nil {
		return c.fail(http.StatusInternalServerError, codeInternal, msg{"Fehlerhafter Fault: %s", "Bad fault: %s"}, err.Error()), false
	}
	w := waitID(ref.policy, "")
	switch ref.policy {
	case policyLockout:
		a, w = s.lockoutAnswer(c, c.now.Add(ref.wait)), waitAll(policyLockout)
	case policyParallel:
		w = waitAll(policyParallel)
		fallthrough
	default:
		a = s.refusalAnswer(c, ref)
		a.header.Set("RateLimit", s.drainedField(k, c.now, ref))
	}
	if f.HintInBodyOnly {
		a.header.Del("Retry-After")
	}
	k.announce(w, c.now, c.legs.down, ref.wait)
	return a, true
}

// drainedField is the RateLimit field of the refusal r injected into a call
// of k: its level empty, as a real refusal of a drained level reports it,
// and full again when an empty level would be (for a quota, when it
// resets; at least after r's wait).
func (s *Server) drainedField(k *apiKey, now time.Time, r *refusal) string {
	t := r.wait
	if r.code == codeRateLimited {
		for _, st := range append(s.levels(k, now), s.extraListing(k, now)...) {
			if st.name == r.policy && st.window > 0 && st.quota > 0 {
				t = max(t, time.Duration(float64(st.window)*float64(st.full)/float64(st.quota)))
				break
			}
		}
	}
	return s.formatRateLimit([]levelState{{name: r.policy, reset: t}})
}
