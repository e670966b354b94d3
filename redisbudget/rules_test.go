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
	call := func(op *ops.Operation) *budget.Call {
		q := url.Values{}
		return &budget.Call{Op: op.ID, Cost: float64(op.CostFor(q.Get)), Demand: budget.DemandOf(op, q), Target: op.Method + " " + op.Path, Budgeted: true}
	}
	admit := func(s *budget.State, op *ops.Operation) (*budget.Ticket, time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		tk, _, err := s.Admit(ctx, call(op))
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
