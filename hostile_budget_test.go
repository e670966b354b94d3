package bodo

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/budget"
)

// The hostile-server suite of the budget: answers from a broken proxy or a
// hostile server that must not freeze the key nor grow the client.

const hostileContactID = "con_01JBD8Y3K5M7Q2W9X4Z6T1V0NP"

// hostileClient makes a client of testKey on base over rt.
func hostileClient(t *testing.T, base string, rt http.RoundTripper, opts ...Option) *Client {
	t.Helper()
	all := append([]Option{WithAPIKey(testKey), WithBaseURL(base), WithHTTPClient(&http.Client{Transport: rt}), WithLogger(quiet)}, opts...)
	c, err := NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// answerWith is an answer of status with a body of content type ct and
// the given header lines.
func answerWith(r *http.Request, status int, ct string, body []byte, header http.Header) *http.Response {
	h := http.Header{"Content-Type": {ct}}
	for k, vs := range header {
		h[k] = vs
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewReader(body)), Request: r, ContentLength: int64(len(body))}
}

// contactAnswer answers the sample contact with the given header lines.
func contactAnswer(header http.Header) roundTripFunc {
	raw, _ := json.Marshal(sampleContact)
	return func(r *http.Request) (*http.Response, error) {
		return answerWith(r, http.StatusOK, "application/json", raw, header), nil
	}
}

// TestProxyWaitHoldsOnlyItsOwnCall: an HTML 503 with Retry-After: 86400
// from a proxy fails its call at once (the wait is past MaxRetryWait, and
// the error says how long), and holds no other call of the key: another
// Client of the key, without a deadline, goes at once.
func TestProxyWaitHoldsOnlyItsOwnCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := uniqueBaseURL()
		proxy := hostileClient(t, base, roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return answerWith(r, http.StatusServiceUnavailable, "text/html", []byte("<html>Service Unavailable</html>"), http.Header{"Retry-After": {"86400"}}), nil
		}))
		other := hostileClient(t, base, contactAnswer(nil))

		_, err := proxy.Contacts.Get(context.Background(), hostileContactID)
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || e.RetryAfter != 24*time.Hour {
			t.Fatalf("the proxy's 503: %v, want its *Error with RetryAfter 24h", err)
		}
		if p := proxy.Budget().PausedUntil; !p.IsZero() {
			t.Errorf("the key is paused until %v by an answer that is not the API's", p)
		}
		start := time.Now()
		if _, err := other.Contacts.Get(context.Background(), hostileContactID); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 0 {
			t.Errorf("another client's call waited %v after a proxy's 503", d)
		}
	})
}

// TestLockoutIsHeldAtMostFiveMinutes: a lockout whose wait says a day holds
// the key for the contract's 5 minutes; a call of another Client whose
// MaxRetryWait is shorter than what is left fails at once, without a
// deadline, with a local *Error whose RetryAfter says how long; when the
// 5 minutes are over calls go again.
func TestLockoutIsHeldAtMostFiveMinutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := uniqueBaseURL()
		locked := hostileClient(t, base, roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return problemResponder(http.StatusTooManyRequests, CodeRateLimited, http.Header{"Retry-After": {"86400"}},
				map[string]any{"policy": "lockout", "retryAfterMs": 86400000})(r)
		}))
		_, err := locked.Contacts.Get(context.Background(), hostileContactID)
		var e *Error
		if !errors.As(err, &e) || e.Policy != "lockout" {
			t.Fatalf("the lockout: %v", err)
		}
		if p := locked.Budget().PausedUntil; p.Sub(time.Now()) > budget.MaxLockout {
			t.Fatalf("the key is paused for %v, more than the contract's lockout of %v", p.Sub(time.Now()), budget.MaxLockout)
		}

		var sent atomic.Int32
		ok := contactAnswer(nil)
		counting := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			return ok(r)
		})
		brief := hostileClient(t, base, counting, WithMaxRetryWait(time.Second))
		patient := hostileClient(t, base, counting) // the default MaxRetryWait, 60 s
		for _, c := range []*Client{brief, patient} {
			start := time.Now()
			_, err := c.Contacts.Get(context.Background(), hostileContactID)
			if d := time.Since(start); d > 0 {
				t.Errorf("a call waited %v for a lockout longer than its MaxRetryWait", d)
			}
			var held *Error
			if !errors.As(err, &held) || !held.Local || held.Policy != "lockout" || held.RetryAfter <= time.Minute || held.RetryAfter > budget.MaxLockout {
				t.Errorf("a call held by the lockout: %v, want a local *Error whose RetryAfter is what is left of 5 minutes", err)
			}
		}
		if n := sent.Load(); n != 0 {
			t.Errorf("%d calls sent during the lockout", n)
		}
		time.Sleep(budget.MaxLockout)
		if _, err := brief.Contacts.Get(context.Background(), hostileContactID); err != nil {
			t.Errorf("after the lockout: %v", err)
		}
	})
}

