package redisbudget

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestClientFallsBackAndRejoins stops Redis in the middle of a run: the
// calls go on with the process's own budget, none hangs, the outage is
// logged once, and the client uses Redis again once it is back.
func TestClientFallsBackAndRejoins(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	rdb := rs.Client(t)
	api := httptest.NewServer(sandbox.New())
	defer api.Close()
	var logs syncBuffer
	c, err := bodo.NewClient(bodo.WithAPIKey(sandbox.TestKey), bodo.WithBaseURL(api.URL),
		bodo.WithSharedBudget(New(rdb)), bodo.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var calls, failed, duringOutage atomic.Int64
	var slowest atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for time.Since(start) < 4500*time.Millisecond {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				t0 := time.Now()
				_, err := c.Me(ctx)
				cancel()
				d := time.Since(t0)
				for {
					old := slowest.Load()
					if int64(d) <= old || slowest.CompareAndSwap(old, int64(d)) {
						break
					}
				}
				calls.Add(1)
				if err != nil {
					failed.Add(1)
				}
				if el := time.Since(start); el > 1200*time.Millisecond && el < 1800*time.Millisecond {
					duringOutage.Add(1)
				}
				time.Sleep(250 * time.Millisecond)
			}
		})
	}
	time.Sleep(time.Second)
	rs.Stop()
	time.Sleep(time.Second)
	rs.Start(t)
	wg.Wait()

	if failed.Load() != 0 {
		t.Errorf("%d of %d calls failed", failed.Load(), calls.Load())
	}
	if d := time.Duration(slowest.Load()); d > time.Second {
		t.Errorf("a call took %v", d)
	}
	if duringOutage.Load() == 0 {
		t.Error("no call went through while Redis was down")
	}
	out := logs.String()
	if n := strings.Count(out, "shared budget unreachable"); n != 1 {
		t.Errorf("the outage was logged %d times:\n%s", n, out)
	}
	if !strings.Contains(out, "shared budget reachable again") {
		t.Errorf("no rejoin logged:\n%s", out)
	}
	if n, err := rdb.Exists(context.Background(), DefaultPrefix+"{"+strings.TrimPrefix(api.URL, "http://")).Result(); err != nil {
		t.Errorf("after the restart: %v %d", err, n)
	}
	keys, err := rdb.Keys(context.Background(), DefaultPrefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Errorf("the client did not use Redis again after the restart: %v %v", keys, err)
	}
}
