package redisbudget

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/sandbox"
	"github.com/redis/go-redis/v9"
)

// shiftScript moves every time the scripts stored by ARGV[1] ms: what a
// failover to a primary whose clock is ARGV[1] ms behind the old one's
// looks like to the scripts (ahead, for a negative shift). Durations and
// amounts stay.
var shiftScript = redis.NewScript(`
local d = tonumber(ARGV[1])
for _, k in ipairs(KEYS) do
  local kind = redis.call('TYPE', k)['ok']
  if kind == 'zset' then
    local m = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
    for i = 1, #m, 2 do redis.call('ZADD', k, tonumber(m[i + 1]) + d, m[i]) end
  elseif kind == 'hash' then
    local fields = {}
    if k:find(':lv:') then fields = {'a'}
    elseif k:sub(-6) == ':state' then fields = {'pa', 'lc', 'lcut', 'paused'}
    elseif k:sub(-7) == ':blocks' or k:sub(-6) == ':procs' then fields = redis.call('HKEYS', k) end
    for _, f in ipairs(fields) do
      local v = tonumber(redis.call('HGET', k, f))
      if v then redis.call('HSET', k, f, v + d) end
    end
  end
end
return 1
`)

// failover makes it look to the scripts as if Redis had failed over to a
// primary whose clock is behind the old one's by skew (ahead, when skew is
// negative).
func failover(t *testing.T, rdb *redis.Client, skew time.Duration) {
	t.Helper()
	ctx := context.Background()
	ks, err := rdb.Keys(ctx, DefaultPrefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := shiftScript.Run(ctx, rdb, ks, skew.Milliseconds()).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestFailoverToAClockBehind: after a failover to a primary whose clock is
// a minute behind, an empty level refills at its rate from then on; it is
// not frozen until the new clock reaches the old one's times.
func TestFailoverToAClockBehind(t *testing.T) {
	t.Parallel()
	b, rdb, k, _ := storeOnRedis(t)
	ctx := context.Background()
	if g, err := b.Acquire(ctx, k, acquire("all", time.Minute, key(600))); err != nil || !g.Admitted {
		t.Fatalf("%+v %v", g, err)
	}
	if err := b.Release(ctx, k, budgetstore.Release{Lease: "all", RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
		t.Fatal(err)
	}
	failover(t, rdb, time.Minute)
	g, err := b.Acquire(ctx, k, acquire("next", time.Minute, key(5)))
	if err != nil || g.Admitted || g.Wait > 1100*time.Millisecond {
		t.Fatalf("on an empty level: %+v %v", g, err)
	}
	time.Sleep(g.Wait + 50*time.Millisecond)
	if g, err := b.Acquire(ctx, k, acquire("next", time.Minute, key(5))); err != nil || !g.Admitted {
		t.Errorf("%v after it was told to wait %v: %+v %v", g.Wait+50*time.Millisecond, g.Wait, g, err)
	}
}

// TestFailoverToAClockAhead: in the middle of twelve 3 s calls, Redis
// fails over to a primary whose clock is 28 s ahead, so the 30 s leases of
// the calls in flight look nearly run out. The client renews them in time:
// never more than the parallel quota in flight, no refusal.
func TestFailoverToAClockAhead(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	rdb := rs.Client(t)
	var latency atomic.Int64
	srv := slowSandbox(&latency)
	c := sandboxClient(t, srv, New(rdb))
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	latency.Store(int64(3 * time.Second))
	done := make(chan []error)
	go func() { done <- calls(c, 12, 20*time.Second) }()
	time.Sleep(time.Second)
	failover(t, rdb, -28*time.Second)
	if err := firstError(<-done); err != nil {
		t.Error(err)
	}
	st := srv.Stats(sandbox.TestKey)
	t.Logf("max in flight %d, refusals %v", st.MaxInFlight, st.Refusals)
	if st.MaxInFlight > 6 || len(st.Refusals) > 0 {
		t.Errorf("max in flight %d, refusals %v", st.MaxInFlight, st.Refusals)
	}
}
