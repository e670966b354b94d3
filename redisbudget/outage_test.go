package redisbudget

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/budget"
	"github.com/bodo-app/bodo-go/internal/ops"
	"github.com/bodo-app/bodo-go/internal/sandbox"
	"github.com/redis/go-redis/v9"
)

// slowSandbox is a sandbox whose answers take what *latency says (read per
// request), so a test can warm a client up fast and then hold calls.
func slowSandbox(latency *atomic.Int64, opts ...sandbox.Option) *sandbox.Server {
	return sandbox.New(append(opts, sandbox.WithFaults(func(*http.Request) sandbox.Fault {
		return sandbox.Fault{Delay: time.Duration(latency.Load())}
	}))...)
}

// calls makes n calls of c at once and returns their errors.
func calls(c *bodo.Client, n int, timeout time.Duration) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			_, errs[i] = c.Me(ctx)
		})
	}
	wg.Wait()
	return errs
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// proxied is a client of a sandbox whose answers take what latency says,
// sharing its budget through a private Redis reached through a proxy,
// after one call that taught it the server's policies.
type proxied struct {
	rs      *redisServer
	px      *netProxy
	rdb     *redis.Client // straight to Redis
	latency atomic.Int64
	c       *bodo.Client
}

func newProxied(t *testing.T) *proxied {
	t.Helper()
	p := &proxied{rs: startRedis(t)}
	p.px = startProxy(t, p.rs.Addr)
	p.rdb = p.rs.Client(t)
	p.c = sandboxClient(t, slowSandbox(&p.latency), New(clientAt(t, p.px.Addr)))
	if _, err := p.c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFailedReleasesAreSentLater: Redis is unreachable for 1.5 s while 6
// calls are in flight, so their releases fail. They are kept and sent once
// Redis is back: the leases leave Redis at once, not when they expire, and
// the next call on the idle key is not held.
func TestFailedReleasesAreSentLater(t *testing.T) {
	t.Parallel()
	p := newProxied(t)
	px, rdb, latency, c := p.px, p.rdb, &p.latency, p.c
	latency.Store(int64(600 * time.Millisecond))
	done := make(chan []error)
	go func() { done <- calls(c, 6, 10*time.Second) }()
	if _, ok := waitFor(2*time.Second, func() bool { return leasesIn(t, rdb) == 6 }); !ok {
		t.Fatalf("%d leases in Redis, want 6", leasesIn(t, rdb))
	}
	px.Cut(true)
	if err := firstError(<-done); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500*time.Millisecond - 600*time.Millisecond)
	px.Cut(false)
	latency.Store(0)

	took, ok := waitFor(5*time.Second, func() bool { return leasesIn(t, rdb) == 0 })
	t.Logf("the leases left Redis %v after it was back", took)
	if !ok {
		t.Errorf("%d leases still in Redis %v after the outage", leasesIn(t, rdb), took)
	}
	time.Sleep(2500 * time.Millisecond) // the client uses Redis again by now in any case
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Me(ctx); err != nil || time.Since(start) > time.Second {
		t.Errorf("the next call took %v: %v", time.Since(start), err)
	}
}

// TestLongCallsKeepTheirLeases: calls three times longer than the lease
// time keep their slots: twelve calls at once never have more than the
// parallel quota at the server, and none is refused.
func TestLongCallsKeepTheirLeases(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	var latency atomic.Int64
	srv := slowSandbox(&latency)
	c := sandboxClient(t, srv, New(rs.Client(t), WithLeaseTTL(time.Second)))
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	latency.Store(int64(3 * time.Second))
	errs := calls(c, 12, 20*time.Second)
	st := srv.Stats(sandbox.TestKey)
	t.Logf("max in flight %d, refusals %v", st.MaxInFlight, st.Refusals)
	if err := firstError(errs); err != nil {
		t.Error(err)
	}
	if st.MaxInFlight > 6 || len(st.Refusals) > 0 {
		t.Errorf("max in flight %d, refusals %v: leases of running calls expired", st.MaxInFlight, st.Refusals)
	}
}

