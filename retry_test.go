package bodo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/sandbox"
	"github.com/jarcoal/httpmock"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"41", 41 * time.Second, true},
		{"0", 0, true},
		{" 7 ", 7 * time.Second, true},
		{"Mon, 30 Nov 2026 12:00:30 GMT", 30 * time.Second, true}, // IMF-fixdate
		{"Monday, 30-Nov-26 12:01:00 GMT", time.Minute, true},     // RFC 850
		{"Mon Nov 30 12:00:05 2026", 5 * time.Second, true},       // asctime
		{"Mon, 30 Nov 2026 11:00:00 GMT", 0, true},                // in the past: at once
		{"99999999999999999999999", maxHint, true},                // overflows int64
		{"31536000", maxHint, true},                               // a year
		{"Mon, 30 Nov 2027 12:00:00 GMT", maxHint, true},          // a year ahead
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"41s", 0, false},
		{"soon", 0, false},
		{"Mon, 30 Nov 2026 12:00:30", 0, false},
	}
	for _, tc := range cases {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRetryAfterMs(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"40250": 40250 * time.Millisecond, "0": 0, "-0": 0, "-5": -1, "-1e400": -1, "2.5": 2500 * time.Microsecond, "4e4": 40 * time.Second,
		"1e-7": time.Nanosecond, "1e15": maxHint, "999999999999999": maxHint, "99999999999999999999": maxHint, "1e400": maxHint,
	} {
		n := json.Number(in)
		got, ok := retryAfterMs(&n)
		if want < 0 && ok || want >= 0 && (!ok || got != want) {
			t.Errorf("retryAfterMs(%s) = %v, %v; want %v", in, got, ok, want)
		}
	}
	if _, ok := retryAfterMs(nil); ok {
		t.Error("a missing retryAfterMs is a hint")
	}
}

// TestJitterBounds samples the wait after hints of many sizes: never below
// the hint, never above hint plus the stated bound, and OVERLOADED at least a
// second more.
func TestJitterBounds(t *testing.T) {
	for _, hint := range []time.Duration{0, 50 * time.Millisecond, time.Second, 41 * time.Second, 300 * time.Second} {
		var hi time.Duration
		for range 5000 {
			w, hinted := retryWait(&Error{Code: CodeRateLimited, RetryAfter: hint, hinted: true}, 0)
			if !hinted || w < hint || w > hint+jitterBound(hint) {
				t.Fatalf("hint %v: wait %v outside [%v, %v]", hint, w, hint, hint+jitterBound(hint))
			}
			hi = max(hi, w-hint)
			o, _ := retryWait(&Error{Code: CodeOverloaded, RetryAfter: hint, hinted: true}, 0)
			if o < hint+time.Second || o > hint+jitterBound(hint)+3*time.Second {
				t.Fatalf("OVERLOADED hint %v: wait %v", hint, o)
			}
		}
		if hi < jitterBound(hint)/2 {
			t.Errorf("hint %v: the jitter never exceeded %v of a bound %v", hint, hi, jitterBound(hint))
		}
	}
	if b := jitterBound(41 * time.Second); b != 2*time.Second {
		t.Errorf("jitterBound(41s) = %v", b)
	}
	if b := jitterBound(time.Second); b != 100*time.Millisecond {
		t.Errorf("jitterBound(1s) = %v", b)
	}
}

// TestBackoffSchedule checks the hintless schedule: full jitter under 1, 2,
// 4, 8 s, then capped at 8 s.
func TestBackoffSchedule(t *testing.T) {
	for n, ceiling := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second} {
		var lo, hi time.Duration = ceiling, 0
		for range 5000 {
			w := backoff(n)
			if w < 0 || w > ceiling {
				t.Fatalf("backoff(%d) = %v, outside [0, %v]", n, w, ceiling)
			}
			lo, hi = min(lo, w), max(hi, w)
		}
		if hi < ceiling*9/10 || lo > ceiling/10 {
			t.Errorf("backoff(%d) spans [%v, %v], not full jitter under %v", n, lo, hi, ceiling)
		}
	}
}

