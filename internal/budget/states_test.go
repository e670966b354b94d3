package budget

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
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

// TestALeavingKeyLeavesNoEmptyHostOrGroup: when every key of a host and of
// a principal leaves the map of For, the host and the group leave with
// them, so that keys that come and go take no memory for good.
func TestALeavingKeyLeavesNoEmptyHostOrGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const host = "leave.identity.test"
		twoKeysOfOnePrincipal(host)
		time.Sleep(IdleTTL + sweepEvery)
		For("trigger.identity.test", "k") // sweeps
		states.Lock()
		defer states.Unlock()
		if _, ok := states.hosts[host+"/"]; ok {
			t.Error("the host of keys that all left is still counted")
		}
		for g := range states.groups {
			if strings.HasPrefix(g, host+"/") {
				t.Errorf("the group %q of keys that all left is still kept", g)
			}
		}
	})
}

// TestAStateNotOfForSplitsNothing: states of New, which For does not share
// and whose host is unknown, split no level whatever identity they are
// told; an identity of neither principal nor org leaves a key's as it was.
func TestAStateNotOfForSplitsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := New(), New()
		a.SetIdentity("prn_new", "org_new")
		b.SetIdentity("prn_new", "org_new")
		if p, o := splitOf(a, Principal), splitOf(a, Org); p != 1 || o != 1 {
			t.Errorf("parts of a state of New: principal %v, org %v, want 1 and 1", p, o)
		}
		x, y := twoKeysOfOnePrincipal("neither.identity.test")
		x.SetIdentity("", "")
		if p, o := splitOf(y, Principal), splitOf(y, Org); p != 0.5 || o != 0.5 {
			t.Errorf("after its partner was told no identity, a key's parts: principal %v, org %v, want 1/2 and 1/2", p, o)
		}
	})
}

// TestAKeyRetiredWhileItsIdentityCameJoinsNoGroup: an identity that comes
// as the sweep retires its key (SetIdentity waiting for the lock of
// states) leaves the key out of the groups, so that it takes no part of
// their levels from the keys that stay.
func TestAKeyRetiredWhileItsIdentityCameJoinsNoGroup(t *testing.T) {
	host := fmt.Sprintf("retired%d.identity.test", retiredRuns.Add(1)) // the keys of an earlier run (-count) stay
	a, b := For(host, "a"), For(host, "b")
	b.SetIdentity("prn_r", "org_r")
	states.Lock()
	var wg sync.WaitGroup
	wg.Go(func() { a.SetIdentity("prn_r", "org_r") })
	for deadline := time.Now().Add(10 * time.Second); !waitsForALock("SetIdentity"); {
		if time.Now().After(deadline) {
			states.Unlock()
			t.Fatal("SetIdentity does not wait for the lock of states")
		}
		time.Sleep(time.Millisecond)
	}
	a.retired.Store(true) // as sweep retires it
	delete(states.m, a.id)
	leaveLocked(a)
	states.Unlock()
	wg.Wait()
	if p := splitOf(b, Principal); p != 1 {
		t.Errorf("the key that stayed has %v of its principal's level, want all of it", p)
	}
	a.live().SetIdentity("prn_r", "org_r") // the key's new state joins instead
	if p := splitOf(b, Principal); p != 0.5 {
		t.Errorf("with the key's new state, the other has %v of their principal's level, want half", p)
	}
}

// retiredRuns counts the runs of TestAKeyRetiredWhileItsIdentityCameJoinsNoGroup.
var retiredRuns atomic.Int32

// waitsForALock reports whether a goroutine in fn waits for a mutex.
func waitsForALock(fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "[sync.Mutex.Lock") && strings.Contains(g, "(*State)."+fn) {
			return true
		}
	}
	return false
}

// TestASnapshotShowsALevelsWaitAndTheSlots: a snapshot shows the end of a
// refusal's wait on the level it named while it runs, and none after;
// it lists the slots in flight as parallel, right after write.
func TestASnapshotShowsALevelsWaitAndTheSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		admitNow(t, s, call(ops.CreateContact, "")).Finish(refusal(http.StatusTooManyRequests, codeRateLimited, Write, 30*time.Second))
		end := time.Now().Add(30 * time.Second)
		level := func(name string) (LevelSnapshot, int) {
			for i, l := range s.Snapshot().Levels {
				if l.Name == name {
					return l, i
				}
			}
			t.Fatalf("no level %s in the snapshot", name)
			return LevelSnapshot{}, 0
		}
		if w, _ := level(Write); !w.HeldUntil.Equal(end) {
			t.Errorf("the write level is held until %v, want the refusal's wait's end %v", w.HeldUntil, end)
		}
		time.Sleep(30 * time.Second)
		if w, _ := level(Write); !w.HeldUntil.IsZero() {
			t.Errorf("the write level is held until %v after the wait ended", w.HeldUntil)
		}
		_, wi := level(Write)
		if p, pi := level(Parallel); pi != wi+1 || p.Quota != 6 || p.Remaining != 6 {
			t.Errorf("parallel at %d after write at %d, quota %d, %v left; want right after write, 6 and 6", pi, wi, p.Quota, p.Remaining)
		}
	})
}

