package redisbudget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/budget"
	"github.com/bodo-app/bodo-go/internal/ops"
)

// TestADamagedValueInRedisFailsNoScript: a lease whose amount, a process
// whose last look and a level whose tokens hold no number (garbage, -inf,
// nan) are read as missing: Acquire and Renew still answer, and the level
// starts again from the asking process's model rather than never
// refilling.
func TestADamagedValueInRedisFailsNoScript(t *testing.T) {
	t.Parallel()
	b, rdb, k, p := storeOnRedis(t)
	ctx := context.Background()
	if g, err := b.Acquire(ctx, k, acquire("bad", 50*time.Millisecond, key(1))); err != nil || !g.Admitted {
		t.Fatalf("%+v %v", g, err)
	}
	rdb.HSet(ctx, p+":lease:bad", "key", "garbage")
	rdb.HSet(ctx, p+":procs", "ghost", "x")
	time.Sleep(100 * time.Millisecond) // the damaged lease expires
	for i := range 3 {
		if g, err := b.Acquire(ctx, k, acquire("ok"+strconv.Itoa(i), time.Minute, key(1))); err != nil || !g.Admitted {
			t.Errorf("Acquire %d with a damaged lease and process in Redis: %+v, %v", i, g, err)
		}
	}
	if _, err := b.Renew(ctx, k, budgetstore.Renew{Process: "p", ProcessTTL: time.Minute, LeaseTTL: time.Minute}); err != nil {
		t.Errorf("Renew: %v", err)
	}
	for _, bad := range []string{"-inf", "nan", "inf", "x"} {
		rdb.HSet(ctx, p+":lv:key", "t", bad)
		g, err := b.Acquire(ctx, k, acquire("lv"+bad, time.Minute, key(1)))
		if err != nil || g.Reason == budget.Key {
			t.Errorf("a key level whose tokens read %q: %+v, %v", bad, g, err)
		}
		if g.Admitted {
			b.Release(ctx, k, budgetstore.Release{Lease: "lv" + bad, MaxInFlight: 6})
		}
	}
}