// recorder keeps what each request carried.
type recorder struct {
	mu       sync.Mutex
	keys     []string
	bodies   [][]byte
	times    []time.Time
	statuses []int
}

func (r *recorder) wrap(next httpmock.Responder) httpmock.Responder {
	return func(req *http.Request) (*http.Response, error) {
		var body []byte
		if req.Body != nil {
			body, _ = io.ReadAll(req.Body)
		}
		r.mu.Lock()
		r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
		r.bodies = append(r.bodies, body)
		r.times = append(r.times, time.Now())
		r.mu.Unlock()
		resp, err := next(req)
		if resp != nil {
			r.mu.Lock()
			r.statuses = append(r.statuses, resp.StatusCode)
			r.mu.Unlock()
		}
		return resp, err
	}
}

// firstThen answers the first request with first and every later one with
// then.
func firstThen(first, then httpmock.Responder) httpmock.Responder {
	var n atomic.Int32
	return func(r *http.Request) (*http.Response, error) {
		if n.Add(1) == 1 {
			return first(r)
		}
		return then(r)
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.times)
}

func TestMaxRetries(t *testing.T) {
	for _, n := range []int{0, 2, 5} {
		synctest.Test(t, func(t *testing.T) {
			c, mt := mockClient(t, WithMaxRetries(n))
			var rec recorder
			mt.RegisterResponder("GET", "=~/v1/me", rec.wrap(problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"1"}}, nil)))
			_, err := c.Me(context.Background())
			if rec.count() != n+1 {
				t.Errorf("MaxRetries %d: %d requests, want %d", n, rec.count(), n+1)
			}
			var apiErr *Error
			if !errors.As(err, &apiErr) || !errors.Is(err, ErrRateLimited) {
				t.Fatalf("MaxRetries %d: %v", n, err)
			}
			var re *RetryError
			if n > 0 && (!errors.As(err, &re) || re.Attempts != n+1 || !strings.Contains(err.Error(), "attempts")) {
				t.Errorf("MaxRetries %d: %v does not say %d attempts", n, err, n+1)
			}
		})
	}
}

func TestPerCallMaxRetriesOverridesClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, mt := mockClient(t, WithMaxRetries(5))
		var rec recorder
		mt.RegisterResponder("GET", "=~/v1/me", rec.wrap(problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"1"}}, nil)))
		_, _ = c.Me(context.Background(), WithMaxRetries(1))
		if rec.count() != 2 {
			t.Errorf("%d requests, want 2", rec.count())
		}
	})
}