// TestLostAcquireReplyLeavesNoLease: an Acquire whose reply comes after
// the client's timeout ran in Redis all the same. The client, which fell
// back to its own budget, takes that lease back once Redis answers again,
// instead of leaving it for its 30 s.
func TestLostAcquireReplyLeavesNoLease(t *testing.T) {
	rs := startRedis(t)
	px := startProxy(t, rs.Addr)
	rdb := rs.Client(t)
	c := sandboxClient(t, sandbox.New(), New(clientAt(t, px.Addr)))
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	px.Delay(func() time.Duration { return 400 * time.Millisecond })
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The keeper sends the release as soon as the Acquire fails; still
	// delayed, it reaches Redis after the Acquire, which shows here first.
	if _, ok := waitFor(time.Second, func() bool { return leasesIn(t, rdb) == 1 }); !ok {
		t.Fatalf("%d leases: the Acquire did not run in Redis", leasesIn(t, rdb))
	}
	px.Delay(nil)
	took, ok := waitFor(5*time.Second, func() bool { return leasesIn(t, rdb) == 0 })
	t.Logf("the orphaned lease left Redis after %v", took)
	if !ok {
		t.Errorf("a lease whose Acquire reply was lost is still in Redis after %v", took)
	}
}

// TestPanickingStoreDoesNotWedgeTheKey: a budgetstore.Store whose Acquire
// panics for a call that waits for a slot fails that call with an error;
// the calls after it go as soon as slots are free.
func TestPanickingStoreDoesNotWedgeTheKey(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	var latency atomic.Int64
	srv := slowSandbox(&latency)
	var panicNext atomic.Bool
	store := &faultyBudget{real: New(rs.Client(t)), pick: func(method string) Fault {
		if method == "acquire" && panicNext.CompareAndSwap(true, false) {
			return faultPanic
		}
		return faultNone
	}}
	c := sandboxClient(t, srv, store)
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	latency.Store(int64(time.Second))
	held := make(chan []error)
	go func() { held <- calls(c, 6, 10*time.Second) }()
	time.Sleep(200 * time.Millisecond)

	// A seventh call waits for a slot; its next Acquire panics.
	seventh := make(chan error)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				seventh <- errors.New("the call panicked")
			}
		}()
		time.Sleep(50 * time.Millisecond)
		panicNext.Store(true)
		_, err := c.Me(context.Background())
		seventh <- err
	}()
	err := <-seventh
	t.Logf("the call whose Acquire panicked: %v", err)
	var apiErr *bodo.Error
	if !errors.As(err, &apiErr) || !apiErr.Local || !strings.Contains(err.Error(), "panic") {
		t.Errorf("the call whose Acquire panicked: %v", err)
	}
	if err := firstError(<-held); err != nil {
		t.Fatal(err)
	}
	latency.Store(0)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Me(ctx); err != nil || time.Since(start) > time.Second {
		t.Errorf("the next call took %v: %v", time.Since(start), err)
	}
}

// panickyHandler is a slog.Handler that panics on warnings.
type panickyHandler struct{}

func (panickyHandler) Enabled(context.Context, slog.Level) bool { return true }
func (panickyHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		panic("panickyHandler: " + r.Message)
	}
	return nil
}
func (h panickyHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h panickyHandler) WithGroup(string) slog.Handler      { return h }

// TestPanickingLogHandlerDoesNotWedgeTheKey: the budget logs that Redis is
// unreachable to a handler that panics. The call gets an error, and the
// calls after it go.
func TestPanickingLogHandlerDoesNotWedgeTheKey(t *testing.T) {
	rs := startRedis(t)
	px := startProxy(t, rs.Addr)
	c := sandboxClient(t, sandbox.New(), New(clientAt(t, px.Addr)), bodo.WithLogger(slog.New(panickyHandler{})))
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	px.Cut(true)
	first := make(chan error)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				first <- errors.New("the call panicked")
			}
		}()
		_, err := c.Me(context.Background())
		first <- err
	}()
	err := <-first
	t.Logf("the call that logged the outage: %v", err)
	var apiErr *bodo.Error
	if !errors.As(err, &apiErr) || !apiErr.Local || !strings.Contains(err.Error(), "logger panicked") {
		t.Errorf("the call that logged the outage: %v", err)
	}
	px.Cut(false)
	start := time.Now()
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := c.Me(ctx)
		cancel()
		if err != nil {
			t.Fatalf("call %d after it: %v (%v)", i, err, time.Since(start))
		}
	}
}

