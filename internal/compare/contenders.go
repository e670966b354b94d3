// Package compare runs bodo-go and its alternatives side by side: the same
// workload (internal/agents) against the same sandbox (internal/sandbox) on
// virtual time, and the per-call overhead against the raw generated client.
// It is a module of its own so that the alternatives' dependencies stay out
// of the SDK's go.mod. Regenerate the results with run.sh.
package compare

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/gen/oapi"
	"github.com/bodo-app/bodo-go/internal/agents"
	"github.com/bodo-app/bodo-go/internal/ops"
	"github.com/bodo-app/bodo-go/internal/sandbox"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/hashicorp/go-retryablehttp"
)

// Env is what a contender is built on for one run: the transport to the
// sandbox (which counts every request) and a base URL of the run's own, so
// that no two runs share bodo-go's per-key state.
type Env struct {
	Transport http.RoundTripper
	BaseURL   string
	Key       string
}

// Contender is one client under test.
type Contender struct {
	Name string
	// Notes says what the contender does by default, for the report.
	Notes string
	// New builds the contender's API for one run. It is called inside the
	// run's synctest bubble.
	New func(Env) (agents.API, error)
}

// Contenders are the clients compared, in the order of the report.
var Contenders = []Contender{
	{
		Name: "bodo-go",
		Notes: "as shipped: the budget paces every call by the model of the key's levels (FIFO queue, in-flight cap, " +
			"pace); each RATE_LIMITED or OVERLOADED halves the in-flight cap and the pace (at most once a second), each " +
			"quiet 5 s raises them a step (the pace by a tenth). It retries 429, 503, IDEMPOTENCY_KEY_IN_USE and safe " +
			"connection failures up to 2 times after the server's hint plus jitter (OVERLOADED plus 1–3 s), every POST " +
			"and PATCH carries an Idempotency-Key reused on each retry, and the lockout guard keeps a key under 25 " +
			"refusals (and attempts in flight) a minute.",
		New: func(env Env) (agents.API, error) { return newBodo(env) },
	},
	{
		Name:  "bodo-go, budget off",
		Notes: "bodo.WithoutBudget(): the same retry discipline, idempotency keys and lockout guard, no pacing.",
		New:   func(env Env) (agents.API, error) { return newBodo(env, bodo.WithoutBudget()) },
	},
	{
		Name: "go-retryablehttp",
		Notes: "hashicorp/go-retryablehttp " + retryablehttpVersion + ", retryablehttp.NewClient() with its defaults " +
			"(RetryMax 4, RetryWaitMin 1 s, RetryWaitMax 30 s, DefaultRetryPolicy, DefaultBackoff), Logger nil, " +
			"its StandardClient() under oapi.ClientWithResponses; only the pooled client's Transport is the sandbox's. " +
			"DefaultRetryPolicy retries every method, POST and PATCH included, on any connection error " +
			"(the dropped answer of a committed write too) and on 429 and every 5xx but 501; DefaultBackoff sleeps exactly " +
			"Retry-After (whole seconds, no cap, no jitter) on 429/503, else 1, 2, 4, 8 s. The raw client sends no Idempotency-Key " +
			"but on payInvoice (a fresh one per call), so a retried create runs twice.",
		New: newRetryableHTTP,
	},
	{
		Name: "failsafe-go",
		Notes: "failsafe-go " + failsafeVersion + ", failsafehttp.NewRetryPolicyBuilder() (2 retries on connection errors, 429 and " +
			"5xx but 501, any method; delay: Retry-After in whole seconds on 429/503, else none) with ReturnLastFailure() so the " +
			"caller gets the last answer rather than an ExceededError, as a failsafehttp.NewRoundTripper under oapi.ClientWithResponses; " +
			"inside it, before every attempt, ratelimiter.NewSmooth(5, time.Second).AcquirePermits(ctx, cost): one permit per point " +
			"of the call (from the operation table), so 5 points/s, the documented 300 points/min, with no burst. " +
			"No Idempotency-Key but on payInvoice, as above.",
		New: newFailsafe,
	},
	{
		Name: "careful engineer",
		Notes: "what a careful engineer writes by hand from bodo-api.md over oapi.ClientWithResponses (carefulTransport in " +
			"careful.go): before every attempt a golang.org/x/time/rate " + xtimeVersion + " limiter of the documented key level " +
			"(5 points/s, burst 600) takes the call's cost in points (from the operation table), a second one (1/s, burst 60) " +
			"one write for the write classes, and a semaphore one of 6 slots (the parallel level); a 429 or 503 is retried up " +
			"to 2 times after retryAfterMs, else Retry-After, else 1, 2 s, plus 0–250 ms of jitter (QUOTA_EXHAUSTED and " +
			"connection errors are not retried), and every POST and PATCH carries an Idempotency-Key (a UUID) reused on " +
			"its retries. The limits are the documented ones, fixed: nothing adapts to the server.",
		New: newCareful,
	},
	{
		Name: "naive",
		Notes: "a transport that resends a 429 or 503 at once, up to 2 times, without waiting, and returns connection errors " +
			"as they are (so it never repeats a write whose answer was lost), under oapi.ClientWithResponses; no Idempotency-Key " +
			"but on payInvoice.",
		New: func(env Env) (agents.API, error) {
			return newRaw(env, &http.Client{Transport: naiveRetry{next: env.Transport, retries: 2}})
		},
	},
}