// TestRetryWaitsWhatTheServerAsked runs each hint form end to end on
// virtual time and checks the gap between the attempts.
func TestRetryWaitsWhatTheServerAsked(t *testing.T) {
	cases := []struct {
		name    string
		header  func(now time.Time) string
		members map[string]any
		code    string
		want    time.Duration
		spacing time.Duration
	}{
		{"delay-seconds", func(time.Time) string { return "3" }, nil, CodeRateLimited, 3 * time.Second, 0},
		{"IMF-fixdate", func(now time.Time) string { return now.Add(4 * time.Second).UTC().Format(http.TimeFormat) }, nil, CodeRateLimited, 4 * time.Second, 0},
		{"RFC 850", func(now time.Time) string { return now.Add(5 * time.Second).UTC().Format(time.RFC850) }, nil, CodeRateLimited, 5 * time.Second, 0},
		{"asctime", func(now time.Time) string { return now.Add(6 * time.Second).UTC().Format(time.ANSIC) }, nil, CodeRateLimited, 6 * time.Second, 0},
		{"retryAfterMs before Retry-After", func(time.Time) string { return "10" }, map[string]any{"retryAfterMs": 2500}, CodeRateLimited, 2500 * time.Millisecond, 0},
		{"date in the past", func(now time.Time) string { return now.Add(-time.Hour).UTC().Format(http.TimeFormat) }, nil, CodeRateLimited, 0, 0},
		{"OVERLOADED spacing", func(time.Time) string { return "2" }, nil, CodeOverloaded, 2 * time.Second, 3 * time.Second},
		{"IDEMPOTENCY_KEY_IN_USE", func(time.Time) string { return "1" }, nil, CodeIdempotencyKeyInUse, time.Second, 0},
		{"an unknown 429 code", func(time.Time) string { return "2" }, nil, "CONCURRENCY_LIMITED", 2 * time.Second, 0},
		{"an unknown 503 code, like OVERLOADED", func(time.Time) string { return "2" }, map[string]any{"retryAfterMs": 1500}, "MAINTENANCE", 1500 * time.Millisecond, 3 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, mt := mockClient(t)
				var rec recorder
				status := 429
				switch tc.code {
				case CodeIdempotencyKeyInUse:
					status = 409
				case "MAINTENANCE":
					status = 503
				}
				first := true
				mt.RegisterResponder("POST", "=~/v1/contacts", rec.wrap(func(r *http.Request) (*http.Response, error) {
					if first {
						first = false
						return problemResponder(status, tc.code, http.Header{"Retry-After": {tc.header(time.Now())}}, tc.members)(r)
					}
					return jsonResponder(201, sampleContact)(r)
				}))
				if _, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}); err != nil {
					t.Fatal(err)
				}
				gap := rec.times[1].Sub(rec.times[0])
				lo := tc.want
				if tc.spacing > 0 {
					lo += time.Second
				}
				if gap < lo || gap > tc.want+jitterBound(tc.want)+tc.spacing {
					t.Errorf("retried after %v; want %v plus at most %v", gap, lo, jitterBound(tc.want)+tc.spacing)
				}
			})
		})
	}
}

// TestMalformedHintFallsBackToBackoff: a hint that does not parse is no
// hint, so the doubling schedule applies.
func TestMalformedHintFallsBackToBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waits []time.Duration
		c, mt := mockClient(t, WithMaxRetries(10), WithOnRetry(func(ev RetryEvent) { waits = append(waits, ev.Wait) }))
		var rec recorder
		mt.RegisterResponder("GET", "=~/v1/me", rec.wrap(problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"-3"}}, map[string]any{"retryAfterMs": "soon"})))
		_, err := c.Me(context.Background())
		if rec.count() != 1+maxHintlessRetries {
			t.Errorf("%d requests; hintless retries stop after five attempts", rec.count())
		}
		for i, w := range waits {
			if ceiling := time.Second << i; w > ceiling {
				t.Errorf("wait %d = %v > %v", i, w, ceiling)
			}
		}
		if !errors.Is(err, ErrRateLimited) {
			t.Errorf("err = %v", err)
		}
	})
}

// TestEveryOnRetryHearsEveryRetry: WithOnRetry given twice (options
// composed with WithOptions) calls both, in the order given, as WithOnWait
// does; a nil func is refused.
func TestEveryOnRetryHearsEveryRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var heard []string
		c, mt := mockClient(t, WithOnRetry(func(RetryEvent) { heard = append(heard, "first") }),
			WithOptions(WithOnRetry(func(RetryEvent) { heard = append(heard, "second") })))
		n := 0
		mt.RegisterResponder("GET", "=~/v1/me", func(r *http.Request) (*http.Response, error) {
			if n++; n == 1 {
				return problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"1"}}, nil)(r)
			}
			return jsonResponder(200, map[string]any{"keyId": "key_1"})(r)
		})
		if _, err := c.Me(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(heard, []string{"first", "second"}) {
			t.Errorf("one retry heard as %v, want by both, in order", heard)
		}
		if _, err := NewClient(WithAPIKey(testKey), WithOnRetry(nil)); err == nil {
			t.Error("WithOnRetry took a nil func")
		}
	})
}

func TestSameKeyAndBodyOnEveryRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, mt := mockClient(t)
		var rec recorder
		n := 0
		mt.RegisterResponder("POST", "=~/v1/contacts", rec.wrap(func(r *http.Request) (*http.Response, error) {
			if n++; n < 3 {
				return problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"1"}}, nil)(r)
			}
			return jsonResponder(201, sampleContact)(r)
		}))
		email := "ada@example.com"
		if _, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada", Email: String(email)}); err != nil {
			t.Fatal(err)
		}
		if rec.count() != 3 {
			t.Fatalf("%d requests", rec.count())
		}
		for i := range rec.keys {
			if rec.keys[i] == "" || rec.keys[i] != rec.keys[0] || !bytes.Equal(rec.bodies[i], rec.bodies[0]) {
				t.Errorf("attempt %d sent key %q body %s; attempt 1 key %q body %s", i+1, rec.keys[i], rec.bodies[i], rec.keys[0], rec.bodies[0])
			}
		}
		// A caller's own key is kept.
		n = 0
		if _, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}, WithIdempotencyKey("mine-1")); err != nil {
			t.Fatal(err)
		}
		for _, k := range rec.keys[3:] {
			if k != "mine-1" {
				t.Errorf("sent key %q, want mine-1", k)
			}
		}
	})
}

func TestDeadlineShorterThanWaitReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, mt := mockClient(t)
		mt.RegisterResponder("GET", "=~/v1/me", problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"30"}}, nil))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Me(ctx)
		if elapsed := time.Since(start); elapsed != 0 {
			t.Errorf("returned after %v of virtual time, want at once", elapsed)
		}
		var apiErr *Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &apiErr) || apiErr.RetryAfter != 30*time.Second {
			t.Errorf("err = %v", err)
		}
	})
}

func TestCancelDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, mt := mockClient(t)
		mt.RegisterResponder("GET", "=~/v1/me", problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"30"}}, nil))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(2*time.Second, cancel)
		_, err := c.Me(ctx)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrRateLimited) {
			t.Errorf("err = %v", err)
		}
	})
}

// TestACancelledCallIsNoRefusal: a call whose context has ended before
// anything held it is not sent and fails with a local error that wraps the
// context's, not as a 429 RATE_LIMITED, with or without the budget.
func TestACancelledCallIsNoRefusal(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithoutBudget()}} {
		c, mt := mockClient(t, opts...)
		var rec recorder
		mt.RegisterResponder("GET", "=~/v1/contacts/", rec.wrap(jsonResponder(200, map[string]any{})))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := c.Contacts.Get(ctx, "con_1")
		var e *Error
		if !errors.As(err, &e) || !e.Local || e.Status != 0 || errors.Is(err, ErrRateLimited) || !errors.Is(err, context.Canceled) || rec.count() != 0 {
			t.Errorf("without budget %v: %v (%d sent)", opts != nil, err, rec.count())
		}
	}
}

func TestHintAboveMaxRetryWaitFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, mt := mockClient(t, WithMaxRetryWait(time.Minute))
		var rec recorder
		mt.RegisterResponder("GET", "=~/v1/me", rec.wrap(problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"300"}}, map[string]any{"policy": "lockout"})))
		start := time.Now()
		_, err := c.Me(context.Background())
		var apiErr *Error
		if !errors.As(err, &apiErr) || apiErr.RetryAfter != 300*time.Second || apiErr.Policy != "lockout" {
			t.Fatalf("err = %v", err)
		}
		if rec.count() != 1 || time.Since(start) != 0 {
			t.Errorf("%d requests over %v", rec.count(), time.Since(start))
		}
	})
}