// TestARedisThatHangsHoldsNoCallPastTheStoresDeadline: a Redis that stops
// answering (stopped, as a network that drops packets would leave it)
// through a client made as the README shows, whose reads wait 5 s and
// heed no context: a call still waits on it no longer than the store's
// deadline (500 ms) and then goes on the process's share.
func TestARedisThatHangsHoldsNoCallPastTheStoresDeadline(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { rdb.Close() })
	s := budget.New()
	s.UseStore(New(rdb), testKey(), nil)
	ctx := context.Background()
	admitAnswered(ctx, t, s, ops.GetMe, "")
	if err := rs.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.cmd.Process.Signal(syscall.SIGCONT) })
	if d := admitAnswered(ctx, t, s, ops.GetMe, ""); d > 2*time.Second {
		t.Errorf("the call waited %v on a Redis that does not answer", d)
	}
}

// admitAnswered admits a call of op on s and finishes it with a 200 whose
// RateLimit is limit ("" for none); it returns how long the call waited.
func admitAnswered(ctx context.Context, t *testing.T, s *budget.State, op *ops.Operation, limit string) time.Duration {
	t.Helper()
	start := time.Now()
	tk, _, err := s.Admit(ctx, callOf(op))
	if err != nil {
		t.Fatalf("%s: %v", op.ID, err)
	}
	h := http.Header{}
	if limit != "" {
		h.Set("RateLimit", limit)
	}
	tk.Finish(budget.Answer{Status: http.StatusOK, Header: h})
	return time.Since(start)
}

// TestAStoreBackEmptyStartsFromWhatTheProcessBelieves: a Redis that comes
// back without the key's counts (restarted, flushed) does not take every
// level for full, nor its empty log for a window in which nothing was
// taken: it starts a level from what the asking process's model holds. A
// create after the server said the key is drained waits for the key's
// refill (5 points, 1 s), as it would have before the restart.
func TestAStoreBackEmptyStartsFromWhatTheProcessBelieves(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	rdb := rs.Client(t)
	s := budget.New()
	s.UseStore(New(rdb), testKey(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const drained = `"key";r=0;t=120`
	admitAnswered(ctx, t, s, ops.GetMe, drained)
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if waited := admitAnswered(ctx, t, s, ops.CreateContact, drained); waited < 700*time.Millisecond {
		t.Errorf("a create on a drained key went %v after the store came back empty, want about 1 s (the key's refill of 5 points)", waited)
	}
}

// TestTakesWhileRedisWasAwayCountOnceInARedisBackEmpty: what a process
// took on its own while Redis was away is in its model, and a Redis that
// came back empty begins its count from that model: the takes the process
// then sends it (refunds of negative amounts) are not taken a second time.
func TestTakesWhileRedisWasAwayCountOnceInARedisBackEmpty(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	s := budget.New()
	s.UseStore(New(rs.Client(t)), testKey(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admitAnswered(ctx, t, s, ops.GetMe, `"key";r=30;t=114`)
	rs.Stop()
	for range 20 {
		admitAnswered(ctx, t, s, ops.GetContact, "")
	}
	rs.Start(t)
	time.Sleep(time.Second) // the keeper finds Redis back and sends the takes
	if waited := admitAnswered(ctx, t, s, ops.CreateContact, ""); waited > 500*time.Millisecond {
		t.Errorf("a create waited %v; want it at once: about 10 of the 30 points plus the refill are left, unless the 20 taken while Redis was away counted twice", waited)
	}
}
