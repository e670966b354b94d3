package redisbudget

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/budgetstore"
)

func acquire(lease string, ttl time.Duration, levels ...budgetstore.Level) budgetstore.Acquire {
	return budgetstore.Acquire{Lease: lease, LeaseTTL: ttl, Levels: levels, Cost: 5, KeyRate: 5, MaxInFlight: 6,
		RefusalLimit: 25, RefusalWindow: time.Minute}
}

func key(amount float64) budgetstore.Level {
	return budgetstore.Level{Name: "key", Amount: amount, Rate: 5, Size: 600}
}

// TestTwoProcessesShareOneBucket: two Budgets (as two processes) on one
// Redis take from one bucket; when it is empty both are told how long.
func TestTwoProcessesShareOneBucket(t *testing.T) {
	srv := startRedis(t)
	a, b := New(srv.Client(t)), New(srv.Client(t))
	ctx, k := context.Background(), testKey()
	for i := range 120 {
		bud := a
		if i%2 == 1 {
			bud = b
		}
		g, err := bud.Acquire(ctx, k, acquire(fmt.Sprint("l", i), time.Minute, key(5)))
		if err != nil || !g.Admitted {
			t.Fatalf("attempt %d: %+v %v", i, g, err)
		}
		if err := bud.Release(ctx, k, budgetstore.Release{Lease: fmt.Sprint("l", i), RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
			t.Fatal(err)
		}
	}
	g, err := b.Acquire(ctx, k, acquire("late", time.Minute, key(5)))
	if err != nil || g.Admitted || g.Reason != "key" || g.Wait <= 0 || g.Wait > 1100*time.Millisecond {
		t.Fatalf("after 600 points: %+v %v", g, err)
	}
}

// TestAGrantSaysWhatTheLevelsHold: an admitted attempt is told what each
// level it took from holds after its take, over every process; the
// client's share through an outage is a share of that.
func TestAGrantSaysWhatTheLevelsHold(t *testing.T) {
	srv := startRedis(t)
	a, b := New(srv.Client(t)), New(srv.Client(t))
	ctx, k := context.Background(), testKey()
	if _, err := a.Acquire(ctx, k, acquire("a", time.Minute, key(100))); err != nil {
		t.Fatal(err)
	}
	g, err := b.Acquire(ctx, k, acquire("b", time.Minute, key(50), budgetstore.Level{Name: "write", Amount: 1, Size: 60}))
	if err != nil || !g.Admitted || len(g.Levels) != 2 {
		t.Fatalf("the second attempt: %+v %v", g, err)
	}
	if l := g.Levels[0]; l.Name != "key" || l.Amount < 450 || l.Amount > 451 {
		t.Errorf("the key after 150 of 600 taken: %+v, want 450 (and at most a second's refill)", l)
	}
	if l := g.Levels[1]; l.Name != "write" || l.Amount != 59 {
		t.Errorf("the write level after 1 of 60 taken: %+v, want 59", l)
	}
}

// fillSlots takes all 6 slots of key k through b, with leases prefix0 to
// prefix5 of lease time ttl.
func fillSlots(t *testing.T, b *Budget, k, prefix string, ttl time.Duration) {
	t.Helper()
	for i := range 6 {
		if g, err := b.Acquire(context.Background(), k, acquire(fmt.Sprint(prefix, i), ttl, key(1))); err != nil || !g.Admitted {
			t.Fatalf("slot %d: %+v %v", i, g, err)
		}
	}
}

// TestInFlightLeasesExpire: the slots in flight are capped over all
// processes, and a lease that is never released (its process died) frees
// its slot when it expires.
func TestInFlightLeasesExpire(t *testing.T) {
	srv := startRedis(t)
	a, b := New(srv.Client(t)), New(srv.Client(t))
	ctx, k := context.Background(), testKey()
	fillSlots(t, a, k, "dead", 300*time.Millisecond)
	g, err := b.Acquire(ctx, k, acquire("x", time.Minute, key(1)))
	if err != nil || g.Admitted || g.Reason != "in-flight" {
		t.Fatalf("a seventh call: %+v %v", g, err)
	}
	time.Sleep(400 * time.Millisecond)
	if g, err := b.Acquire(ctx, k, acquire("y", time.Minute, key(1))); err != nil || !g.Admitted {
		t.Fatalf("after the leases expired: %+v %v", g, err)
	}
}

// TestALeaseLastsAtMostADay: a lease time over a day, set with
// WithLeaseTTL or asked by the client, is a day, as long as the scripts
// keep a lease's amounts: a lease that outlived them would leave what it
// took counted in flight for good.
func TestALeaseLastsAtMostADay(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	rdb := rs.Client(t)
	ctx, k := context.Background(), testKey()
	for i, b := range []*Budget{New(rdb, WithLeaseTTL(48*time.Hour)), New(rdb)} {
		lease := fmt.Sprint("long", i)
		if g, err := b.Acquire(ctx, k, acquire(lease, 48*time.Hour, key(1))); err != nil || !g.Admitted {
			t.Fatalf("%+v %v", g, err)
		}
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		ends := time.UnixMilli(int64(rdb.ZScore(ctx, DefaultPrefix+"{"+k+"}:leases", lease).Val()))
		if d := ends.Sub(now); d > maxLeaseTTL {
			t.Errorf("lease %s ends in %v; the longest is %v", lease, d, maxLeaseTTL)
		}
	}
	if !strings.Contains(luaPrelude, fmt.Sprintf("local keep = %d\n", maxLeaseTTL.Milliseconds())) {
		t.Error("the scripts keep a lease's amounts for another time than maxLeaseTTL")
	}
}

// TestAReservationHoldsItsSlotsFromTheOthers: the slots a process holds
// outside leases (budgetstore.Reservation) count in flight for every other
// process's Acquire, and of them its own calls for its own; of its
// reservations the one of the highest Seq counts, whichever request
// brought it, until its TTL.
func TestAReservationHoldsItsSlotsFromTheOthers(t *testing.T) {
	srv := startRedis(t)
	a, b := New(srv.Client(t)), New(srv.Client(t))
	ctx := context.Background()
	k := testKey()
	reserve := func(slots, calls int, seq uint64, ttl time.Duration) {
		t.Helper()
		r := budgetstore.Reservation{Slots: slots, Calls: calls, Seq: seq, TTL: ttl}
		if _, err := a.Renew(ctx, k, budgetstore.Renew{Process: "a", ProcessTTL: time.Minute, LeaseTTL: time.Minute, Reservation: r}); err != nil {
			t.Fatal(err)
		}
	}
	admitted := func(bud *Budget, process, lease string) bool {
		t.Helper()
		req := acquire(lease, time.Minute, key(1))
		req.Process, req.ProcessTTL = process, time.Minute
		g, err := bud.Acquire(ctx, k, req)
		if err != nil || !g.Admitted && g.Reason != "in-flight" {
			t.Fatalf("%s: %+v %v", lease, g, err)
		}
		return g.Admitted
	}
	reserve(2, 0, 2, time.Minute)
	for i := range 4 {
		if !admitted(b, "b", fmt.Sprint("b", i)) {
			t.Fatalf("b's call %d, with 2 of 6 slots reserved by a", i)
		}
	}
	if admitted(b, "b", "b4") {
		t.Errorf("b's fifth call went into a's reservation")
	}
	if !admitted(a, "a", "a0") {
		t.Errorf("a's own reservation, of no call, held its call")
	}
	if err := a.Release(ctx, k, budgetstore.Release{Lease: "a0", RefusalWindow: time.Minute, MaxInFlight: 6,
		Process: "a", Reservation: budgetstore.Reservation{Slots: 0, Seq: 1, TTL: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	if admitted(b, "b", "b5") {
		t.Errorf("a reservation older than the one the store has freed its slots")
	}
	reserve(2, 1, 3, time.Minute)
	if !admitted(a, "a", "a1") || admitted(a, "a", "a2") {
		t.Errorf("a's call without a lease did not count for a once: 4 leases, 1 call of a's")
	}
	reserve(0, 0, 4, time.Minute)
	if !admitted(b, "b", "b6") {
		t.Errorf("a's slots stayed reserved after it gave them up")
	}
	for _, l := range []string{"a1", "b6"} {
		if err := a.Release(ctx, k, budgetstore.Release{Lease: l, RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
			t.Fatal(err)
		}
	}
	reserve(1, 0, 10, 200*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	reserve(2, 0, 5, time.Minute) // a later state of the same process, numbering anew
	if admitted(b, "b", "b7") {
		t.Errorf("a reservation after one of a higher seq had run out was passed over")
	}
}

// TestARenewalHoldsALostLeaseAgain: Redis restarted empty while a call was
// in flight; the renewal of its lease holds its slot again, for every
// process, and a lease that was released is not held again.
func TestARenewalHoldsALostLeaseAgain(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client(t)
	a, b := New(rdb), New(rdb)
	ctx, k := context.Background(), testKey()
	for _, l := range []string{"long", "done"} {
		if g, err := a.Acquire(ctx, k, acquire(l, time.Minute, key(1))); err != nil || !g.Admitted {
			t.Fatalf("%s: %+v %v", l, g, err)
		}
	}
	if err := a.Release(ctx, k, budgetstore.Release{Lease: "done", RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, DefaultPrefix+"{"+k+"}:leases").Err(); err != nil { // the slots of a Redis back empty
		t.Fatal(err)
	}
	if _, err := a.Renew(ctx, k, budgetstore.Renew{Process: "a", ProcessTTL: time.Minute, Leases: []string{"long", "done"}, LeaseTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if g, err := b.Acquire(ctx, k, acquire(fmt.Sprint("b", i), time.Minute, key(1))); err != nil || !g.Admitted {
			t.Fatalf("b's call %d of the 5 slots left: %+v %v", i, g, err)
		}
	}
	if g, err := b.Acquire(ctx, k, acquire("b5", time.Minute, key(1))); err != nil || g.Admitted {
		t.Errorf("a sixth call of b while a's renewed lease is in flight: %+v %v", g, err)
	}
}

// TestALingeringReleaseKeepsItsSlot: the release of an attempt that got
// no answer keeps its slot taken for its Linger, for every process: the
// server may still be running it. A renewal of the lease that comes after
// the release (the keeper built it before the call ended) does not keep it
// longer.
func TestALingeringReleaseKeepsItsSlot(t *testing.T) {
	srv := startRedis(t)
	a, b := New(srv.Client(t)), New(srv.Client(t))
	ctx, k := context.Background(), testKey()
	fillSlots(t, a, k, "s", time.Minute)
	if err := a.Release(ctx, k, budgetstore.Release{Lease: "s0", Linger: 300 * time.Millisecond, RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Renew(ctx, k, budgetstore.Renew{Process: "a", ProcessTTL: time.Minute, Leases: []string{"s0"}, LeaseTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if g, err := b.Acquire(ctx, k, acquire("x", time.Minute, key(1))); err != nil || g.Admitted || g.Reason != "in-flight" {
		t.Fatalf("a call while the released one lingers: %+v %v", g, err)
	}
	if g, err := a.Acquire(ctx, k, acquire("s0", time.Minute, key(1))); err != nil || g.Admitted {
		t.Fatalf("the lingering lease asked again: %+v %v", g, err)
	}
	time.Sleep(400 * time.Millisecond)
	if g, err := b.Acquire(ctx, k, acquire("y", time.Minute, key(1))); err != nil || !g.Admitted {
		t.Fatalf("after the linger: %+v %v", g, err)
	}
}

// TestANegativeRefundTakes: what a process took while Redis was
// unreachable, sent as a refund of a negative amount, is taken from the
// level for every process, and logged on a level bounded by its log; one
// sent to a store that began its count of the level since (Redis came
// back empty) is not taken again: the count began from the model that had it.
func TestANegativeRefundTakes(t *testing.T) {
	srv := startRedis(t)
	a, b := New(srv.Client(t)), New(srv.Client(t))
	ctx, k := context.Background(), testKey()
	if err := a.Refund(ctx, k, []budgetstore.Level{key(-1)}); err != nil { // begins the count: not taken
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if err := a.Refund(ctx, k, []budgetstore.Level{key(-598)}); err != nil {
		t.Fatal(err)
	}
	g, err := b.Acquire(ctx, k, acquire("x", time.Minute, key(5)))
	if err != nil || g.Admitted || g.Reason != "key" || g.Wait < 500*time.Millisecond {
		t.Fatalf("5 points of a key 598 of 600 were taken from: %+v %v", g, err)
	}

	// A level that frees in steps, bounded by its log: the take is logged,
	// so the log frees it a window later, and not before.
	write := budgetstore.Level{Name: "write", Amount: 1, Size: 60, Quota: 60, Window: time.Minute}
	if g, err := a.Acquire(ctx, k, acquire("w", time.Minute, write)); err != nil || !g.Admitted {
		t.Fatalf("a write: %+v %v", g, err)
	}
	if err := a.Release(ctx, k, budgetstore.Release{Lease: "w", RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
		t.Fatal(err)
	}
	took := write
	took.Amount = -59
	if err := a.Refund(ctx, k, []budgetstore.Level{took}); err != nil {
		t.Fatal(err)
	}
	if g, err := b.Acquire(ctx, k, acquire("w2", time.Minute, write)); err != nil || g.Admitted || g.Reason != "write" {
		t.Fatalf("a write after 60 of 60 were taken within the window: %+v %v", g, err)
	}

	k = testKey()
	if err := a.Refund(ctx, k, []budgetstore.Level{key(-1)}); err != nil {
		t.Fatal(err)
	}
	before := key(-598)
	before.Ago = time.Second // taken before the count began
	if err := a.Refund(ctx, k, []budgetstore.Level{before}); err != nil {
		t.Fatal(err)
	}
	if g, err := b.Acquire(ctx, k, acquire("y", time.Minute, key(5))); err != nil || !g.Admitted {
		t.Fatalf("5 points of a key whose count began after 598 were taken: %+v %v, want them taken once, in the count", g, err)
	}
}

// TestRefusalsAreCountedForAll: the lockout guard counts the refusals of
// every process.
func TestRefusalsAreCountedForAll(t *testing.T) {
	srv := startRedis(t)
	a, b := New(srv.Client(t)), New(srv.Client(t))
	ctx, k := context.Background(), testKey()
	for i := range 25 {
		lease := fmt.Sprint("r", i)
		if _, err := a.Acquire(ctx, k, acquire(lease, time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctx, k, budgetstore.Release{Lease: lease, Refused: true, RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
			t.Fatal(err)
		}
	}
	g, err := b.Acquire(ctx, k, acquire("next", time.Minute))
	if err != nil || g.Admitted || g.Reason != "refusal-guard" || g.Wait < 59*time.Second {
		t.Fatalf("after 25 refusals: %+v %v", g, err)
	}
}

// TestWhatOneProcessLearnsAllSee: a lockout, an exhausted quota, a cut of
// the adaptive state and what the server said is left reach the others.
func TestWhatOneProcessLearnsAllSee(t *testing.T) {
	srv := startRedis(t)
	a, b := New(srv.Client(t)), New(srv.Client(t))
	ctx := context.Background()
	rel := func(k string, r budgetstore.Release) {
		t.Helper()
		if _, err := a.Acquire(ctx, k, acquire(r.Lease, time.Minute, key(1))); err != nil {
			t.Fatal(err)
		}
		r.RefusalWindow, r.MaxInFlight = time.Minute, 6
		if err := a.Release(ctx, k, r); err != nil {
			t.Fatal(err)
		}
	}

	k := testKey()
	rel(k, budgetstore.Release{Lease: "l1", PausedUntil: time.Now().Add(3 * time.Minute)})
	if g, _ := b.Acquire(ctx, k, acquire("x", time.Minute, key(1))); g.Admitted || g.Reason != "lockout" || g.Wait < 170*time.Second {
		t.Errorf("lockout: %+v", g)
	}

	k = testKey()
	rel(k, budgetstore.Release{Lease: "l2", Block: "delete-day", BlockUntil: time.Now().Add(time.Hour)})
	if g, _ := b.Acquire(ctx, k, acquire("x", time.Minute, key(10), budgetstore.Level{Name: "delete-day", Amount: 1, Rate: 300.0 / 86400, Size: 300})); g.Admitted || g.Reason != "quota" || g.Policy != "delete-day" || time.Until(g.Until) < 59*time.Minute {
		t.Errorf("quota: %+v", g)
	}
	if g, _ := b.Acquire(ctx, k, acquire("y", time.Minute, key(1))); !g.Admitted {
		t.Errorf("a read is held by a delete quota: %+v", g)
	}

	k = testKey()
	rel(k, budgetstore.Release{Lease: "l3", Left: []budgetstore.Level{{Name: "key", Amount: 3, Rate: 5, Size: 600}}})
	if g, _ := b.Acquire(ctx, k, acquire("x", time.Minute, key(5))); g.Admitted || g.Reason != "key" {
		t.Errorf("after r=3 a 5-point call went: %+v", g)
	}

	k = testKey()
	rel(k, budgetstore.Release{Lease: "l4", Cut: true})
	held := 0
	for i := range 6 {
		g, _ := b.Acquire(ctx, k, acquire(fmt.Sprint("c", i), time.Minute, key(1)))
		if !g.Admitted {
			held++
			if g.Reason != "in-flight" && g.Reason != "pace" {
				t.Errorf("after a cut: %+v", g)
			}
		}
	}
	if held == 0 {
		t.Error("a cut did not lower the shared cap")
	}
}

// TestKeysAreNamespacedAndHashed: nothing the budget writes names the API
// key; everything sits under the prefix and the given key's hash tag.
func TestKeysAreNamespacedAndHashed(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.Client(t)
	b := New(rdb)
	ctx := context.Background()
	c, err := bodo.NewClient(bodo.WithAPIKey("bodo_test_topsecret"), bodo.WithBaseURL("https://api.example.com"), bodo.WithSharedBudget(b))
	if err != nil {
		t.Fatal(err)
	}
	_ = c
	if _, err := b.Acquire(ctx, "api.example.com:0123abcd", acquire("l", time.Minute, key(1))); err != nil {
		t.Fatal(err)
	}
	ks, err := rdb.Keys(ctx, "*").Result()
	if err != nil || len(ks) == 0 {
		t.Fatalf("keys %v %v", ks, err)
	}
	for _, k := range ks {
		if !strings.HasPrefix(k, DefaultPrefix+"{api.example.com:0123abcd}:") || strings.Contains(k, "topsecret") {
			t.Errorf("key %q", k)
		}
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("key %q never expires", k)
		}
	}
}

// TestACallBiggerThanALevelGoesOnAFullOne: a level learned from a header
// can be smaller than a call (a batch of 20 parts against a policy of 10);
// as in one process, the call goes when the level is full and leaves it in
// debt, instead of never (issue 11, item 5).
func TestACallBiggerThanALevelGoesOnAFullOne(t *testing.T) {
	srv := startRedis(t)
	b := New(srv.Client(t))
	ctx, k := context.Background(), testKey()
	small := func(amount float64) budgetstore.Level {
		return budgetstore.Level{Name: "bodo-batch", Amount: amount, Rate: 1, Size: 10}
	}
	g, err := b.Acquire(ctx, k, acquire("big", time.Minute, key(20), small(20)))
	if err != nil || !g.Admitted {
		t.Fatalf("a call of 20 on a full level of 10: %+v %v", g, err)
	}
	if err := b.Release(ctx, k, budgetstore.Release{Lease: "big", RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
		t.Fatal(err)
	}
	g, err = b.Acquire(ctx, k, acquire("next", time.Minute, key(1), small(1)))
	if err != nil || g.Admitted || g.Reason != "bodo-batch" || g.Wait < 10*time.Second {
		t.Fatalf("right after it, with the level 10 in debt: %+v %v", g, err)
	}
}

// TestAPacedLevelSpreadsTheCallsOfAllProcesses: a level the client paces
// (Level.Pace, Burst) lets its calls go at the pace over all processes,
// whatever the level holds, and names the level as what holds them; the
// levels a call does not take from are not paced.
func TestAPacedLevelSpreadsTheCallsOfAllProcesses(t *testing.T) {
	a, b, k := twoProcesses(t)
	ctx := context.Background()
	write := func() budgetstore.Level { return pacedWrite(4) }
	release := func(bud *Budget, lease string) {
		t.Helper()
		if err := bud.Release(ctx, k, budgetstore.Release{Lease: lease, RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
			t.Fatal(err)
		}
	}
	if g, err := a.Acquire(ctx, k, acquire("w1", time.Minute, key(1), write())); err != nil || !g.Admitted {
		t.Fatalf("the first write: %+v %v", g, err)
	}
	release(a, "w1")
	g, err := b.Acquire(ctx, k, acquire("w2", time.Minute, key(1), write()))
	if err != nil || g.Admitted || g.Reason != "write" || g.Wait <= 100*time.Millisecond || g.Wait > 250*time.Millisecond {
		t.Fatalf("a second write of another process at once: %+v %v, want held by write for about 250 ms", g, err)
	}
	if g, err := b.Acquire(ctx, k, acquire("r1", time.Minute, key(1))); err != nil || !g.Admitted {
		t.Fatalf("a read meanwhile: %+v %v", g, err)
	}
	release(b, "r1")
	time.Sleep(g.Wait)
	if g, err := b.Acquire(ctx, k, acquire("w2", time.Minute, key(1), write())); err != nil || !g.Admitted {
		t.Fatalf("the second write after its wait: %+v %v", g, err)
	}
}

// TestAReplayGivesBackItsTurnOfThePace: a release that refunds a paced
// level with its pace (a replay, which the server counted on no write)
// gives back the turn of the pace the write took, so the next write of any
// process goes at once; a refund without the pace (a call the level
// itself refused) does not.
func TestAReplayGivesBackItsTurnOfThePace(t *testing.T) {
	a, b, k := twoProcesses(t)
	ctx := context.Background()
	write := func() budgetstore.Level { return pacedWrite(1) }
	for i, paced := range []bool{true, false} {
		time.Sleep(1100 * time.Millisecond) // the pace has a turn again
		first, second := fmt.Sprintf("w%d", 2*i), fmt.Sprintf("w%d", 2*i+1)
		if g, err := a.Acquire(ctx, k, acquire(first, time.Minute, key(1), write())); err != nil || !g.Admitted {
			t.Fatalf("the first write: %+v %v", g, err)
		}
		back := write()
		if !paced {
			back.Pace, back.Burst = 0, 0
		}
		if err := a.Release(ctx, k, budgetstore.Release{Lease: first, RefusalWindow: time.Minute, MaxInFlight: 6, Refund: []budgetstore.Level{back}}); err != nil {
			t.Fatal(err)
		}
		g, err := b.Acquire(ctx, k, acquire(second, time.Minute, key(1), write()))
		if err != nil || g.Admitted != paced {
			t.Fatalf("a write after a refund with the pace %v: %+v %v, want admitted %v", paced, g, err, paced)
		}
		if g.Admitted {
			if err := b.Release(ctx, k, budgetstore.Release{Lease: second, RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// pacedWrite is one write of a write level that refills a write a second,
// paced at pace writes a second, one at once.
func pacedWrite(pace float64) budgetstore.Level {
	return budgetstore.Level{Name: "write", Amount: 1, Rate: 1, Size: 60, Pace: pace, Burst: 1}
}
