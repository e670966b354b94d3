package bodo

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/sandbox"
)

type callMark struct{}

// TestOnWaitHearsOfHeldCallsThatFail: a call held until its context ends,
// and one whose deadline the wait would pass, are never sent; OnWait hears
// of both, with the wait, the level that held them, the call's error and
// its context, and a second OnWait hears the same.
func TestOnWaitHearsOfHeldCallsThatFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New()
		var first, second collector[WaitEvent]
		c := budgetClient(t, srv, WithOnWait(first.add), WithOnWait(second.add))
		if _, err := c.Me(context.Background()); err != nil {
			t.Fatal(err)
		}
		c.state.Spend("key", -10) // 4 s until a 10-point delete
		ctx, cancel := context.WithCancel(context.WithValue(context.Background(), callMark{}, "held"))
		done := make(chan error)
		go func() { done <- c.Contacts.Delete(ctx, "con_1") }()
		time.Sleep(2 * time.Second)
		cancel()
		heldErr := <-done
		short, cancelShort := context.WithTimeout(context.Background(), time.Second)
		defer cancelShort()
		shortErr := c.Contacts.Delete(short, "con_1")

		evs := first.take()
		if len(evs) != 2 {
			t.Fatalf("OnWait heard %d events, want 2: %+v", len(evs), evs)
		}
		held, fast := evs[0], evs[1]
		if held.Operation != "deleteContact" || held.Host != c.host || held.Reason != "key" || held.Wait != 2*time.Second ||
			!errors.Is(held.Err, context.Canceled) || held.Err != heldErr || held.Context().Value(callMark{}) != "held" {
			t.Errorf("the held call: %+v (the call returned %v)", held, heldErr)
		}
		if fast.Reason != "key" || fast.Wait != 0 || !errors.Is(fast.Err, context.DeadlineExceeded) || fast.Err != shortErr {
			t.Errorf("the call whose deadline the wait passes: %+v (the call returned %v)", fast, shortErr)
		}
		if n := srv.Stats(sandbox.TestKey).Requests; n != 1 {
			t.Errorf("%d requests sent, want the getMe alone", n)
		}
		if evs2 := second.take(); len(evs2) != 2 || evs2[0].Err != heldErr {
			t.Errorf("the second OnWait heard %+v", evs2)
		}
	})
}

// TestOnWaitHearsOfAnExhaustedQuota: a delete the client refuses itself,
// its quota used up, is an event with the policy and ErrQuotaExhausted.
func TestOnWaitHearsOfAnExhaustedQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log collector[WaitEvent]
		c, mt := mockClient(t, WithOnWait(log.add))
		mt.RegisterResponder("DELETE", "=~/v1/contacts/", problemResponder(429, CodeQuotaExhausted, http.Header{"Retry-After": {"3600"}},
			map[string]any{"policy": "delete-day", "resetsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}))
		_ = c.Contacts.Delete(context.Background(), "con_1")
		if evs := log.take(); len(evs) != 0 {
			t.Errorf("a delete the server refused: %+v", evs)
		}
		err := c.Contacts.Delete(context.Background(), "con_2")
		evs := log.take()
		if len(evs) != 1 || evs[0].Reason != "delete-day" || !errors.Is(evs[0].Err, ErrQuotaExhausted) || evs[0].Err != err {
			t.Errorf("a delete refused locally (%v): %+v", err, evs)
		}
		if n := mt.GetTotalCallCount(); n != 1 {
			t.Errorf("%d deletes sent", n)
		}
	})
}

func TestWithOptionsAppliesEach(t *testing.T) {
	var log collector[WaitEvent]
	if _, err := NewClient(WithAPIKey(testKey), WithOptions(WithOnWait(log.add), nil)); err == nil {
		t.Error("WithOptions took a nil Option")
	}
	if _, err := NewClient(WithAPIKey(testKey), WithOnWait(nil)); err == nil {
		t.Error("WithOnWait took a nil func")
	}
	c, err := NewClient(WithOptions(WithAPIKey(testKey), WithBaseURL("https://options.test")))
	if err != nil || c.server != "https://options.test/" {
		t.Errorf("NewClient(WithOptions(...)): %v, %v", c, err)
	}
}

// TestAPanickingOnWaitFreesItsAttempt: an OnWait that panics as it hears
// of a call the budget held (recovered by the caller, as a server's
// recovery middleware does) leaves no attempt in flight and no refusal
// behind, so the key's next calls go as before.
func TestAPanickingOnWaitFreesItsAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refuse := true
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if refuse {
				return problemResponder(http.StatusTooManyRequests, CodeRateLimited, http.Header{"Retry-After": {"1"}}, map[string]any{"retryAfterMs": 1000})(r)
			}
			return contactAnswer(nil)(r)
		})
		c := hostileClient(t, uniqueBaseURL(), rt, WithMaxRetries(0), WithOnWait(func(ev WaitEvent) {
			if ev.Err == nil && ev.Wait > 0 {
				panic("a broken callback")
			}
		}))
		for range 3 {
			refuse = true
			_, _ = c.Contacts.Get(context.Background(), hostileContactID) // a 1 s wait for every call of the key
			refuse = false
			func() {
				defer func() { _ = recover() }()
				_, _ = c.Contacts.Get(context.Background(), hostileContactID) // held 1 s: OnWait panics
			}()
			time.Sleep(time.Hour)
		}
		if b := c.Budget(); b.InFlight != 0 || b.Refusals != 0 {
			t.Errorf("an hour after 3 recovered OnWait panics: %d in flight, %d refusals counted", b.InFlight, b.Refusals)
		}
	})
}
