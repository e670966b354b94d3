package redisbudget

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go/internal/budget"
	"github.com/bodo-app/bodo-go/internal/ops"
)

// TestOneModelLocalOrShared is rule 7 of the budget's model (package doc of
// internal/budget): two processes' budgets of one key through one Redis.
// A refusal that one hears on the write level holds the other's writes for
// its wait and none of its reads; an OVERLOADED one hears holds every call
// of the other for its wait.
func TestOneModelLocalOrShared(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	store := New(rs.Client(t))
	admit := func(s *budget.State, op *ops.Operation) (*budget.Ticket, time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		tk, _, err := s.Admit(ctx, callOf(op))
		if err != nil {
			t.Fatalf("%s: %v", op.ID, err)
		}
		return tk, time.Since(start)
	}
	ok := budget.Answer{Status: http.StatusOK, Header: http.Header{}}
	refusal := func(status int, code, policy string, wait time.Duration) budget.Answer {
		return budget.Answer{Status: status, Header: http.Header{}, Problem: &budget.Problem{Code: code, Policy: policy, RetryAfter: wait, Hinted: true}}
	}
	a, b := budget.New(), budget.New()
	a.UseStore(store, "rule7", nil)
	b.UseStore(store, "rule7", nil)
	for _, s := range []*budget.State{a, b} {
		tk, _ := admit(s, ops.GetMe)
		tk.Finish(ok)
	}

	const wait = 2 * time.Second
	tk, _ := admit(a, ops.CreateContact)
	tk.Finish(refusal(http.StatusTooManyRequests, "RATE_LIMITED", budget.Write, wait))
	tk, waited := admit(b, ops.GetContact)
	tk.Finish(ok)
	if waited > wait/4 {
		t.Errorf("a read of the other process waited %v after a refusal on write", waited)
	}
	tk, waited = admit(b, ops.CreateContact)
	tk.Finish(ok)
	if waited < wait*9/10 {
		t.Errorf("a write of the other process went %v into the write level's wait of %v", waited, wait)
	}

	tk, _ = admit(a, ops.GetContact)
	tk.Finish(refusal(http.StatusServiceUnavailable, "OVERLOADED", "", wait))
	tk, waited = admit(b, ops.GetContact)
	tk.Finish(ok)
	if waited < wait*9/10 {
		t.Errorf("a read of the other process went %v into an OVERLOADED's wait of %v", waited, wait)
	}
}

// TestAWriteTheStoreHoldsHoldsNoRead is rule 4 of the budget's model
// through the store: while the store holds a process's write at the write
// level, for the wait of a refusal another process heard, the same
// process's reads go.
func TestAWriteTheStoreHoldsHoldsNoRead(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	store := New(rs.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok := budget.Answer{Status: http.StatusOK, Header: http.Header{}}
	a, b := budget.New(), budget.New()
	a.UseStore(store, "rule4", nil)
	b.UseStore(store, "rule4", nil)
	for _, s := range []*budget.State{a, b} {
		tk, _, err := s.Admit(ctx, callOf(ops.GetMe))
		if err != nil {
			t.Fatal(err)
		}
		tk.Finish(ok)
	}
	const wait = 2 * time.Second
	tk, _, err := a.Admit(ctx, callOf(ops.CreateContact))
	if err != nil {
		t.Fatal(err)
	}
	tk.Finish(budget.Answer{Status: http.StatusTooManyRequests, Header: http.Header{},
		Problem: &budget.Problem{Code: "RATE_LIMITED", Policy: budget.Write, RetryAfter: wait, Hinted: true}})

	written := make(chan time.Time, 1)
	go func() {
		tk, _, err := b.Admit(ctx, callOf(ops.CreateContact))
		if err == nil {
			tk.Finish(ok)
		}
		written <- time.Now()
	}()
	time.Sleep(100 * time.Millisecond) // the write waits at the store
	start := time.Now()
	for i := range 5 {
		tk, _, err := b.Admit(ctx, callOf(ops.GetContact))
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		tk.Finish(ok)
	}
	if took := time.Since(start); took > wait/4 {
		t.Errorf("5 reads took %v while the process's write waited for the write level", took)
	}
	if at := <-written; at.Sub(start) < wait*3/4 {
		t.Errorf("the write went %v into the write level's wait of %v", at.Sub(start), wait)
	}
}

// callOf is a budgeted call of op with no query.
func callOf(op *ops.Operation) *budget.Call {
	q := url.Values{}
	return &budget.Call{Op: op.ID, Cost: float64(op.CostFor(q.Get)), Demand: budget.DemandOf(op, q), Target: op.Method + " " + op.Path, Budgeted: true}
}
