package bodotest

import (
	"fmt"
	"net/http"
	"time"

	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// Option configures NewServer.
type Option interface {
	apply(*settings)
}

type optionFunc func(*settings)

func (f optionFunc) apply(s *settings) { f(s) }

// settings are the options of one NewServer.
type settings struct {
	profile Profile
	factor  float64 // 0: the profile's limits as they are
	faults  func(*http.Request) Fault
	err     error // the first bad option
}

// server makes the sandbox the settings describe.
func (set settings) server() (http.Handler, error) {
	if set.err != nil {
		return nil, set.err
	}
	name := set.profile
	if name == "" {
		name = Documented
	}
	p, ok := sandbox.ProfileByName(string(name))
	if !ok {
		return nil, fmt.Errorf("bodotest: WithProfile(%q): there is no such profile; Profiles lists them", string(name))
	}
	var opts []sandbox.Option
	if set.factor != 0 {
		opts = append(opts, sandbox.WithLimitFactor(set.factor))
	}
	if f := set.faults; f != nil {
		opts = append(opts, sandbox.WithFaults(func(r *http.Request) sandbox.Fault { return sandbox.Fault(f(r)) }))
	}
	return p.New(opts...), nil
}

// WithLimitFactor multiplies every quota and capacity of the server by f,
// rounded and at least 1: the points, writes and parallel calls of each key,
// the principal's and the organisation's points, deletes per minute and per
// day, records read per hour, and those of a profile's own policies. The
// windows stay as they are, so WithLimitFactor(10) lets a key write 600
// times a minute instead of 60, and announces so in its headers. Lockouts
// and exports keep their durations. f must be above 0 and at most 1,000,000;
// of WithLimitFactor and WithoutLimits, the last one given counts.
func WithLimitFactor(f float64) Option {
	return optionFunc(func(s *settings) {
		if !(f > 0 && f <= sandbox.MaxLimitFactor) {
			s.fail(fmt.Errorf("bodotest: WithLimitFactor(%g): the factor must be above 0 and at most %g", f, float64(sandbox.MaxLimitFactor)))
			return
		}
		s.factor = f
	})
}

// WithoutLimits sets limits no test reaches: it is WithLimitFactor(1e6), so a
// key may spend 300,000,000 points and write 60,000,000 times a minute. Use
// it where a test checks what the code does, not how it paces itself.
func WithoutLimits() Option { return WithLimitFactor(sandbox.MaxLimitFactor) }

// WithProfile makes the server play p, a server that differs from the
// documented one where the API leaves room; the default is Documented.
func WithProfile(p Profile) Option {
	return optionFunc(func(s *settings) { s.profile = p })
}

// WithFaults installs f, called once for every HTTP request the server
// receives (a batch counts once), before anything else happens; the Fault it
// returns is injected into that request. f may be called from several
// goroutines at once.
func WithFaults(f func(r *http.Request) Fault) Option {
	return optionFunc(func(s *settings) { s.faults = f })
}

func (s *settings) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// Fault is what WithFaults injects into one request: a refusal
// (Overloaded, RateLimited or QuotaExhausted, of which one at most is
// set), a lost answer or a delay; the zero Fault injects nothing. A fault
// that names no policy of the server is answered 500 INTERNAL naming it.
type Fault struct {
	// Overloaded, 503 or 429, answers the request OVERLOADED with that
	// status before anything else happens: no points are charged, nothing
	// changes and the answer does not count towards a lockout. Any other
	// non-zero value means 503.
	Overloaded int
	// RateLimited, the name of a policy, answers the request 429
	// RATE_LIMITED by that policy, as the server refuses a call that a
	// level of the key cannot take: with retryAfterMs, Retry-After, the
	// policy member, and a RateLimit field naming the policy with r=0.
	// The policies are key, write, parallel, principal, org and delete,
	// those a profile adds, and "lockout": the answer of a locked key
	// (Retry-After 300 by default, RateLimit naming key). The
	// request is authenticated first; nothing is charged or changed, and
	// the refusal does not count towards a lockout. A bodo client retries
	// it after the wait (errors.Is(err, bodo.ErrRateLimited) once its
	// retries run out); a lockout's wait is longer than it retries after.
	RateLimited string
	// QuotaExhausted, "egress" or "delete-day", answers the request 429
	// QUOTA_EXHAUSTED by that quota, with resetsAt RetryAfter from now
	// (rounded up to a second) or, without RetryAfter, when the key's quota
	// resets (the hour of egress, the day of delete-day); otherwise like
	// RateLimited. A bodo client does not retry it
	// (bodo.ErrQuotaExhausted).
	QuotaExhausted string
	// RetryAfter is the wait an OVERLOADED or RATE_LIMITED answer asks
	// for; the default is 1s, for a lockout 5 minutes. The problem's
	// retryAfterMs carries it rounded up to a millisecond, Retry-After
	// rounded up to a second (at least 1).
	RetryAfter time.Duration
	// HintInBodyOnly leaves Retry-After out of the injected answer: the
	// wait is only in the problem's retryAfterMs.
	HintInBodyOnly bool
	// DropAfterCommit serves the request fully (the change is made, points
	// are charged, the answer is stored under its Idempotency-Key) and then
	// drops the connection without an answer, as a network failure would.
	DropAfterCommit bool
	// Delay holds the answer back this long; the call stays in flight
	// meanwhile, taking a parallel slot, and its Idempotency-Key stays in
	// use.
	Delay time.Duration
}

// Profile names a server that differs from the documented one where the API
// leaves room: other plans, other limiter shapes, noisier headers, policies
// of its own, overload, another key eating the organisation's quota. A few
// go further, as servers in front of the API or a faulty one might: Overloaded
// leaves out Retry-After, ContradictedHeaders and Gateway say what is not so.
// The empty Profile is Documented.
type Profile string

// The profiles; Profiles lists them all.
const (
	// Documented has the limits of the API's documentation: key 300
	// points/min (capacity 600), write 60/min, parallel 6, principal 1,200
	// points/min, org 3,000 points/min (one key at most half), delete
	// 10/min and 300/day, egress 10,000 records/hour; every per-minute
	// level a token bucket.
	Documented Profile = "documented"
	// SmallPlan is a smaller plan: key 150 points/min (capacity 300), write
	// 30/min, principal 600, org 1,500, delete 5/min and 150/day, egress
	// 5,000 records/hour.
	SmallPlan Profile = "small-plan"
	// BigPlan is a bigger plan: key 600 points/min (capacity 1,200), write
	// 120/min, principal 2,400, org 6,000, delete 20/min and 1,000/day,
	// egress 20,000 records/hour.
	BigPlan Profile = "big-plan"
	// SlidingLog has the documented quotas, but the key, write, principal,
	// org and delete levels are sliding logs.
	SlidingLog Profile = "sliding-log"
	// FixedWindow has the documented quotas, but the key, write, principal,
	// org and delete levels are fixed windows.
	FixedWindow Profile = "fixed-window"
	// SlidingLogFar has SlidingLog's levels, and each request takes a
	// round trip of 100 to 700 ms, drawn for it and split at random
	// between its way to the server and its answer's way back, as on the
	// internet: answers come back in another order than their requests.
	SlidingLogFar Profile = "sliding-log-far"
	// NoisyHeaders has the documented limits, varies the rate-limit headers
	// within what their specification allows, and announces four policies
	// it does not enforce: "bodo-burst" (20 points/s), "bodo-money" (100
	// pay or refund calls/min), "bodo-export" (q=12;w=3600) and a
	// partitioned "bodo-tenant" (with pk).
	NoisyHeaders Profile = "noisy-headers"
	// SearchPolicy has the documented limits and enforces a policy of its
	// own, "bodo-search": 30 searches (listing or counting contacts with q)
	// per 60 s, a sliding log.
	SearchPolicy Profile = "search-policy"
	// Overloaded has the documented limits, and answers 5 % of requests 503
	// OVERLOADED with a retryAfterMs of 300 ms to 3 s in the body and no
	// Retry-After: a server that breaks the contract, which asks for
	// Retry-After on every 429 and 503 that may be retried, as a proxy or
	// an older version of the API might.
	Overloaded Profile = "overloaded"
	// Foreign90 has BigPlan's key, write, principal, delete and egress
	// levels with the documented org level, of which ForeignKey takes 90 %
	// (45 points/s), leaving the other keys 5 points/s.
	Foreign90 Profile = "foreign-90"
	// Foreign90Log is Foreign90 with the org level a sliding log, as a
	// server that keeps one log of every key's takes has it: what the
	// others take they take back as it frees, and what frees for a key is
	// what it took a minute before.
	Foreign90Log Profile = "foreign-90-log"
	// Foreign90Greedy has Foreign90Log's levels, but ForeignKey takes 45
	// org points at once, once a second, whenever they fit, as a busy key
	// of the organisation would: it competes for what the org frees,
	// including what frees for the other keys.
	Foreign90Greedy Profile = "foreign-90-greedy"
	// Foreign90Ticks is Foreign90Greedy with ForeignKey taking 27 points
	// every 0.6 s, the same rate in a finer grain, so that its takes meet
	// the calls of the key under test more often.
	Foreign90Ticks Profile = "foreign-90-ticks"
	// Foreign90Drain has Foreign90's levels with the org a sliding log
	// whose t says when it is full again; ForeignKey takes up to 27 points
	// every 0.6 s, as much of them as the org holds: it drains what frees
	// for the other keys whenever it holds less than 27.
	Foreign90Drain Profile = "foreign-90-drain"
	// Foreign90Late is Foreign90Drain with each of ForeignKey's takes
	// landing up to 6 ms after its tick, by a different delay each tick,
	// as a timer fires on a busy machine: a take that lands less late than
	// the one a window before it finds the org before that one's points
	// have left, takes what the other keys left free, and the 27 points
	// free a moment later.
	Foreign90Late Profile = "foreign-90-late"
	// NarrowestAll has the documented limits and enforces a policy of its
	// own, "search": 20 searches (listing or counting contacts with q) per
	// 60 s, a sliding log; the RateLimit field of every answer but a
	// refusal names the narrowest of all the key's levels, "search"
	// included, whether or not the call takes from it.
	NarrowestAll Profile = "narrowest-all"
	// ContradictedHeaders enforces the documented limits, but every
	// successful answer says RateLimit-Policy: "key";q=0;w=60 and
	// RateLimit: "key";r=0;t=0, which the success itself contradicts;
	// refusals carry the true fields.
	ContradictedHeaders Profile = "contradicted-headers"
	// TwoKeys has the documented limits with the principal at 400
	// points/min, a token bucket, so that APIKey and SecondKey, each able
	// to take 300, compete for it: run a client on each, as two processes
	// of a fleet would.
	TwoKeys Profile = "two-keys"
	// TwoKeysLog is TwoKeys with the principal a sliding log whose t says
	// when it is full again.
	TwoKeysLog Profile = "two-keys-log"
	// Gateway has the documented limits behind a leaky bucket of 1
	// request a second holding 5, which refuses with a bare 429: a
	// text/plain body, no Retry-After, no RateLimit fields, no problem.
	Gateway Profile = "gateway"
)

// Profiles returns every Profile, Documented first, in a fresh slice.
func Profiles() []Profile {
	ps := sandbox.Profiles()
	out := make([]Profile, len(ps))
	for i, p := range ps {
		out[i] = Profile(p.Name)
	}
	return out
}

// Summary says in a line how p differs from Documented; it is empty for a
// name that is no profile.
func (p Profile) Summary() string {
	if p == "" {
		p = Documented
	}
	sp, _ := sandbox.ProfileByName(string(p))
	return sp.Summary
}
