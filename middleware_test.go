package bodo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/bodotest"
	"github.com/jarcoal/httpmock"
)

// collector collects values from many goroutines, in order.
type collector[T any] struct {
	mu sync.Mutex
	vs []T
}

func (c *collector[T]) add(v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.vs = append(c.vs, v)
}

// take returns what was collected and starts afresh.
func (c *collector[T]) take() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	vs := c.vs
	c.vs = nil
	return vs
}

// trail records what middleware saw, in order.
type trail struct{ collector[string] }

// named is a middleware that records its name on the way in and out.
func (tr *trail) named(name string) Middleware {
	return func(req *http.Request, next MiddlewareNext) (*http.Response, error) {
		tr.add(name + ">")
		resp, err := next(req)
		tr.add("<" + name)
		return resp, err
	}
}

var okMe = jsonResponder(200, map[string]any{})

func TestMiddlewareOrderClientThenCall(t *testing.T) {
	var tr trail
	c, mt := mockClient(t, WithMiddleware(tr.named("a"), tr.named("b")))
	mt.RegisterResponder("GET", "=~/v1/me", okMe)
	if _, err := c.Me(context.Background(), WithMiddleware(tr.named("call"))); err != nil {
		t.Fatal(err)
	}
	want := []string{"a>", "b>", "call>", "<call", "<b", "<a"}
	if got := tr.take(); !slices.Equal(got, want) {
		t.Errorf("with a call's middleware: %q, want %q", got, want)
	}
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	want = []string{"a>", "b>", "<b", "<a"}
	if got := tr.take(); !slices.Equal(got, want) {
		t.Errorf("the next call, without: %q, want %q", got, want)
	}
}

func TestMiddlewareSeesEveryAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []Attempt
		mw := func(req *http.Request, next MiddlewareNext) (*http.Response, error) {
			a, ok := AttemptFrom(req.Context())
			if !ok {
				t.Error("AttemptFrom: no attempt in the request's context")
			}
			seen = append(seen, a)
			return next(req)
		}
		c, mt := mockClient(t, WithMiddleware(mw))
		mt.RegisterResponder("GET", "=~/v1/me", problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"1"}}, nil).
			Then(problemResponder(503, CodeOverloaded, nil, map[string]any{"retryAfterMs": 200})).
			Then(okMe))
		if _, err := c.Me(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 3 {
			t.Fatalf("the middleware saw %d attempts, want 3: %+v", len(seen), seen)
		}
		for i, a := range seen {
			if a.Operation != "getMe" || a.Method != "GET" || a.PathTemplate != "/v1/me" || a.Class != "read" || a.Cost != 1 || a.Client != c {
				t.Errorf("attempt %d: %+v", i+1, a)
			}
			if a.Number != i+1 {
				t.Errorf("attempt %d has Number %d", i+1, a.Number)
			}
		}
		if got := []string{seen[0].RetryReason, seen[1].RetryReason, seen[2].RetryReason}; !slices.Equal(got, []string{"", CodeRateLimited, CodeOverloaded}) {
			t.Errorf("retry reasons %q", got)
		}
		if _, ok := AttemptFrom(context.Background()); ok {
			t.Error("AttemptFrom found an attempt in a context of none")
		}
	})
}

func TestMiddlewareShortCircuits(t *testing.T) {
	c, mt := mockClient(t, WithMiddleware(func(req *http.Request, next MiddlewareNext) (*http.Response, error) {
		resp := httpmock.NewStringResponse(200, `{"principal":{"id":"prn_from_the_middleware"}}`)
		resp.Request = req
		return resp, nil
	}))
	mt.RegisterResponder("GET", "=~/v1/me", okMe)
	me, err := c.Me(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if me.Principal.ID != "prn_from_the_middleware" {
		t.Errorf("the call got %+v, not the middleware's answer", me.Principal)
	}
	if n := mt.GetTotalCallCount(); n != 0 {
		t.Errorf("the transport was called %d times", n)
	}
}

func TestMiddlewareErrorEndsTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errOpen := errors.New("circuit open")
		calls := 0
		c, mt := mockClient(t, WithMiddleware(func(req *http.Request, next MiddlewareNext) (*http.Response, error) {
			calls++
			return nil, errOpen
		}))
		mt.RegisterResponder("GET", "=~/v1/me", okMe)
		_, err := c.Me(context.Background())
		var apiErr *Error
		if !errors.Is(err, errOpen) || !errors.As(err, &apiErr) || !apiErr.Local {
			t.Fatalf("err = %v, want a local *Error wrapping the middleware's", err)
		}
		if calls != 1 || mt.GetTotalCallCount() != 0 {
			t.Errorf("%d attempts, %d requests sent; want 1 and 0", calls, mt.GetTotalCallCount())
		}
		if b := c.Budget(); b.Refusals != 0 || b.InFlight != 0 {
			t.Errorf("the budget counts %d refusals, %d in flight after an attempt that never left", b.Refusals, b.InFlight)
		}
	})
}

func TestMiddlewarePassesTransportErrorsToTheRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr trail
		c, mt := mockClient(t, WithMiddleware(func(req *http.Request, next MiddlewareNext) (*http.Response, error) {
			resp, err := next(req)
			a, _ := AttemptFrom(req.Context())
			tr.add("[" + a.RetryReason + "]")
			if err != nil {
				tr.add("err")
			}
			return resp, err
		}))
		mt.RegisterResponder("GET", "=~/v1/me", httpmock.Responder(httpmock.ConnectionFailure).Then(okMe))
		if _, err := c.Me(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(tr.take(), " "), "[] err [no-answer]"; got != want {
			t.Errorf("the middleware saw %q, want %q", got, want)
		}
	})
}