// stalledStore is a budgetstore.Store whose every Acquire answers grant,
// with two processes: a wait another process heard.
type stalledStore struct{ grant budgetstore.Grant }

func (s stalledStore) Acquire(context.Context, string, budgetstore.Acquire) (budgetstore.Grant, error) {
	g := s.grant
	g.Members = budgetstore.Members{Processes: 2}
	return g, nil
}
func (stalledStore) Release(context.Context, string, budgetstore.Release) error { return nil }
func (stalledStore) Refund(context.Context, string, []budgetstore.Level) error  { return nil }
func (stalledStore) Renew(context.Context, string, budgetstore.Renew) (budgetstore.Members, error) {
	return budgetstore.Members{Processes: 2}, nil
}

// TestAnotherProcessesWaitIsNotSatOutPastMaxRetryWait: a pause another
// process put in the shared store, or a refusal's wait on a level it heard
// (a level owing what the refused call lacked), longer than the call's
// MaxRetryWait, fails the call at once with the *Error whose RetryAfter
// says how long, not with its context's deadline.
func TestAnotherProcessesWaitIsNotSatOutPastMaxRetryWait(t *testing.T) {
	for name, grant := range map[string]budgetstore.Grant{
		"lockout": {Wait: 24 * time.Hour, Reason: "lockout"},
		"level":   {Wait: time.Hour, Reason: "key", Refusal: true},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := hostileClient(t, uniqueBaseURL(), contactAnswer(nil), WithSharedBudget(stalledStore{grant}), WithMaxRetryWait(time.Second))
				ctx, cancel := context.WithTimeout(context.Background(), 48*time.Hour)
				defer cancel()
				start := time.Now()
				_, err := c.Contacts.Get(ctx, hostileContactID)
				if d := time.Since(start); d > 0 {
					t.Errorf("the call waited %v for another process's wait", d)
				}
				var e *Error
				if !errors.As(err, &e) || !e.Local || e.RetryAfter != grant.Wait || errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("held by the store: %v, want a local *Error with RetryAfter %v, not the deadline", err, grant.Wait)
				}
			})
		})
	}
}