// The versions of the alternatives, as in go.mod.
const (
	retryablehttpVersion = "v0.7.8"
	failsafeVersion      = "v0.9.8"
	xtimeVersion         = "v0.16.0"
)

func newBodo(env Env, opts ...bodo.Option) (agents.API, error) {
	opts = append([]bodo.Option{
		bodo.WithAPIKey(env.Key),
		bodo.WithBaseURL(env.BaseURL),
		bodo.WithHTTPClient(&http.Client{Transport: env.Transport}),
		bodo.WithLogger(slog.New(slog.DiscardHandler)),
	}, opts...)
	c, err := bodo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return agents.SDK{Client: c}, nil
}

// newRaw makes the generated client over hc, with the key and the API
// version set on every request as a user of package oapi does.
func newRaw(env Env, hc *http.Client) (agents.API, error) {
	c, err := oapi.NewClientWithResponses(env.BaseURL, oapi.WithHTTPClient(hc),
		oapi.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+env.Key)
			req.Header.Set("Bodo-Version", bodo.APIVersion)
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return agents.Raw{Client: c}, nil
}

func newRetryableHTTP(env Env) (agents.API, error) {
	rc := retryablehttp.NewClient()
	rc.Logger = nil
	rc.HTTPClient.Transport = env.Transport
	return newRaw(env, rc.StandardClient())
}

func newFailsafe(env Env) (agents.API, error) {
	limiter := ratelimiter.NewSmooth[*http.Response](5, time.Second)
	retry := failsafehttp.NewRetryPolicyBuilder().ReturnLastFailure().Build()
	rt := failsafehttp.NewRoundTripper(costPaced{limiter: limiter, next: env.Transport}, retry)
	return newRaw(env, &http.Client{Transport: rt})
}

// costPaced takes one permit per point of the request's cost from limiter
// before sending it, waiting for them as long as it takes.
type costPaced struct {
	limiter ratelimiter.RateLimiter[*http.Response]
	next    http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (c costPaced) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := c.limiter.AcquirePermits(req.Context(), uint(Cost(req))); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return c.next.RoundTrip(req)
}

// Cost is the request's points from the operation table (1 for an unknown
// route, which the server charges nothing; so it errs on the safe side).
func Cost(req *http.Request) int {
	if op, _, ok := ops.Match(req.Method, req.URL.Path); ok {
		return max(op.CostFor(req.URL.Query().Get), 1)
	}
	return 1
}

// naiveRetry resends a 429 or 503 answer at once, up to retries times.
type naiveRetry struct {
	next    http.RoundTripper
	retries int
}

// RoundTrip implements http.RoundTripper.
func (n naiveRetry) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		r := req.Clone(req.Context())
		if req.Body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		resp, err := n.next.RoundTrip(r)
		if err != nil || attempt == n.retries ||
			resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
			return resp, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// Faults is the fault schedule of the faults run, deterministic by request
// count: every 20th request (5 %) is answered 503 OVERLOADED asking for 2 s,
// and every 100th write (POST, PATCH or DELETE; 1 %) of the others is served
// in full and then its connection is dropped before the answer.
func Faults() sandbox.Option {
	var requests, writes atomic.Int64
	return sandbox.WithFaults(func(r *http.Request) sandbox.Fault {
		if requests.Add(1)%20 == 0 {
			return sandbox.Fault{Overloaded: http.StatusServiceUnavailable, RetryAfter: 2 * time.Second}
		}
		switch r.Method {
		case http.MethodPost, http.MethodPatch, http.MethodDelete:
			if writes.Add(1)%100 == 0 {
				return sandbox.Fault{DropAfterCommit: true}
			}
		}
		return sandbox.Fault{}
	})
}