// TestADamagedCounterFailsNoScript: a sum the scripts add to (what is in
// flight of a level, what its log and its ended leases charged, the log's
// sequence) that holds no number counts as 0: Acquire, Release and Refund
// still answer, each Acquire takes what it was granted once, and what was
// in flight leaves the count when its lease ends.
func TestADamagedCounterFailsNoScript(t *testing.T) {
	t.Parallel()
	b, rdb, k, p := storeOnRedis(t)
	ctx := context.Background()
	write := budgetstore.Level{Name: "write", Amount: 1, Size: 60, Quota: 60, Window: time.Minute}
	if g, err := b.Acquire(ctx, k, acquire("a", time.Minute, key(1), write)); err != nil || !g.Admitted {
		t.Fatalf("%+v %v", g, err)
	}
	rdb.HSet(ctx, p+":inflight", "key", "garbage", "write", "nan")
	rdb.HSet(ctx, p+":lv:write", "ls", "x", "ld", "inf")
	rdb.HSet(ctx, p+":lv:key", "ld", "y")
	rdb.Set(ctx, p+":seq", "z", 0)
	leases := []string{"a"}
	for i := range 3 {
		lease := "b" + strconv.Itoa(i)
		if g, err := b.Acquire(ctx, k, acquire(lease, time.Minute, key(100), write)); err != nil || !g.Admitted {
			t.Fatalf("Acquire %d with damaged counters: %+v, %v", i, g, err)
		}
		leases = append(leases, lease)
	}
	if left, err := strconv.ParseFloat(rdb.HGet(ctx, p+":lv:key", "t").Val(), 64); err != nil || left < 299-1e-6 || left > 300 {
		t.Errorf("the key level holds %v (%v) after 301 of 600 were taken", left, err)
	}
	for _, l := range leases {
		if err := b.Release(ctx, k, budgetstore.Release{Lease: l, RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
			t.Errorf("Release %s: %v", l, err)
		}
	}
	took := write
	took.Amount = -1
	if err := b.Refund(ctx, k, []budgetstore.Level{took}); err != nil {
		t.Errorf("Refund: %v", err)
	}
	if n := rdb.HLen(ctx, p+":inflight").Val(); n != 0 {
		t.Errorf("%d levels still counted in flight after every lease ended: %v", n, rdb.HGetAll(ctx, p+":inflight").Val())
	}
}

// TestAStoreWhoseAcquireFailsWhileRenewAnswersDrainsOnce: a store whose
// Acquire fails while its Renew answers (a script that fails on one key)
// makes the process drain once and then go on its share (at its pace);
// it logs the outage and its end once, not every time the keeper's Renew
// says the store is back.
func TestAStoreWhoseAcquireFailsWhileRenewAnswersDrainsOnce(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	k := testKey()
	var failing atomic.Bool
	st := &faultyBudget{real: New(rs.Client(t)), pick: func(method string) Fault {
		if method == "acquire" && failing.Load() {
			return faultError
		}
		return faultNone
	}}
	var said atomic.Int32
	a, b := budget.New(), budget.New()
	a.UseStore(st, k, slog.New(countingHandler(func(r slog.Record) {
		if strings.Contains(r.Message, "shared budget") {
			said.Add(1)
		}
	})))
	b.UseStore(New(rs.Client(t)), k, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admitAnswered(ctx, t, b, ops.GetMe, "")
	admitAnswered(ctx, t, a, ops.GetMe, "")
	admitAnswered(ctx, t, b, ops.GetMe, "") // both know there are two
	failing.Store(true)
	start := time.Now()
	for i := range 10 {
		cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
		tk, ev, err := a.Admit(cctx, callOf(ops.GetMe))
		ccancel()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		tk.Finish(budget.Answer{Status: 200})
		if i > 0 && ev.Reason == budget.ReasonInFlight {
			t.Errorf("call %d waited %v for a drain", i, ev.Wait)
		}
		time.Sleep(150 * time.Millisecond) // the keeper's Renew answers meanwhile
	}
	if n := said.Load(); n > 2 {
		t.Errorf("the outage and its end were logged %d times in %v", n, time.Since(start))
	}
}

// countingHandler is a slog.Handler that hands each record to f.
type countingHandler func(slog.Record)

func (h countingHandler) Enabled(context.Context, slog.Level) bool      { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error { h(r); return nil }
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h countingHandler) WithGroup(string) slog.Handler                 { return h }

// TestAStoresExhaustedQuotaIsRefusedAtOnce: an exhausted quota the store
// holds refuses the call at once with an ExhaustedError, also for a
// policy no process knew the scope of ("*"), and also for one that a
// damaged key says resets in 400 years, which counts for maxHold at most.
func TestAStoresExhaustedQuotaIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy  string
		aheadMs int64
	}{{"*", 3_600_000}, {budget.Key, 3_600_000}, {budget.Key, 400 * 365 * 86_400_000}, {budget.Key, 100 * 365 * 86_400_000}} {
		rs := startRedis(t)
		rdb := rs.Client(t)
		k := testKey()
		s := budget.New()
		s.UseStore(New(rdb), k, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		admitAnswered(ctx, t, s, ops.GetMe, "")
		now := rdb.Time(ctx).Val()
		p := DefaultPrefix + "{" + k + "}"
		rdb.HSet(ctx, p+":blocks", c.policy, strconv.FormatInt(now.UnixMilli()+c.aheadMs, 10))
		start := time.Now()
		_, _, err := s.Admit(ctx, callOf(ops.GetMe))
		cancel()
		var ex *budget.ExhaustedError
		if !errors.As(err, &ex) || time.Since(start) > time.Second || ex.Until.After(time.Now().Add(25*time.Hour)) {
			t.Errorf("%s blocked for %d ms: %v after %v", c.policy, c.aheadMs, err, time.Since(start))
		}
	}
}

// TestLevelNamesLeaveNoFieldsBehind: a server that names new policies
// now and then (learned levels come and go) leaves no field per name in
// the key's hashes of what is in flight and of exhausted quotas once
// nothing of that level is in flight and its quota has reset: a key in
// use does not grow them for ever.
func TestLevelNamesLeaveNoFieldsBehind(t *testing.T) {
	t.Parallel()
	b, rdb, k, _ := storeOnRedis(t)
	ctx := context.Background()
	for i := range 200 {
		name, lease := "learned-"+strconv.Itoa(i), "l"+strconv.Itoa(i)
		lv := budgetstore.Level{Name: name, Amount: 1, Rate: 1, Size: 10}
		if g, err := b.Acquire(ctx, k, acquire(lease, time.Minute, key(1), lv)); err != nil || !g.Admitted {
			t.Fatalf("%d: %+v %v", i, g, err)
		}
		if err := b.Release(ctx, k, budgetstore.Release{Lease: lease, RefusalWindow: time.Minute, MaxInFlight: 6,
			Block: name, BlockUntil: time.Now().Add(2 * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // the quota resets before the next is exhausted
	}
	if g, err := b.Acquire(ctx, k, acquire("last", time.Minute, key(1), budgetstore.Level{Name: "learned-199", Amount: 1, Rate: 1, Size: 10})); err != nil || !g.Admitted {
		t.Fatalf("%+v %v", g, err)
	}
	p := DefaultPrefix + "{" + k + "}"
	if inflight, blocks := rdb.HLen(ctx, p+":inflight").Val(), rdb.HLen(ctx, p+":blocks").Val(); inflight > 2 || blocks > 0 {
		t.Errorf("with one call in flight and no quota exhausted, :inflight keeps %d fields and :blocks %d", inflight, blocks)
	}
}

// lostReplyRefund runs every Refund on Redis, but reports the first one
// with a positive amount as failed, as a reply that came after the
// client's 500 ms deadline does (Redis paused, a slow link).
type lostReplyRefund struct {
	*Budget
	lost    atomic.Bool
	applied atomic.Int32
}

func (b *lostReplyRefund) Refund(ctx context.Context, key string, levels []budgetstore.Level) error {
	err := b.Budget.Refund(ctx, key, levels)
	if err == nil && len(levels) > 0 && levels[0].Amount > 0 {
		b.applied.Add(1)
		if b.lost.CompareAndSwap(false, true) {
			return context.DeadlineExceeded
		}
	}
	return err
}

// TestARefundWhoseReplyIsLostIsAppliedOnce: a list reserves 100 records
// of egress and gives back the 100 it did not return (Settle). The Refund
// runs in Redis but its reply is lost; the keeper sends it again, and
// Redis, which knows its ID, does not give the 100 back a second time.
func TestARefundWhoseReplyIsLostIsAppliedOnce(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	rdb := rs.Client(t)
	st := &lostReplyRefund{Budget: New(rdb)}
	k := testKey()
	s := budget.New()
	s.UseStore(st, k, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admitAnswered(ctx, t, s, ops.GetMe, "")

	q := url.Values{"limit": {"100"}}
	c := &budget.Call{Op: ops.ListContacts.ID, Cost: float64(ops.ListContacts.CostFor(q.Get)),
		Demand: budget.DemandOf(ops.ListContacts, q), Target: "GET /v1/contacts", Budgeted: true}
	egressKey := DefaultPrefix + "{" + k + "}:lv:egress"
	tk, _, err := s.Admit(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	// Other processes drained egress to 5000 meanwhile (the cap at Size
	// would otherwise hide a second refund).
	rdb.HSet(ctx, egressKey, "t", "5000")
	tk.Finish(budget.Answer{Status: http.StatusOK, Header: http.Header{}})
	s.Settle(c, budget.Egress, 100)     // the list returned no record
	time.Sleep(1500 * time.Millisecond) // the keeper sends the "failed" refund again
	got, _ := strconv.ParseFloat(rdb.HGet(ctx, egressKey, "t").Val(), 64)
	if st.applied.Load() < 2 || got < 5050 || got > 5150 {
		t.Errorf("one refund of 100 sent %d times: egress holds %v, want about 5100 (5000 + 100 back)", st.applied.Load(), got)
	}
}

// TestALeaseKeepsWhatItTookWhileItsCallRuns: a renewed lease keeps what its
// call took (its :lease: and :leaseld: hashes) for another day, so a call
// that runs longer than a day still gives back its in-flight amount when
// it ends; a lease shorter than minLeaseTTL is not set.
func TestALeaseKeepsWhatItTookWhileItsCallRuns(t *testing.T) {
	t.Parallel()
	if b := New(nil, WithLeaseTTL(20*time.Millisecond)); b.leaseTTL != minLeaseTTL {
		t.Errorf("WithLeaseTTL(20ms) leases for %v, want %v", b.leaseTTL, minLeaseTTL)
	}
	b, rdb, k, p := storeOnRedis(t)
	ctx := context.Background()
	if g, err := b.Acquire(ctx, k, acquire("long", time.Minute, key(1))); err != nil || !g.Admitted {
		t.Fatalf("%+v %v", g, err)
	}
	rdb.PExpire(ctx, p+":lease:long", time.Second) // as a day later
	if _, err := b.Renew(ctx, k, budgetstore.Renew{Process: "p", ProcessTTL: time.Minute, Leases: []string{"long"}, LeaseTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, p+":lease:long").Val(); ttl < time.Hour {
		t.Errorf("a renewed lease keeps what it took for %v more", ttl)
	}
}

// TestAnEvictedKeyFailsNoScript: Redis under a maxmemory-policy that
// evicts may drop any of the budget's keys, one at a time, while the
// others stay. With each key deleted in turn, and then all of them, every
// request of two processes (a levelled, paced Acquire with a reservation,
// a refused and cut Release with a linger, a refund, a Left, an Owe and a
// block, a Renew) still answers without an error.
func TestAnEvictedKeyFailsNoScript(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	rdb := rs.Client(t)
	procs := []*Budget{New(rdb), New(rdb)}
	ctx, k := context.Background(), testKey()
	write := func(amount float64) budgetstore.Level {
		return budgetstore.Level{Name: "write", Amount: amount, Rate: 1, Size: 60, Taken: 3, Quota: 60, Window: time.Minute, Pace: 1, Burst: 5}
	}
	n := 0
	round := func(when string) {
		t.Helper()
		for i, b := range procs {
			n++
			p, lease := fmt.Sprint("p", i), fmt.Sprint("l", n)
			rsv := budgetstore.Reservation{Slots: 1, Calls: 1, Seq: uint64(n), TTL: time.Minute}
			req := acquire(lease, time.Minute, key(1), write(1))
			req.Process, req.ProcessTTL, req.Reservation = p, time.Minute, rsv
			if _, err := b.Acquire(ctx, k, req); err != nil {
				t.Errorf("%s: Acquire: %v", when, err)
			}
			held := acquire("held"+p, time.Minute, key(1), write(1))
			held.Process, held.ProcessTTL = p, time.Minute
			if _, err := b.Acquire(ctx, k, held); err != nil {
				t.Errorf("%s: Acquire: %v", when, err)
			}
			if _, err := b.Renew(ctx, k, budgetstore.Renew{Process: p, ProcessTTL: time.Minute, Leases: []string{lease, "held" + p}, LeaseTTL: time.Minute, Reservation: rsv}); err != nil {
				t.Errorf("%s: Renew: %v", when, err)
			}
			if err := b.Refund(ctx, k, []budgetstore.Level{{Name: "write", Amount: 1, Rate: 1, Size: 60, ID: lease, Ago: time.Millisecond}}); err != nil {
				t.Errorf("%s: Refund: %v", when, err)
			}
			rel := budgetstore.Release{Lease: lease, Refused: true, Cut: true, Linger: 10 * time.Millisecond, CutFactor: 0.5,
				Refund: []budgetstore.Level{write(1)}, Left: []budgetstore.Level{{Name: "key", Amount: 500, Rate: 5, Size: 600, Reset: time.Second}},
				Owe:         []budgetstore.Level{{Name: "write", Amount: -1, Rate: 1, Size: 60, Hold: 10 * time.Millisecond}},
				PausedUntil: time.Now().Add(time.Millisecond), Block: "delete-day", BlockUntil: time.Now().Add(time.Minute),
				RefusalLimit: 25, RefusalWindow: time.Minute, MaxInFlight: 6, Process: p, Reservation: rsv}
			if err := b.Release(ctx, k, rel); err != nil {
				t.Errorf("%s: Release: %v", when, err)
			}
		}
	}
	round("before any eviction")
	round("before any eviction")
	keys, err := rdb.Keys(ctx, DefaultPrefix+"{"+k+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{":blocks", ":lease:held", ":leaseld:held", ":lv:write", ":rsv", ":refunds", ":refusals", ":state"} {
		if !slices.ContainsFunc(keys, func(key string) bool { return strings.Contains(key, want) }) {
			t.Fatalf("the rounds wrote no key with %q: %v", want, keys)
		}
	}
	for _, key := range keys {
		if err := rdb.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		round("with " + key + " evicted")
	}
	for _, key := range keys {
		rdb.Del(ctx, key)
	}
	round("with every key evicted")
}