func TestQuotaExhaustedIsNotRetriedAndRefusedLocally(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, mt := mockClient(t)
		resets := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		var deletes, reads recorder
		mt.RegisterResponder("DELETE", "=~/v1/contacts/", deletes.wrap(problemResponder(429, CodeQuotaExhausted, http.Header{"Retry-After": {"3600"}},
			map[string]any{"policy": "delete-day", "resetsAt": resets.Format(time.RFC3339)})))
		mt.RegisterResponder("GET", "=~/v1/contacts/", reads.wrap(jsonResponder(200, sampleContact)))
		ctx := context.Background()
		err := c.Contacts.Delete(ctx, "con_1")
		if !errors.Is(err, ErrQuotaExhausted) || deletes.count() != 1 {
			t.Fatalf("first delete: %v after %d requests", err, deletes.count())
		}
		for range 3 {
			err = c.Contacts.Delete(ctx, "con_2")
			var apiErr *Error
			if !errors.Is(err, ErrQuotaExhausted) || !errors.As(err, &apiErr) || !apiErr.Local || !apiErr.ResetsAt.Equal(resets) {
				t.Fatalf("later delete: %v", err)
			}
			if !strings.Contains(err.Error(), resets.Format(time.RFC3339)) {
				t.Errorf("%q does not name the reset time", err)
			}
		}
		if deletes.count() != 1 {
			t.Errorf("%d deletes sent while the quota was known to be exhausted", deletes.count())
		}
		if _, err := c.Contacts.Get(ctx, "con_3"); err != nil || reads.count() != 1 {
			t.Errorf("a read is held too: %v", err)
		}
		time.Sleep(time.Until(resets))
		_ = c.Contacts.Delete(ctx, "con_4")
		if deletes.count() != 2 {
			t.Errorf("after the reset: %d deletes sent, want 2", deletes.count())
		}
	})
}

// TestDialFailureIsRetriedEvenWithoutKey: a request that never left may be
// sent again, whatever it is.
func TestDialFailureIsRetriedEvenWithoutKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, mt := mockClient(t)
		var rec recorder
		mt.RegisterResponder("POST", "=~/v1/contacts", rec.wrap(func(r *http.Request) (*http.Response, error) {
			if rec.count() == 1 {
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
			}
			return jsonResponder(201, sampleContact)(r)
		}))
		if _, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}, WithoutIdempotencyKey()); err != nil {
			t.Fatal(err)
		}
		if rec.count() != 2 || rec.keys[0] != "" {
			t.Errorf("%d requests, key %q", rec.count(), rec.keys[0])
		}
	})
}

func TestMoneyActionRefusesWithoutKey(t *testing.T) {
	c, mt := mockClient(t)
	for _, call := range []func() error{
		func() error {
			_, err := c.Invoices.Pay(context.Background(), "inv_1", WithoutIdempotencyKey())
			return err
		},
		func() error {
			_, err := c.Invoices.Refund(context.Background(), "inv_1", InvoiceRefund{}, WithoutIdempotencyKey())
			return err
		},
	} {
		err := call()
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeIdempotencyKeyRequired || !e.Local || !errors.Is(err, ErrBadRequest) ||
			!strings.Contains(err.Error(), "requires an Idempotency-Key") || mt.GetTotalCallCount() != 0 {
			t.Errorf("err = %v after %d calls", err, mt.GetTotalCallCount())
		}
	}
}

func TestRefusalsAreLoggedAndObserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		var mu sync.Mutex
		var events []RetryEvent
		logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
		c, mt := mockClient(t, WithLogger(logger), WithOnRetry(func(ev RetryEvent) { events = append(events, ev) }))
		mt.RegisterResponder("GET", "=~/v1/contacts", firstThen(
			problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"2"}}, map[string]any{"policy": "key"}),
			jsonResponder(200, map[string]any{"data": []any{}, "nextCursor": nil})))
		if _, err := c.Contacts.List(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		var rec map[string]any
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatalf("log %q: %v", buf.String(), err)
		}
		for _, k := range []string{"host", "operation", "class", "code", "policy", "attempt", "retry_after", "wait", "request_id"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("log lacks %s: %s", k, buf.String())
			}
		}
		if rec["level"] != "WARN" || rec["operation"] != "listContacts" || rec["policy"] != "key" || rec["class"] != "read" ||
			rec["retry_after"] != float64(2*time.Second) {
			t.Errorf("log: %s", buf.String())
		}
		if strings.Contains(buf.String(), testKey) {
			t.Error("the API key is logged")
		}
		if len(events) != 1 || events[0].Attempt != 1 || events[0].Operation != "listContacts" || events[0].Wait < 2*time.Second || !errors.Is(events[0].Err, ErrRateLimited) {
			t.Errorf("events: %+v", events)
		}
	})
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestProxy503ForAnUnkeyedWriteIsNotRetried: a retryable answer that is
// no refusal (a 503 without the API's problem, or with a code the contract
// does not give a 503; an IDEMPOTENCY_KEY_IN_USE, which a request without a
// key cannot get from the API) does not prove the write was not done; the
// API's OVERLOADED does.
func TestProxy503ForAnUnkeyedWriteIsNotRetried(t *testing.T) {
	proxyJSON := httpmock.NewStringResponder(503, `{"code":"UPSTREAM_CONNECT_ERROR","message":"upstream reset"}`).
		HeaderSet(http.Header{"Content-Type": {"application/json"}, "Retry-After": {"0"}})
	for name, refuse := range map[string]httpmock.Responder{
		"plain text":         httpmock.NewStringResponder(503, "upstream reset before headers"),
		"JSON with a code":   proxyJSON,
		"the API's INTERNAL": problemResponder(503, "INTERNAL", http.Header{"Retry-After": {"0"}}, nil),
		"a 409 in use":       problemResponder(409, CodeIdempotencyKeyInUse, http.Header{"Retry-After": {"0"}}, nil),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var buf bytes.Buffer
				var mu sync.Mutex
				c, mt := mockClient(t, WithLogger(slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, nil))))
				var rec recorder
				mt.RegisterResponder("POST", "=~/v1/contacts", rec.wrap(refuse))
				_, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}, WithoutIdempotencyKey())
				if !errors.Is(err, ErrOutcomeUnknown) || rec.count() != 1 {
					t.Errorf("%d requests, err = %v", rec.count(), err)
				}
				if mu.Lock(); name != "a 409 in use" && !strings.Contains(buf.String(), `"level":"WARN"`) { // every 429 and 503
					t.Errorf("the answer is not logged at WARN: %q", buf.String())
				}
				mu.Unlock()
				_, err = c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"})
				if rec.count() != 4 {
					t.Errorf("a keyed write is retried: %d requests, err = %v", rec.count(), err)
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		c, mt := mockClient(t)
		var rec recorder
		mt.RegisterResponder("POST", "=~/v1/contacts", rec.wrap(problemResponder(503, CodeOverloaded, http.Header{"Retry-After": {"0"}}, nil)))
		_, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}, WithoutIdempotencyKey())
		if !errors.Is(err, ErrOverloaded) || rec.count() != 3 {
			t.Errorf("an unkeyed write the API refused as OVERLOADED: %d requests, err = %v", rec.count(), err)
		}
	})
}

// TestUnkeyedWriteCutByTheContextIsOutcomeUnknown: the context ends while
// an unkeyed create is at the server.
func TestUnkeyedWriteCutByTheContextIsOutcomeUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New(sandbox.WithLatency(500 * time.Millisecond))
		c := newTestClient(t, srv.Transport(), WithAPIKey(sandbox.TestKey))
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := c.Contacts.Create(ctx, ContactCreate{Name: "Maybe"}, WithoutIdempotencyKey())
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v", err)
		}
		time.Sleep(time.Second) // the server still finishes the create
		if srv.ContactsNamed("Maybe") != 1 {
			t.Errorf("%d contacts: the write happened once", srv.ContactsNamed("Maybe"))
		}
	})
}
