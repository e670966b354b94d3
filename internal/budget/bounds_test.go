package budget

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/ops"
)

// TestFallsKeptAreBounded: a level keeps at most maxDrops of the falls the
// others took, however many come within a window, and the largest stays.
func TestFallsKeptAreBounded(t *testing.T) {
	var d drops
	start := time.Now()
	for i := range 10 * maxDrops {
		at := start.Add(time.Duration(i) * time.Millisecond)
		d.add(float64(1000-i), at, at.Add(-time.Minute))
	}
	if len(d) > maxDrops {
		t.Errorf("%d falls kept, want at most %d", len(d), maxDrops)
	}
	if got := d.max(start.Add(-time.Second)); got != 1000 {
		t.Errorf("the largest fall kept is %v, want 1000", got)
	}
}

// TestATakeLogKeepsOnlyWhatIsInItsWindow: a log whose oldest takes leave
// as new ones come, never all at once, holds about what its window does,
// not every take it ever had.
func TestATakeLogKeepsOnlyWhatIsInItsWindow(t *testing.T) {
	var g takeLog
	start := time.Now()
	for i := range 100_000 {
		at := start.Add(time.Duration(i) * time.Second)
		g.add(at, at, 1, 10*time.Second)
		g.prune(at.Add(-10 * time.Second))
	}
	if live := len(g.entries) - g.head; live != 10 {
		t.Fatalf("%d takes in a window of 10, want 10", live)
	}
	if n := len(g.entries); n > 200 {
		t.Errorf("the log holds %d entries for 10 takes in its window", n)
	}
}

// TestATakeLogHoldsAtMostMaxLogEntries: a level whose window is a day (the
// longest a header's w counts for) and whose server keeps its bucket full
// logs a call every 100 ms in at most maxLogEntries entries, joined takes
// freeing no sooner than the later one.
func TestATakeLogHoldsAtMostMaxLogEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		const policy, limit = `"key";q=300;w=999999999999999`, `"key";r=600;t=1`
		for range 100_000 {
			admitNow(t, s, call(ops.GetMe, "")).Finish(answer(policy, limit))
			time.Sleep(100 * time.Millisecond)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		l := s.levels[Key]
		if l.window != maxHold {
			t.Errorf("a window of w=999999999999999 is %v, want %v", l.window, maxHold)
		}
		grains := int(10_000 * time.Second / (maxHold / maxLogEntries)) // of 10,000 s of calls
		if live := len(l.log.entries) - l.log.head; live > maxLogEntries+1 || live < grains || l.log.sum != 100_000 {
			t.Errorf("the log holds %d entries (%v points) for 100,000 one-point calls in %d grains", live, l.log.sum, grains)
		}
		last := l.log.entries[len(l.log.entries)-1]
		if !last.at.Equal(time.Now().Add(-100 * time.Millisecond)) {
			t.Errorf("the last entry is answered at %v, want the last call's answer", last.at)
		}
	})
}

// blockingStore is a downStore whose first Release waits until its
// release is closed, telling sending when it began.
type blockingStore struct {
	downStore
	sending, release chan struct{}
	once             bool
}

func (b *blockingStore) Release(ctx context.Context, key string, r budgetstore.Release) error {
	b.mu.Lock()
	first := !b.once
	b.once = true
	b.mu.Unlock()
	if first {
		close(b.sending)
		<-b.release
	}
	return b.downStore.Release(ctx, key, r)
}

// TestWhatTheStoreMissedIsBounded: while the store is down, at most
// maxPending of the releases and refunds it missed are kept, the newest,
// also when more come while the keeper sends the ones before (to a store
// no longer in use, which it does not renew).
func TestWhatTheStoreMissedIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &blockingStore{downStore: downStore{down: true, refunded: map[string]float64{}},
			sending: make(chan struct{}), release: make(chan struct{})}
		s := New()
		s.UseStore(st, "k", nil)
		keep := func(n int, at time.Time) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for range n {
				s.keepLocked(pendingOp{leaseRef: leaseRef{st: st, seq: s.storeSeq - 1, key: "k"}, at: at})
			}
		}
		pending := func() (n int, newest time.Time) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, op := range s.pending {
				newest = later(newest, op.at)
			}
			return len(s.pending), newest
		}
		keep(2*maxPending, time.Now())
		if n, _ := pending(); n != maxPending {
			t.Errorf("%d kept of %d missed, want %d", n, 2*maxPending, maxPending)
		}
		<-st.sending // the keeper has taken them out and sends the first
		time.Sleep(time.Millisecond)
		during := time.Now()
		keep(maxPending/2, during)
		close(st.release)
		synctest.Wait()
		if n, newest := pending(); n != maxPending || !newest.Equal(during) {
			t.Errorf("after a failed send with %d more missed meanwhile: %d kept, the newest from %v, want %d from %v",
				maxPending/2, n, newest, maxPending, during)
		}
		time.Sleep(pendingTTL + time.Minute) // the keeper gives up on them, and ends
	})
}