// TestTheMapOfForGivesBackItsMemoryWhenKeysLeave: once most keys left the
// map of For, at one sweep or half of them at each of many, it takes no
// more memory than the keys still in it: a map keeps its tables as entries
// leave.
func TestTheMapOfForGivesBackItsMemoryWhenKeysLeave(t *testing.T) {
	const keys, stay = 200_000, 200_000 / 256
	for _, sweeps := range []int{1, 8} {
		t.Run(fmt.Sprint(sweeps, " sweeps"), func(t *testing.T) {
			start := time.Now()
			sweep(start.Add(2 * IdleTTL)) // the idle states of other tests leave first
			heap := int64(liveHeap())
			states.Lock()
			// One state under many ids for each sweep, idle from a minute
			// apart: the map's own memory is measured.
			leaving := keys - stay
			for i := range sweeps {
				s := New()
				s.id, s.lastUse = "shrink.states.test/k", start.Add(time.Duration(i)*time.Minute)
				n := leaving / 2
				if i == sweeps-1 {
					n = leaving
				}
				for j := range n {
					states.m[fmt.Sprint("shrink.states.test/", i, "/", j)] = s
				}
				leaving -= n
			}
			kept := New()
			kept.id, kept.lastUse = "shrink.states.test/stay", start.Add(time.Hour)
			for j := range stay {
				states.m[fmt.Sprint("shrink.states.test/stay/", j)] = kept
			}
			states.Unlock()
			grown := int64(liveHeap()) - heap
			for i := range sweeps {
				sweep(start.Add(IdleTTL + time.Duration(i)*time.Minute + time.Second))
			}
			after := int64(liveHeap()) - heap
			states.Lock()
			for j := range stay {
				delete(states.m, fmt.Sprint("shrink.states.test/stay/", j))
			}
			states.Unlock()
			if after > grown/10 {
				t.Errorf("%d bytes still in use after all but %d of %d keys left the map in %d sweeps, of %d with them", after, stay, keys, sweeps, grown)
			}
		})
	}
}

// TestAStatusesRefusalsKeepAnIdleKeyForTheGuardsWindow: a key idle for
// IdleTTL whose status then counts refusals (a status answer whose body
// came slowly) stays in the map while they count for the lockout guard,
// and leaves after.
func TestAStatusesRefusalsKeepAnIdleKeyForTheGuardsWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const host = "refusals.states.test"
		s := For(host, "k")
		learn(t, s)
		time.Sleep(IdleTTL + sweepEvery)
		s.ObserveKeyStatus(time.Time{}, RefusalLimit)
		For("trigger.states.test", "k") // sweeps
		if s.retired.Load() {
			t.Fatal("a key whose refusals still count for the guard left the map")
		}
		time.Sleep(RefusalWindow)
		For("trigger.states.test", "k")
		if !s.retired.Load() {
			t.Error("an idle key stayed after its refusals stopped counting")
		}
	})
}

// TestALevelsWaitKeepsAnIdleKey: a key whose write level a refusal holds
// for longer than IdleTTL stays in the map until the wait ends, and
// leaves after.
func TestALevelsWaitKeepsAnIdleKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const host = "wait.states.test"
		s := For(host, "k")
		learn(t, s)
		admitNow(t, s, call(ops.CreateContact, "")).Finish(refusal(http.StatusTooManyRequests, codeRateLimited, Write, 30*time.Minute))
		time.Sleep(IdleTTL + sweepEvery)
		For("trigger.states.test", "k") // sweeps
		if s.retired.Load() {
			t.Fatal("a key whose write level a refusal's wait holds left the map")
		}
		time.Sleep(30 * time.Minute)
		For("trigger.states.test", "k")
		if !s.retired.Load() {
			t.Error("an idle key stayed after its level's wait ended")
		}
	})
}

// TestWhatAStateRetiredWhileItWaitedForTheLockIsToldGoesToTheKeysNewState:
// as a call does (TestACallOnAStateRetiredWhileItWaitedForTheLockGoesOnTheKeysNewState),
// a lockout of a status, a logger and a plan's quota given to a state of
// For that a sweep retires between finding it live and taking its lock
// land on the key's state in the map, not on the retired one. It runs
// outside a bubble, as that test does.
func TestWhatAStateRetiredWhileItWaitedForTheLockIsToldGoesToTheKeysNewState(t *testing.T) {
	until := time.Now().Add(time.Minute)
	logger := slog.New(countingHandler{new(atomic.Int32)})
	cases := []struct {
		name   string
		tell   func(*State)
		landed func(*State) bool
	}{
		{"a lockout", func(s *State) { s.ObserveKeyStatus(until, 0) }, func(s *State) bool { return !s.lockedUntil.IsZero() }},
		{"a logger", func(s *State) { s.UseLogger(logger) }, func(s *State) bool { return s.logger == logger }},
		{"a quota", func(s *State) { s.SetQuota(Write, 7, 0) }, func(s *State) bool { return s.levels[Write].quota == 7 }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			host := fmt.Sprintf("retiring%d.told.test", i)
			s := For(host, "k")
			s.mu.Lock()
			done := make(chan struct{})
			go func() {
				tc.tell(s)
				close(done)
			}()
			time.Sleep(20 * time.Millisecond) // it has found s live and waits for its lock
			retireAsSweepDoes(s)
			<-done
			cur := For(host, "k")
			s.mu.Lock()
			onOld := tc.landed(s)
			s.mu.Unlock()
			cur.mu.Lock()
			onNew := tc.landed(cur)
			cur.mu.Unlock()
			if cur == s || onOld || !onNew {
				t.Errorf("told the retired state: on it %v, on the key's state in the map %v", onOld, onNew)
			}
		})
	}
}

// retireAsSweepDoes retires s, whose lock the caller holds, and drops it
// from the map of For, as sweep does; it leaves s unlocked.
func retireAsSweepDoes(s *State) {
	states.Lock()
	defer states.Unlock()
	s.retired.Store(true)
	delete(states.m, s.id)
	s.mu.Unlock()
	leaveLocked(s)
}
