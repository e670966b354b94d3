package redisbudget

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/sandbox"
	"github.com/redis/go-redis/v9"
)

// clientAt is a Redis client for addr with the short timeouts the tests
// use, and no retries: a failure shows at once.
func clientAt(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

var hostSeq atomic.Int64

// sandboxClient is a client of srv (in-process, no sockets) on a host of
// its own, so that no other test shares its budget, with the given store.
func sandboxClient(t *testing.T, srv *sandbox.Server, store budgetstore.Store, opts ...bodo.Option) *bodo.Client {
	t.Helper()
	return sandboxClientAt(t, srv, newHost(), store, opts...)
}

func newHost() string { return fmt.Sprintf("t%d.bodo.test", hostSeq.Add(1)) }

// sandboxClientAt is a client of srv on host.
func sandboxClientAt(t *testing.T, srv *sandbox.Server, host string, store budgetstore.Store, opts ...bodo.Option) *bodo.Client {
	t.Helper()
	all := []bodo.Option{bodo.WithAPIKey(sandbox.TestKey), bodo.WithBaseURL("https://" + host),
		bodo.WithHTTPClient(&http.Client{Transport: srv.Transport()})}
	if store != nil {
		all = append(all, bodo.WithSharedBudget(store))
	}
	c, err := bodo.NewClient(append(all, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// leasesIn is the number of leases in flight in Redis over all keys: those
// whose time has not run out by Redis's clock. An expired lease holds no
// slot (the next Acquire drops it) but stays in the set until then.
func leasesIn(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	ctx := context.Background()
	ks, err := rdb.Keys(ctx, DefaultPrefix+"*:leases").Result()
	if err != nil {
		t.Fatal(err)
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, k := range ks {
		n += rdb.ZCount(ctx, k, fmt.Sprintf("(%d", now.UnixMilli()), "+inf").Val()
	}
	return n
}

// waitFor polls cond every 20 ms until it holds or d passes; it reports
// how long that took and whether it held.
func waitFor(d time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if cond() {
			return time.Since(start), true
		}
		if time.Since(start) > d {
			return time.Since(start), false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Fault is what faultyBudget does to one request.
type Fault int

const (
	faultNone      Fault = iota
	faultError           // fails without reaching Redis
	faultDelay           // reaches Redis late
	faultLostReply       // reaches Redis, but the caller sees a timeout
	faultPanic           // panics before reaching Redis
	faultPanicLate       // panics after Redis ran the request
)

// faultyBudget wraps the real Redis budget and does to each request what
// pick says: the failures a store, its network and its code can have.
type faultyBudget struct {
	real  budgetstore.Store
	pick  func(method string) Fault
	delay time.Duration
	count [faultPanicLate + 1]atomic.Int64
}

var errLostReply = errors.New("faulty: the reply was lost: i/o timeout")

func (f *faultyBudget) do(method string, call func() error) error {
	fault := f.pick(method)
	f.count[fault].Add(1)
	switch fault {
	case faultError:
		return errors.New("faulty: connection refused")
	case faultPanic:
		panic("faulty: " + method + " panicked")
	case faultDelay:
		time.Sleep(f.delay)
	}
	err := call()
	switch fault {
	case faultLostReply:
		return errLostReply
	case faultPanicLate:
		panic("faulty: " + method + " panicked after Redis ran it")
	}
	return err
}

func (f *faultyBudget) Acquire(ctx context.Context, key string, req budgetstore.Acquire) (g budgetstore.Grant, err error) {
	err = f.do("acquire", func() error {
		g, err = f.real.Acquire(ctx, key, req)
		return err
	})
	if err != nil {
		return budgetstore.Grant{}, err
	}
	return g, nil
}

func (f *faultyBudget) Release(ctx context.Context, key string, rel budgetstore.Release) error {
	return f.do("release", func() error { return f.real.Release(ctx, key, rel) })
}

func (f *faultyBudget) Renew(ctx context.Context, key string, req budgetstore.Renew) (m budgetstore.Members, err error) {
	err = f.do("renew", func() error {
		m, err = f.real.Renew(ctx, key, req)
		return err
	})
	return m, err
}

func (f *faultyBudget) Refund(ctx context.Context, key string, levels []budgetstore.Level) error {
	return f.do("refund", func() error { return f.real.Refund(ctx, key, levels) })
}

// faultWhile picks f for every request while on is set, and none else.
func faultWhile(on *atomic.Bool, f Fault) func(string) Fault {
	return func(string) Fault {
		if on.Load() {
			return f
		}
		return faultNone
	}
}

// randomFaults picks a fault for each request with the given odds of each,
// from a seeded source.
func randomFaults(seed uint64, odds map[Fault]float64) func(string) Fault {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 11))
	return func(string) Fault {
		mu.Lock()
		x := rng.Float64()
		mu.Unlock()
		for f := faultError; f <= faultPanicLate; f++ {
			if x < odds[f] {
				return f
			}
			x -= odds[f]
		}
		return faultNone
	}
}