// countingHandler counts the records whose message contains sub.
type countingHandler struct {
	sub string
	n   *atomic.Int32
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.sub) {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// TestHostileHeadersKeepTheModelBounded: a 2 MB RateLimit-Policy adds no
// level; 10,000 answers that each announce a new policy and name a new
// partition (for a new target each) leave; a new pk in every answer for one
// target keeps one partition; the key with at most the caps of learned policies and
// partitions, the overflow logged once; once idle, the learned levels are
// dropped.
func TestHostileHeadersKeepTheModelBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const documented = 8 // the seven levels of the contract and parallel
		var header atomic.Pointer[http.Header]
		raw, _ := json.Marshal(sampleContact)
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return answerWith(r, http.StatusOK, "application/json", raw, *header.Load()), nil
		})
		var logged atomic.Int32
		c := hostileClient(t, uniqueBaseURL(), rt, WithLogger(slog.New(countingHandler{sub: "more rate-limit policies", n: &logged})))
		get := func(id string, h http.Header) {
			t.Helper()
			header.Store(&h)
			if _, err := c.Contacts.Get(context.Background(), id); err != nil {
				t.Fatal(err)
			}
		}

		var huge strings.Builder
		for i := 0; huge.Len() < 2<<20; i++ {
			fmt.Fprintf(&huge, `"p%d";q=10;w=60, `, i)
		}
		get(hostileContactID, http.Header{"Ratelimit-Policy": {huge.String() + `"key";q=300;w=60`}, "Ratelimit": {`"key";r=299;t=1`}})
		if n := len(c.Budget().Levels); n != documented {
			t.Fatalf("%d levels after a 2 MB RateLimit-Policy, want the %d documented ones", n, documented)
		}

		for i := range 1000 {
			pk := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "moved-%d", i))
			get(hostileContactID, http.Header{
				"Ratelimit-Policy": {`"tenant";q=100;w=60`},
				"Ratelimit":        {fmt.Sprintf(`"tenant";r=50;t=30;pk=:%s:`, pk)},
			})
		}
		// One partition for the call's target, and one for the status
		// request (GET /v1/rate_limit) the client may have sent.
		if n := len(c.Budget().Levels); n > documented+3 {
			t.Fatalf("%d levels after 1,000 new pk for one target, want the documented ones, the policy and a partition per target", n)
		}

		for i := range 10000 {
			pk := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "tenant-%d", i))
			get(fmt.Sprintf("con_%d", i), http.Header{
				"Ratelimit-Policy": {fmt.Sprintf(`"tenant";q=100;w=60, "p%d";q=100;w=60`, i)},
				"Ratelimit":        {fmt.Sprintf(`"tenant";r=50;t=30;pk=:%s:`, pk)},
			})
		}
		limit := documented + budget.MaxLearnedPolicies + budget.MaxPartitions
		if n := len(c.Budget().Levels); n > limit {
			t.Errorf("%d levels after 10,000 hostile answers, want at most %d", n, limit)
		}
		if n := logged.Load(); n != 1 {
			t.Errorf("the overflow was logged %d times, want once", n)
		}

		time.Sleep(budget.LevelIdleTTL + time.Minute)
		get(hostileContactID, http.Header{"Ratelimit-Policy": {`"key";q=300;w=60`}, "Ratelimit": {`"key";r=290;t=2`}})
		if n := len(c.Budget().Levels); n != documented {
			t.Errorf("%d levels after the learned ones were idle for %v, want the %d documented ones", n, budget.LevelIdleTTL, documented)
		}
	})
}

// TestDefaultClientHasTimeouts: a Client made without WithHTTPClient dials,
// shakes hands and waits for an answer's headers within the documented
// defaults, and sets no timeout on the whole exchange.
func TestDefaultClientHasTimeouts(t *testing.T) {
	c, err := NewClient(WithAPIKey(testKey), WithBaseURL(uniqueBaseURL()))
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := c.httpClient.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("the default transport is %T, want an *http.Transport with timeouts", c.httpClient.Transport)
	}
	if tr.ResponseHeaderTimeout != DefaultResponseHeaderTimeout || tr.TLSHandshakeTimeout != DefaultTLSHandshakeTimeout || tr.DialContext == nil {
		t.Errorf("response header timeout %v, TLS handshake timeout %v, dialer set %v", tr.ResponseHeaderTimeout, tr.TLSHandshakeTimeout, tr.DialContext != nil)
	}
	if c.httpClient.Timeout != 0 {
		t.Errorf("an overall timeout of %v cuts long answers", c.httpClient.Timeout)
	}
	if tr.Proxy == nil {
		t.Error("the default transport ignores the proxy of the environment")
	}
}

