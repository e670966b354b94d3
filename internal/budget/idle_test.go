package budget

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/ops"
)

// statesOn counts the states of For on host.
func statesOn(host string) int {
	states.Lock()
	defer states.Unlock()
	n := 0
	for id := range states.m {
		if strings.HasPrefix(id, host+"/") {
			n++
		}
	}
	return n
}

// idleRuns counts the runs of TestIdleStatesLeaveTheMap in this process.
var idleRuns atomic.Int32

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestIdleStatesLeaveTheMap: 10,000 keys used once each and then idle leave
// the map of For after IdleTTL, and their memory with them; a key held
// by the server's wait or with an exhausted quota stays until that ends; a State held from
// before passes its calls to a new state, which starts from the documented
// levels and learns from the server again.
func TestIdleStatesLeaveTheMap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const keys = 10000
		host := fmt.Sprintf("idle%d.test", idleRuns.Add(1)) // the held states of an earlier run (-count) stay
		heap := int64(liveHeap())
		policy := `"key";q=300;w=60, "parallel";q=6;w=1`
		for i := range keys {
			s := For(host, fmt.Sprint("key", i))
			admitNow(t, s, call(ops.GetContact, "")).Finish(answer(policy, `"key";r=290;t=58`))
		}
		if n := statesOn(host); n != keys {
			t.Fatalf("%d states after %d keys", n, keys)
		}
		grown := int64(liveHeap()) - heap
		old := For(host, "key0")
		if got := old.Snapshot().Levels; len(got) == 0 {
			t.Fatal("no levels")
		}
		oldTokens := tokensOf(old, Key)

		locked := For(host, "locked")
		admitNow(t, locked, call(ops.GetMe, "")).Finish(refusal(http.StatusServiceUnavailable, codeOverloaded, "", 30*time.Minute))
		exhausted := For(host, "exhausted")
		learn(t, exhausted)
		admitNow(t, exhausted, call(ops.DeleteContact, "")).Finish(refusal(http.StatusTooManyRequests, codeQuotaExhausted, DeleteDay, 2*time.Hour))

		time.Sleep(IdleTTL + sweepEvery)
		For("trigger.idle.test", "k") // sweeps
		if n := statesOn(host); n != 2 {
			t.Errorf("%d states of the idle keys' host after %v, want the held and the exhausted ones", n, IdleTTL+sweepEvery)
		}
		if For(host, "locked") != locked || For(host, "exhausted") != exhausted {
			t.Error("a state with a server's wait or an exhausted quota running left the map")
		}
		if after := int64(liveHeap()) - heap; after > grown/10 {
			t.Errorf("%d bytes still in use after the idle period, of %d for %d keys", after, grown, keys)
		}

		// A Client holding the old state: its calls go to a new one, which
		// starts over (one call at a time until an answer, the documented
		// key level) and learns from the server's headers.
		if !old.retired.Load() {
			t.Fatal("the idle state was not retired")
		}
		c := call(ops.GetContact, "")
		tk, _, err := old.Admit(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		cur := For(host, "key0")
		if tk.s == old || tk.s != cur {
			t.Fatal("the call through the old state was not admitted by the key's state in the map")
		}
		if cur.slowStart.learned || tokensOf(cur, Key) == oldTokens {
			t.Errorf("the new state did not start over: learned %v, key tokens %v (old %v)", cur.slowStart.learned, tokensOf(cur, Key), oldTokens)
		}
		if why := held(old, call(ops.GetMe, "")); why != "" {
			t.Errorf("the old state holds calls: %s", why)
		}
		if why := held(cur, call(ops.GetMe, "")); why != ReasonInFlight {
			t.Errorf("a second call on the new state is held by %q, want the slow start's %q", why, ReasonInFlight)
		}
		tk.Finish(answer(policy, `"key";r=100;t=58`))
		if got := tokensOf(cur, Key); got != 100 {
			t.Errorf("key tokens %v after the server said 100", got)
		}
		if snap := old.Snapshot(); snap.InFlight != 0 {
			t.Errorf("the old state's snapshot: %d in flight", snap.InFlight)
		}
		admitNow(t, old, call(ops.GetMe, "")).Finish(answer("", ""))

		// The lockout and the exhausted quota end; the states then leave too.
		time.Sleep(2*time.Hour + IdleTTL)
		For("trigger.idle.test", "k")
		if n := statesOn(host); n != 0 {
			t.Errorf("%d states of the host after the blocks ended and everything idled", n)
		}
		if _, _, err := exhausted.Admit(context.Background(), call(ops.DeleteContact, "")); err != nil {
			t.Errorf("a delete through the retired exhausted state: %v", err)
		}
	})
}

// TestBusyStateStays: a state with a call in flight stays in the map however
// long the call lasts.
func TestBusyStateStays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const host = "busy.idle.test"
		s := For(host, "k")
		learn(t, s)
		tk := admitNow(t, s, call(ops.GetContact, ""))
		time.Sleep(2 * IdleTTL)
		For("trigger.idle.test", "k")
		if statesOn(host) != 1 || s.retired.Load() {
			t.Fatal("a state with a call in flight left the map")
		}
		tk.Finish(answer("", ""))
		time.Sleep(IdleTTL + sweepEvery)
		For("trigger.idle.test", "k")
		if statesOn(host) != 0 {
			t.Fatal("the state stayed after the call ended and it idled")
		}
	})
}

// tokensOf is what s's model holds of level name.
func tokensOf(s *State, name string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.levels[name].tokens
}

// TestARetiredStatesSuccessorSharesItsStore: a state that shared its budget
// through a store and retired when idle is followed by one that shares
// through the same store, its levels pooled and this process taking all of
// them, as UseStore leaves a state.
func TestARetiredStatesSuccessorSharesItsStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old, st := retiredWithStore(t, "successor.idle.test")
		cur := old.live()
		if cur == old || cur.shared != budgetstore.Store(st) || cur.sharedKey != "k" {
			t.Fatalf("the successor's store: %v under %q", cur.shared, cur.sharedKey)
		}
		if cur.outagePart != 1 {
			t.Errorf("the successor takes %v of the pooled levels, want all (1)", cur.outagePart)
		}
		for _, l := range cur.levels {
			if !l.pooled {
				t.Errorf("the successor's level %s is not pooled", l.name)
			}
		}
	})
}

// TestARetiredStatesStoreOutlivesAPlainSuccessor: after the state of a
// client with a store retired, a client of the same key and host made
// without one makes the successor; the first client's calls go to that
// successor, which then shares through the first client's store.
func TestARetiredStatesStoreOutlivesAPlainSuccessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const host = "plain-successor.idle.test"
		old, st := retiredWithStore(t, host)
		plain := For(host, "k") // a client made without a store
		if cur := old.live(); cur != plain || cur.shared != budgetstore.Store(st) {
			t.Errorf("the first client's calls go to %p (the plain successor %p) with the store %v", cur, plain, cur.shared)
		}
	})
}

// retiredWithStore is the state of key "k" on host, given a store (a
// client made with WithSharedBudget), idle until a sweep retired it.
func retiredWithStore(t *testing.T, host string) (*State, *downStore) {
	t.Helper()
	st := &downStore{}
	old := For(host, "k")
	old.UseStore(st, "k", nil)
	learn(t, old)
	time.Sleep(IdleTTL + sweepEvery)
	For("trigger.idle.test", "k") // sweeps
	if !old.retired.Load() {
		t.Fatal("the idle state was not retired")
	}
	return old, st
}
