package redisbudget

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/budget"
	"github.com/bodo-app/bodo-go/internal/ops"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// keyRecorder is a Store that notes the key its client uses.
type keyRecorder struct {
	budgetstore.Store
	mu  sync.Mutex
	key string
}

func (r *keyRecorder) Acquire(ctx context.Context, key string, req budgetstore.Acquire) (budgetstore.Grant, error) {
	r.mu.Lock()
	r.key = key
	r.mu.Unlock()
	return r.Store.Acquire(ctx, key, req)
}

// TestAnotherProcessesRefusalIsNotSatOutPastMaxRetryWait: another process
// hears a RATE_LIMITED on the key level that asks an hour, and its release
// leaves the level owing what its call lacked for the hour. The store says the wait it
// then answers is a refusal's, so a call of this process whose
// MaxRetryWait is a second fails at once with the local *Error whose
// RetryAfter says how long, although its context would wait three hours;
// a wait of the level's own tokens is no refusal's.
func TestAnotherProcessesRefusalIsNotSatOutPastMaxRetryWait(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	bud := New(rs.Client(t))
	rec := &keyRecorder{Store: bud}
	c := sandboxClient(t, sandbox.New(), rec, bodo.WithMaxRetryWait(time.Second))
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	k := rec.key
	rec.mu.Unlock()

	ctx := context.Background()
	g, err := bud.Acquire(ctx, k, acquire("other", time.Minute, key(598)))
	if err != nil || !g.Admitted {
		t.Fatalf("the other process's call: %+v %v", g, err)
	}
	if g, err := bud.Acquire(ctx, k, acquire("model", time.Minute, key(5))); err != nil || g.Admitted || g.Refusal {
		t.Fatalf("a wait for the level's own tokens: %+v %v, want no refusal", g, err)
	}
	owed := key(1 - 5*time.Hour.Seconds()) // an hour's refill short of one point
	owed.Hold = time.Hour
	if err := bud.Release(ctx, k, budgetstore.Release{Lease: "other", Refused: true, Cut: true, Owe: []budgetstore.Level{owed},
		RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
		t.Fatal(err)
	}
	if g, err := bud.Acquire(ctx, k, acquire("after", time.Minute, key(1))); err != nil || g.Admitted || !g.Refusal || g.Reason != "key" {
		t.Fatalf("after the refusal: %+v %v, want a refusal's wait on key", g, err)
	}

	callCtx, cancel := context.WithTimeout(ctx, 3*time.Hour)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Me(callCtx)
		done <- err
	}()
	select {
	case err := <-done:
		var e *bodo.Error
		if !errors.As(err, &e) || !e.Local || e.RetryAfter <= 59*time.Minute || e.RetryAfter > time.Hour || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("held by another process's refusal: %v, want a local *Error with RetryAfter of about an hour", err)
		}
	case <-time.After(5 * time.Second):
		cancel()
		<-done
		t.Error("the call sat out another process's refusal of an hour, past its MaxRetryWait of a second")
	}
}

// TestARefusalsWaitSentLateStillHoldsEveryProcess: process A's create is
// refused on write with a 20 s wait while A cannot reach Redis for 1.5 s,
// longer than a release stays fresh. The release A sends when Redis is
// back still carries the wait, less the time it came late, so process B's
// create is held by it too; sent at once, the same.
func TestARefusalsWaitSentLateStillHoldsEveryProcess(t *testing.T) {
	t.Parallel()
	for _, outage := range []time.Duration{0, 1500 * time.Millisecond} {
		t.Run(outage.String(), func(t *testing.T) {
			rs := startRedis(t)
			k := testKey()
			var down atomic.Bool
			sa := &faultyBudget{real: New(rs.Client(t)), pick: faultWhile(&down, faultError)}
			a, b := budget.New(), budget.New()
			a.UseStore(sa, k, nil)
			b.UseStore(New(rs.Client(t)), k, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			admitAnswered(ctx, t, a, ops.GetMe, "")
			admitAnswered(ctx, t, b, ops.GetMe, "")
			tk, _, err := a.Admit(ctx, callOf(ops.CreateContact))
			if err != nil {
				t.Fatal(err)
			}
			down.Store(outage > 0)
			tk.Finish(budget.Answer{Status: http.StatusTooManyRequests, Header: http.Header{},
				Problem: &budget.Problem{Code: "RATE_LIMITED", Policy: budget.Write, RetryAfter: 20 * time.Second, Hinted: true}})
			time.Sleep(outage)
			down.Store(false)
			time.Sleep(time.Second) // A's keeper sends the kept release
			cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
			defer ccancel()
			if tk, _, err := b.Admit(cctx, callOf(ops.CreateContact)); err == nil {
				tk.Finish(budget.Answer{Status: http.StatusOK, Header: http.Header{}})
				t.Errorf("B's create went %v after the server told A to wait 20 s", outage+time.Second)
			}
		})
	}
}