// TestEvidenceIsKeptOfAtMostMaxKinds: a learned policy keeps what answers
// showed of at most maxKinds kinds of call, however many kinds of call
// the key makes.
func TestEvidenceIsKeptOfAtMostMaxKinds(t *testing.T) {
	l := &level{quota: 100, share: 1}
	for i := range 4 * maxKinds {
		l.witness(fmt.Sprint("kind ", i), 1, 50, 0, time.Now())
	}
	if len(l.scope.evidence) != maxKinds {
		t.Errorf("evidence of %d kinds, want %d", len(l.scope.evidence), maxKinds)
	}
}

// TestAFullKeyDropsIdlePoliciesToLearnANewOne: a key that learned
// MaxLearnedPolicies policies, none used or named for LevelIdleTTL since
// (every call sent counts as a use: a policy not yet tied may bind it),
// drops them when an answer names a new one, although the last sweep for
// idle levels (levelSweepEvery) came before they were idle.
func TestAFullKeyDropsIdlePoliciesToLearnANewOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		var many []string
		for i := range MaxLearnedPolicies {
			many = append(many, fmt.Sprintf(`"p%d";q=100;w=60`, i))
		}
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer(strings.Join(many, ", "), ""))
		late, sweep := admitNow(t, s, call(ops.GetMe, "")), admitNow(t, s, call(ops.GetMe, ""))
		time.Sleep(LevelIdleTTL - 30*time.Second)
		sweep.Finish(answer("", "")) // none is idle yet
		time.Sleep(40 * time.Second)
		late.Finish(answer(`"new";q=5;w=60`, ""))
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.levels["new"] == nil {
			t.Errorf("a new policy is not learned with %d idle ones at the cap", s.bounds.policies)
		}
	})
}

// TestAFirstWaiterWakesAtMostMaxSizesBehindIt: waiters of many sizes
// behind the first of a level are woken to try to pass it at most
// maxSizes at a time, so that one answer costs a bounded number of looks.
func TestAFirstWaiterWakesAtMostMaxSizesBehindIt(t *testing.T) {
	g := &gate{level: &level{}}
	var ws []*waiter
	for i := range 4 * maxSizes {
		w := &waiter{seq: uint64(i + 1), need: float64(i + 1), wake: make(chan struct{}, 1)}
		w.enter(g)
		ws = append(ws, w)
	}
	<-ws[0].wake // the first looks again as the second comes
	g.wakeBehind()
	woken := 0
	for _, w := range ws {
		woken += len(w.wake)
	}
	if woken != maxSizes {
		t.Errorf("%d of the %d sizes behind the first woken, want %d", woken, len(ws)-1, maxSizes)
	}
}

// TestAFullMeterReadsTheRateOffWhatItHolds: a meter holds the latest
// len(at) events; when more came within its window, their rate is that of
// the ones it holds, not of the ones it holds spread over the window.
func TestAFullMeterReadsTheRateOffWhatItHolds(t *testing.T) {
	var m meter
	start := time.Now()
	for i := range 1000 {
		m.add(start.Add(time.Duration(i) * 10 * time.Millisecond)) // 100 a second
	}
	if r := m.rate(start.Add(10 * time.Second)); r < 95 || r > 105 {
		t.Errorf("%d events in 10 s read as %.1f a second, want 100", 1000, r)
	}
}

// TestAHeadersSecondsCountForAtMostMaxHold: a w and a t of thirty million
// years hold the next write for maxHold, the longest wait the budget
// takes from one answer, and then it goes to ask again.
func TestAHeadersSecondsCountForAtMostMaxHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer(`"write";q=1;w=999999999999999`, `"write";r=0;t=999999999999999`))
		tk, waited := admitAt(t, s, call(ops.CreateContact, ""))
		tk.Finish(answer("", ""))
		if waited != maxHold {
			t.Errorf("the write waited %v, want %v", waited, maxHold)
		}
	})
}