// countingTransport is a RoundTripper of its own, counting its requests.
type countingTransport struct {
	n  atomic.Int32
	rt http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// TestDefaultClientKeepsAReplacedDefaultTransport: a Client made without
// WithHTTPClient sends through an http.DefaultTransport that is no
// *http.Transport (httpmock, a tracing wrapper) as it is; of one that is,
// it keeps the dialer and the timeouts set there, and sets the default
// timeouts only where none is.
func TestDefaultClientKeepsAReplacedDefaultTransport(t *testing.T) {
	was := http.DefaultTransport
	t.Cleanup(func() { http.DefaultTransport = was })

	wrapper := &countingTransport{rt: contactAnswer(nil)}
	http.DefaultTransport = wrapper
	c, err := NewClient(WithAPIKey(testKey), WithBaseURL(uniqueBaseURL()), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Contacts.Get(hostileCtx(t), hostileContactID); err != nil || wrapper.n.Load() == 0 {
		t.Errorf("a DefaultTransport of its own: %v, %d requests through it; want the call through it", err, wrapper.n.Load())
	}

	var dialed atomic.Int32
	dialer := &net.Dialer{}
	http.DefaultTransport = &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dialed.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
		ResponseHeaderTimeout: 5 * time.Second,
	}
	api, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, contactJSON)
	})
	c, err = NewClient(WithAPIKey(testKey), WithBaseURL(api.URL), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Contacts.Get(hostileCtx(t), "con_1"); err != nil || dialed.Load() == 0 {
		t.Errorf("a DefaultTransport with a dialer: %v, %d dials through it; want the call through its dialer", err, dialed.Load())
	}
	tr := c.httpClient.Transport.(*http.Transport)
	if tr.ResponseHeaderTimeout != 5*time.Second || tr.TLSHandshakeTimeout != DefaultTLSHandshakeTimeout {
		t.Errorf("response header timeout %v, TLS handshake timeout %v; want the 5 s set and the default", tr.ResponseHeaderTimeout, tr.TLSHandshakeTimeout)
	}
	tr.CloseIdleConnections()
}

// TestHungCallsEndSlowStartAfterTheHeaderTimeout: one or two calls of a
// key that never get an answer over an *http.Client without timeouts, and
// one more behind them: slow start ends once the first has been out
// DefaultResponseHeaderTimeout, so the calls behind go then (not one more
// every DefaultResponseHeaderTimeout), and the last is answered; no more
// calls than the parallel quota are ever out at once.
func TestHungCallsEndSlowStartAfterTheHeaderTimeout(t *testing.T) {
	for _, hung := range []int32{1, 2} {
		t.Run(strconv.Itoa(int(hung)), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var n, out, most atomic.Int32
				ok := contactAnswer(nil)
				c := hostileClient(t, uniqueBaseURL(), roundTripFunc(func(r *http.Request) (*http.Response, error) {
					now := out.Add(1)
					defer out.Add(-1)
					for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
					}
					if n.Add(1) <= hung || strings.HasSuffix(r.URL.Path, "/hung") {
						<-r.Context().Done() // never answers
						return nil, r.Context().Err()
					}
					return ok(r)
				}))
				hungCtx, stop := context.WithCancel(context.Background())
				defer stop()
				for range hung {
					go func() { _, _ = c.Contacts.Get(hungCtx, hostileContactID) }()
					synctest.Wait()
				}
				ctx, cancel := context.WithTimeout(context.Background(), 4*DefaultResponseHeaderTimeout)
				defer cancel()
				start := time.Now()
				if _, err := c.Contacts.Get(ctx, hostileContactID); err != nil {
					t.Fatalf("the call behind %d that never end: %v", hung, err)
				}
				if d := time.Since(start); d > DefaultResponseHeaderTimeout {
					t.Errorf("the call behind %d that never end waited %v, want at most %v", hung, d, DefaultResponseHeaderTimeout)
				}
				for range 10 {
					go func() { _, _ = c.Contacts.Get(hungCtx, "hung") }()
				}
				time.Sleep(time.Minute)
				if m := most.Load(); m > 6 {
					t.Errorf("%d calls out at once, more than the parallel quota of 6", m)
				}
				stop()
				synctest.Wait()
			})
		})
	}
}

// TestARefusedRedirectKeepsNoEgress: lists answered with a redirect, which
// the client does not follow, return no records, so the egress they
// reserved is given back: a hundred of them do not hold the next list.
func TestARefusedRedirectKeepsNoEgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		redirect := true
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if redirect {
				return answerWith(r, http.StatusTemporaryRedirect, "text/html", nil, http.Header{"Location": {"https://elsewhere.example/v1/contacts"}}), nil
			}
			return answerWith(r, http.StatusOK, "application/json", []byte(`{"data":[],"nextCursor":null}`), nil), nil
		})
		c := hostileClient(t, uniqueBaseURL(), rt)
		for range 100 {
			_, _ = c.Contacts.List(context.Background(), &ListContactsParams{Limit: Int(100)})
			time.Sleep(2 * time.Second)
		}
		redirect = false
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if _, err := c.Contacts.List(ctx, &ListContactsParams{Limit: Int(100)}); err != nil {
			t.Errorf("after 100 redirected lists: %v", err)
		}
	})
}
