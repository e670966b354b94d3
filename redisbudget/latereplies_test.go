package redisbudget

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go/internal/budget"
	"github.com/bodo-app/bodo-go/internal/ops"
	"github.com/redis/go-redis/v9"
)

// TestProcessesThatLoseTheStoreOneByOneKeepToTheParallelQuota is four
// processes of 8 agents sharing a key through Redis whose replies come
// late, a tenth of them past the clients' timeout (the chaos test's
// delay): each process loses the store now and then while the others
// still reach it, and goes on its share of the slots meanwhile. The
// others must leave that share to it: never more calls in flight than the
// parallel quota (6) over all of them.
func TestProcessesThatLoseTheStoreOneByOneKeepToTheParallelQuota(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	px := startProxy(t, rs.Addr)
	ok := budget.Answer{Status: http.StatusOK, Header: http.Header{}}
	var inflight, most, calls atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 4 {
		s := budget.New()
		rdb := redis.NewClient(&redis.Options{Addr: px.Addr, DialTimeout: 200 * time.Millisecond,
			ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: -1})
		defer rdb.Close()
		s.UseStore(New(rdb), "late", nil)
		for range 8 {
			wg.Go(func() {
				for time.Since(start) < 10*time.Second {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					tk, _, err := s.Admit(ctx, callOf(ops.GetMe))
					cancel()
					if err != nil {
						continue
					}
					n := inflight.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(200 * time.Millisecond)
					inflight.Add(-1)
					calls.Add(1)
					tk.Finish(ok)
				}
			})
		}
	}
	time.Sleep(time.Second)
	px.Delay(lateReplies(1))
	wg.Wait()
	t.Logf("%d calls of 200 ms in %v, at most %d in flight", calls.Load(), time.Since(start).Round(time.Millisecond), most.Load())
	if most.Load() > 6 {
		t.Errorf("%d calls in flight at once, the parallel quota is 6", most.Load())
	}
}

// TestAProcessBackFromItsShareCountsItsOwnCallsStillInFlight: process a
// loses Redis alone (its requests arrive, its replies are lost), admits its
// share (3 of 6) on its own, and those calls are still running when Redis
// answers it again. b, which still reached Redis, was left 3 slots by a's
// reservation. Once a's share has ended, a asks Redis again: Redis counts
// a's calls without a lease for a too, so that a and b together never have
// more than the parallel quota in flight.
func TestAProcessBackFromItsShareCountsItsOwnCallsStillInFlight(t *testing.T) {
	rs := startRedis(t)
	var lost atomic.Bool
	fa := &faultyBudget{real: New(rs.Client(t)), pick: faultWhile(&lost, faultLostReply)}
	a, b := budget.New(), budget.New()
	k := testKey()
	a.UseStore(fa, k, nil)
	b.UseStore(New(rs.Client(t)), k, nil)
	ok := budget.Answer{Status: http.StatusOK, Header: http.Header{}}
	admit := func(s *budget.State, d time.Duration) *budget.Ticket {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		tk, _, err := s.Admit(ctx, callOf(ops.GetMe))
		if err != nil {
			return nil
		}
		return tk
	}
	for range 3 { // both learn that the key has two processes
		for _, s := range []*budget.State{a, b} {
			tk := admit(s, time.Second)
			if tk == nil {
				t.Fatal("warm-up call not admitted")
			}
			tk.Finish(ok)
		}
	}

	var mu sync.Mutex
	var held []*budget.Ticket
	inflight := func() int { mu.Lock(); defer mu.Unlock(); return len(held) }
	hold := func(tk *budget.Ticket) {
		if tk != nil {
			mu.Lock()
			held = append(held, tk)
			mu.Unlock()
		}
	}
	defer func() {
		for _, tk := range held {
			tk.Finish(ok)
		}
	}()

	lost.Store(true)
	for range 3 { // a's share, on its own
		hold(admit(a, 3*time.Second))
	}
	onShare := inflight()
	time.Sleep(300 * time.Millisecond) // a's keeper has told Redis of the share
	for range 6 {
		hold(admit(b, 300*time.Millisecond))
	}
	t.Logf("a on its share: %d calls; b through Redis: %d", onShare, inflight()-onShare)

	lost.Store(false)
	before := inflight()
	var wg sync.WaitGroup
	var ofA atomic.Int64
	for range 6 {
		wg.Go(func() {
			if tk := admit(a, 6*time.Second); tk != nil {
				ofA.Add(1)
				hold(tk)
			}
		})
		wg.Go(func() { hold(admit(b, 6*time.Second)) })
	}
	wg.Wait()
	t.Logf("after a came back: a got %d leases, b %d more", ofA.Load(), int64(inflight()-before)-ofA.Load())
	if n := inflight(); n > 6 {
		t.Errorf("%d calls in flight after a came back (a's %d unleased still running), the parallel quota is 6", n, onShare)
	}
}