func TestMiddlewareWithoutAnswer(t *testing.T) {
	c, _ := mockClient(t, WithMaxRetries(0), WithMiddleware(func(*http.Request, MiddlewareNext) (*http.Response, error) {
		return nil, nil
	}))
	if _, err := c.Me(context.Background()); !errors.Is(err, errNoResponse) {
		t.Errorf("a middleware's (nil, nil): %v", err)
	}
	if _, err := NewClient(WithAPIKey(testKey), WithMiddleware(nil)); err == nil {
		t.Error("NewClient took a nil middleware")
	}
}

func TestMiddlewareNextSendsOnce(t *testing.T) {
	var again error
	c, mt := mockClient(t, WithMiddleware(func(req *http.Request, next MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		_, again = next(req)
		return resp, err
	}))
	mt.RegisterResponder("POST", "=~/v1/contacts", jsonResponder(201, map[string]any{"id": "con_1"}))
	if _, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}); err != nil {
		t.Fatal(err)
	}
	if n := mt.GetTotalCallCount(); n != 1 {
		t.Errorf("a middleware that calls next twice sent the create %d times", n)
	}
	if !errors.Is(again, ErrResent) {
		t.Errorf("the second next returned %v, want ErrResent", again)
	}
}

func TestMiddlewareNextSendsOnceConcurrently(t *testing.T) {
	var mu sync.Mutex
	var errs []error
	c, mt := mockClient(t, WithMiddleware(func(req *http.Request, next MiddlewareNext) (*http.Response, error) {
		var (
			first *http.Response
			wg    sync.WaitGroup
		)
		for range 2 {
			wg.Go(func() {
				resp, err := next(req)
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, err)
				if err == nil {
					first = resp
				}
			})
		}
		wg.Wait()
		return first, nil
	}))
	mt.RegisterResponder("POST", "=~/v1/contacts", jsonResponder(201, map[string]any{"id": "con_1"}))
	if _, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}); err != nil {
		t.Fatal(err)
	}
	if n := mt.GetTotalCallCount(); n != 1 {
		t.Errorf("two concurrent nexts sent the create %d times", n)
	}
	if len(errs) != 2 || (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), ErrResent) {
		t.Errorf("the two nexts returned %v, want one answer and one ErrResent", errs)
	}
}

// TestAttemptsAMiddlewareEndsCostNothing: an error a middleware returns
// without calling next ends the call, and the budget counts the attempt as
// never sent: 120 writes a fail-fast middleware (a circuit breaker) ends
// take nothing of the write level and wait for nothing.
func TestAttemptsAMiddlewareEndsCostNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer()
		defer srv.Close()
		errOpen := errors.New("circuit open")
		mw := func(req *http.Request, next MiddlewareNext) (*http.Response, error) {
			return nil, errOpen // never calls next
		}
		c, err := NewClient(WithBaseURL(srv.URL), WithHTTPClient(srv.Client()), WithAPIKey(bodotest.APIKey),
			WithLogger(quiet), WithMiddleware(mw))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for range 120 {
			if _, err := c.Contacts.Create(t.Context(), ContactCreate{Name: "x"}); !errors.Is(err, errOpen) {
				t.Fatalf("err = %v", err)
			}
		}
		took := time.Since(start)
		var write BudgetLevel
		for _, l := range c.Budget().Levels {
			if l.Name == "write" {
				write = l
			}
		}
		if took > 5*time.Second || write.Remaining < 59 {
			t.Errorf("120 writes ended by a middleware, none sent: they took %v of budget waits and the model's write level has %.0f of %d left (want ~0s and 60)",
				took.Round(time.Second), write.Remaining, write.Capacity)
		}
	})
}

// TestARefusalAMiddlewareMadeAnErrorStillHoldsTheKey: a middleware that
// turns every error status into an error of its own closes a 429's body
// unread; the wait its Retry-After asked still holds the key's next call.
func TestARefusalAMiddlewareMadeAnErrorStillHoldsTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		check := WithMiddleware(func(r *http.Request, next MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if err == nil && resp.StatusCode >= 400 {
				_ = resp.Body.Close()
				return nil, fmt.Errorf("status %d", resp.StatusCode)
			}
			return resp, err
		})
		c, mt := mockClient(t, check, WithMaxRetries(0))
		var rec recorder
		mt.RegisterResponder("GET", "=~/v1/contacts/", rec.wrap(firstThen(
			problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"2"}}, map[string]any{"policy": "key"}),
			jsonResponder(200, sampleContact))))
		ctx := context.Background()
		if _, err := c.Contacts.Get(ctx, "con_01JBD8Y3K5M7Q2W9X4Z6T1V0NP"); err == nil {
			t.Fatal("the middleware's error did not come back")
		}
		if _, err := c.Contacts.Get(ctx, "con_01JBD8Y3K5M7Q2W9X4Z6T1V0NP"); err != nil {
			t.Fatal(err)
		}
		if gap := rec.times[1].Sub(rec.times[0]); gap < 2*time.Second {
			t.Errorf("the next get went %v after a 429 that asked for 2s", gap)
		}
	})
}
