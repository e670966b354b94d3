package redisbudget

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/agents"
	"github.com/bodo-app/bodo-go/internal/sandbox"
	"github.com/redis/go-redis/v9"
)

// inflightIn is what Redis holds as taken by attempts in flight, by level,
// over all keys.
func inflightIn(t *testing.T, rdb *redis.Client) map[string]float64 {
	t.Helper()
	ctx := context.Background()
	ks, err := rdb.Keys(ctx, DefaultPrefix+"*:inflight").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, k := range ks {
		for name, v := range rdb.HGetAll(ctx, k).Val() {
			f, _ := strconv.ParseFloat(v, 64)
			out[name] += f
		}
	}
	return out
}

func settled(t *testing.T, rdb *redis.Client) bool {
	if leasesIn(t, rdb) != 0 {
		return false
	}
	for _, v := range inflightIn(t, rdb) {
		if v > 1e-6 || v < -1e-6 {
			return false
		}
	}
	return true
}

// TestRandomFaultsLeaveNothingHeld drives the agents' workload (reads,
// lists that reserve egress and give back what they did not return,
// writes) through a budgetstore.Store that fails at random: errors, delays past
// the client's timeout, replies lost after Redis ran the request, panics
// before and after. When the faults stop, every reservation is settled:
// the client holds nothing in flight and no waiter, and Redis holds no
// lease and nothing taken in flight, long before a lease could expire.
func TestRandomFaultsLeaveNothingHeld(t *testing.T) {
	t.Parallel() // 30 s of real time with a Redis of its own
	rs := startRedis(t)
	rdb := rs.Client(t)
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			var faulty atomic.Bool
			faulty.Store(true)
			pick := randomFaults(seed, map[Fault]float64{faultError: 0.03, faultDelay: 0.03, faultLostReply: 0.03, faultPanic: 0.03, faultPanicLate: 0.03})
			store := &faultyBudget{real: New(rdb), delay: 600 * time.Millisecond, pick: func(m string) Fault {
				if !faulty.Load() {
					return faultNone
				}
				return pick(m)
			}}
			lim := sandbox.DefaultLimits()
			lim.KeyQuota, lim.KeyCapacity, lim.WriteQuota = 6000, 6000, 6000
			srv := sandbox.New(sandbox.WithLimits(lim), sandbox.WithLatency(10*time.Millisecond))
			c := sandboxClient(t, srv, store)
			stats := agents.NewStats()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			go func() {
				// Run until every fault happened twice.
				for ctx.Err() == nil {
					time.Sleep(100 * time.Millisecond)
					all := true
					for f := faultError; f <= faultPanicLate; f++ {
						all = all && store.count[f].Load() >= 2
					}
					if all {
						cancel()
					}
				}
			}()
			agents.Run(ctx, 12, c, stats, seed)
			cancel()
			faulty.Store(false)

			var n [faultPanicLate + 1]int64
			for f := range n {
				n[f] = store.count[f].Load()
			}
			// A call cut off by the end of the run keeps its slot for its
			// linger, in the client as in Redis.
			var b bodo.Budget
			took, ok := waitFor(10*time.Second, func() bool {
				b = c.Budget()
				return settled(t, rdb) && b.InFlight == 0 && b.Waiting == 0
			})
			sum := stats.Snapshot()
			t.Logf("%d calls (%d ok); requests to the store: %d fine, %d errors, %d delayed, %d lost replies, %d panics before, %d after; all settled after %v",
				sum.Calls, sum.OK, n[faultNone], n[faultError], n[faultDelay], n[faultLostReply], n[faultPanic], n[faultPanicLate], took)
			if !ok {
				t.Errorf("after %v Redis still holds %d leases and %v in flight; the client %d in flight and %d waiting",
					took, leasesIn(t, rdb), inflightIn(t, rdb), b.InFlight, b.Waiting)
			}
			for f := faultError; f <= faultPanicLate; f++ {
				if n[f] == 0 {
					t.Errorf("fault %d never happened", f)
				}
			}
			if sum.OK == 0 {
				t.Error("no call succeeded")
			}
		})
	}
}

// TestEgressRefundsSurviveAnOutage: a list reserves its limit of egress in
// Redis and gives back what it did not return. When its answer comes while
// Redis is unreachable, the refund reaches Redis once it is back.
func TestEgressRefundsSurviveAnOutage(t *testing.T) {
	p := newProxied(t)
	px, rdb, latency, c := p.px, p.rdb, &p.latency, p.c
	ctx := context.Background()
	latency.Store(int64(400 * time.Millisecond))
	done := make(chan error)
	go func() {
		_, err := c.Contacts.List(ctx, &bodo.ListContactsParams{Limit: bodo.Int(100)})
		done <- err
	}()
	if _, ok := waitFor(time.Second, func() bool { return leasesIn(t, rdb) == 1 }); !ok {
		t.Fatal("the list was not admitted through Redis")
	}
	px.Cut(true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	px.Cut(false)
	egress := func() float64 {
		ks, _ := rdb.Keys(ctx, DefaultPrefix+"*:lv:egress").Result()
		if len(ks) != 1 {
			return -1
		}
		f, _ := strconv.ParseFloat(rdb.HGet(ctx, ks[0], "t").Val(), 64)
		return f
	}
	took, ok := waitFor(3*time.Second, func() bool { return egress() >= 10000-1e-6 && leasesIn(t, rdb) == 0 })
	t.Logf("egress in Redis %v after %v", egress(), took)
	if !ok {
		t.Errorf("egress in Redis is %v after the list returned nothing: its refund was lost", egress())
	}
}

// TestSecondClientWithAnotherStore: a second client of the same key and
// host is given another store while the first one's calls are in flight.
// Those calls end in the store that admitted them, which holds no lease
// afterwards; the new calls use the new store.
func TestSecondClientWithAnotherStore(t *testing.T) {
	rs := startRedis(t)
	rdb := rs.Client(t)
	var latency atomic.Int64
	srv := slowSandbox(&latency)
	first, second := New(rdb, WithPrefix("first:")), New(rdb, WithPrefix("second:"))
	host := newHost()
	c1 := sandboxClientAt(t, srv, host, first)
	ctx := context.Background()
	if _, err := c1.Me(ctx); err != nil {
		t.Fatal(err)
	}
	count := func(prefix string) int64 {
		ks, _ := rdb.Keys(ctx, prefix+"*:leases").Result()
		var n int64
		for _, k := range ks {
			n += rdb.ZCard(ctx, k).Val()
		}
		return n
	}
	latency.Store(int64(500 * time.Millisecond))
	done := make(chan []error)
	go func() { done <- calls(c1, 4, 5*time.Second) }()
	if _, ok := waitFor(time.Second, func() bool { return count("first:") == 4 }); !ok {
		t.Fatalf("%d leases in the first store", count("first:"))
	}
	c2 := sandboxClientAt(t, srv, host, second)
	if err := firstError(<-done); err != nil {
		t.Fatal(err)
	}
	latency.Store(0)
	if _, err := c2.Me(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count("first:"); n != 0 {
		t.Errorf("%d leases left in the first store", n)
	}
	if ks, _ := rdb.Keys(ctx, "second:*").Result(); len(ks) == 0 {
		t.Error("the second store was not used")
	}
}
