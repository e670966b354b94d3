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
