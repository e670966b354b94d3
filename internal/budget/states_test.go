package budget

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// countingHandler counts the records logged through it.
type countingHandler struct{ n *atomic.Int32 }

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// policies is a RateLimit-Policy field of n learned policies named prefix0 on.
func policies(prefix string, n int) string {
	var ps []string
	for i := range n {
		ps = append(ps, fmt.Sprintf(`"%s%d";q=100;w=60`, prefix, i))
	}
	return strings.Join(ps, ", ")
}

// TestAKeyLogsItsOverflowOnceToTheFirstLogger: a key given a logger says
// once, through it, that the server named more policies than it learns,
// however many answers do so after; a later logger does not take its place.
func TestAKeyLogsItsOverflowOnceToTheFirstLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var first, second atomic.Int32
		s := New()
		s.UseLogger(slog.New(countingHandler{&first}))
		s.UseLogger(slog.New(countingHandler{&second}))
		for i := range 3 {
			over := policies(fmt.Sprint("p", i, "_"), MaxLearnedPolicies+1)
			admitNow(t, s, call(ops.GetMe, "")).Finish(answer(over, ""))
		}
		if first.Load() != 1 || second.Load() != 0 {
			t.Errorf("three answers past the cap logged %d times to the first logger and %d to the second, want once to the first",
				first.Load(), second.Load())
		}
	})
}

// TestAnIdlePolicyStillAnnouncedIsLearnedAgain: a learned policy dropped
// while idle comes back with the next answer that announces it, although
// the RateLimit-Policy field is the one the answers sent all along.
func TestAnIdlePolicyStillAnnouncedIsLearnedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const policy = `"key";q=300;w=60, "search";q=20;w=60`
		s := New()
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer(policy, ""))
		late := admitNow(t, s, call(ops.GetMe, ""))
		time.Sleep(LevelIdleTTL + levelSweepEvery)
		late.Finish(answer(policy, "")) // its answer drops the idle policy first
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.levels["search"] == nil {
			t.Error("a policy the answer announces is not modelled after it idled")
		}
	})
}

// TestAnIdlePartitionHoldsItsTargetAgainWhenNamed: a partition (pk) of a
// learned policy that idled is dropped alone, its policy kept, and when
// the server names it again with nothing left it holds its target's
// calls as before.
func TestAnIdlePartitionHoldsItsTargetAgainWhenNamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const policy = `"key";q=300;w=60, "per-contact";q=2;w=60`
		s := New()
		update := func(id string) *Call {
			c := call(ops.UpdateContact, "")
			c.Target = "PATCH /v1/contacts/" + id
			return c
		}
		admitNow(t, s, update("con_1")).Finish(answer(policy, `"per-contact";r=1;t=60;pk=:AQ==:`))
		time.Sleep(LevelIdleTTL + levelSweepEvery)
		admitNow(t, s, update("con_2")).Finish(answer(policy, `"per-contact";r=2;t=0`)) // the policy is named, the partition idle
		s.mu.Lock()
		n, base := len(s.levels), s.levels["per-contact"]
		s.mu.Unlock()
		if base == nil || n != len(s.Snapshot().Levels)-1 { // the snapshot lists parallel too
			t.Fatalf("after the partition idled: the policy %v, %d levels modelled, snapshot %+v", base != nil, n, s.Snapshot().Levels)
		}
		admitNow(t, s, update("con_1")).Finish(answer(policy, `"per-contact";r=0;t=60;pk=:AQ==:`))
		if why := held(s, update("con_1")); why != "per-contact" {
			t.Errorf("a partition named again with nothing left holds its target's calls by %q", why)
		}
	})
}
