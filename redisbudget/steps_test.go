package redisbudget

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
)

// stepsWrite is one write of a level of 3 writes a window of this key
// alone, as a process gives it the store: at rate 0 once it learned that
// the level frees in steps.
func stepsWrite(rate float64, window time.Duration) budgetstore.Level {
	return budgetstore.Level{Name: "write", Amount: 1, Rate: rate, Size: 3, Quota: 3, Window: window}
}

// twoProcesses returns two Budgets on one fresh Redis, as two processes
// that share the key k.
func twoProcesses(t *testing.T) (a, b *Budget, k string) {
	srv := startRedis(t)
	return New(srv.Client(t)), New(srv.Client(t)), testKey()
}

// take admits an attempt of lease on bud that takes levels, failing t if
// it is not admitted, and releases it with left, the answer's word.
func take(t *testing.T, bud *Budget, k, lease string, levels []budgetstore.Level, left ...budgetstore.Level) {
	t.Helper()
	ctx := context.Background()
	if g, err := bud.Acquire(ctx, k, acquire(lease, time.Minute, levels...)); err != nil || !g.Admitted {
		t.Fatalf("%s: %+v %v, want it admitted", lease, g, err)
	}
	if err := bud.Release(ctx, k, budgetstore.Release{Lease: lease, Left: left, RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
		t.Fatal(err)
	}
}

// TestALevelThatFreesInStepsFreesWhatItsLogFrees: a level of this key
// alone that frees in steps (Rate 0, as a sliding log's write level) is
// not refilled between answers: it frees what the log of all processes'
// takes frees, a window after each was released, so the fourth write of
// three a window waits for the first to leave it. An answer that says less
// is left than the log does logs the rest as taken by others.
func TestALevelThatFreesInStepsFreesWhatItsLogFrees(t *testing.T) {
	t.Parallel()
	a, b, k := twoProcesses(t)
	ctx := context.Background()
	const window = 1500 * time.Millisecond
	write := []budgetstore.Level{stepsWrite(0, window)}
	first := time.Now()
	for i := range 3 {
		take(t, []*Budget{a, b}[i%2], k, fmt.Sprint("w", i), write)
	}
	g, err := b.Acquire(ctx, k, acquire("w3", time.Minute, write...))
	if err != nil || g.Admitted || g.Reason != "write" || g.Refusal || g.Wait > window || g.Wait < window-time.Since(first)-100*time.Millisecond {
		t.Fatalf("a fourth write at once: %+v %v, want held by write until the first leaves the log (%v after it)", g, err, window)
	}
	time.Sleep(g.Wait + 20*time.Millisecond)
	take(t, b, k, "w3", write) // once the first left the log
	time.Sleep(window)         // the log is empty again
	left := stepsWrite(0, window)
	left.Amount, left.Reset = 0, window // the server says none is left, where the log says two are
	take(t, a, k, "w4", write, left)
	g, err = a.Acquire(ctx, k, acquire("w5", time.Minute, write...))
	if err != nil || g.Admitted || g.Reason != "write" || g.Wait < window-100*time.Millisecond {
		t.Fatalf("a write beyond what the server said: %+v %v, want held by write for a window, as others took the rest now", g, err)
	}
}

// TestAnAnswerSetsALevelThatDoesNotRefill: a level that does not refill
// between answers (Rate 0) and keeps no log holds what the last answer
// said, less what is in flight, and one unit more at the moment the answer
// named (Reset); a refusal's Owe holds it for its Hold, whatever it holds.
func TestAnAnswerSetsALevelThatDoesNotRefill(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	bud := New(srv.Client(t))
	ctx, k := context.Background(), testKey()
	search := func(amount float64) budgetstore.Level {
		return budgetstore.Level{Name: "search", Amount: amount, Size: 10}
	}
	if g, err := bud.Acquire(ctx, k, acquire("s0", time.Minute, search(10))); err != nil || !g.Admitted {
		t.Fatalf("a call that takes the level whole: %+v %v", g, err)
	}
	if g, err := bud.Acquire(ctx, k, acquire("s1", time.Minute, search(1))); err != nil || g.Admitted || g.Reason != "search" {
		t.Fatalf("a call on the empty level: %+v %v, want held by search", g, err)
	}
	left := search(4) // a window's reset freed it
	left.Reset = 400 * time.Millisecond
	if err := bud.Release(ctx, k, budgetstore.Release{Lease: "s0", Left: []budgetstore.Level{left}, RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		lease := fmt.Sprint("s", i+1)
		if g, err := bud.Acquire(ctx, k, acquire(lease, time.Minute, search(1))); err != nil || !g.Admitted {
			t.Fatalf("call %d of the 4 the answer said are left: %+v %v", i+1, g, err)
		}
	}
	g, err := bud.Acquire(ctx, k, acquire("s5", time.Minute, search(1)))
	if err != nil || g.Admitted || g.Reason != "search" || g.Wait > 400*time.Millisecond {
		t.Fatalf("a fifth call: %+v %v, want held by search until the answer's moment", g, err)
	}
	time.Sleep(g.Wait + 20*time.Millisecond)
	if g, err := bud.Acquire(ctx, k, acquire("s5", time.Minute, search(1))); err != nil || !g.Admitted {
		t.Fatalf("a call at the answer's moment: %+v %v", g, err)
	}

	owe := search(5)
	owe.Hold = 300 * time.Millisecond
	left = search(9)
	if err := bud.Release(ctx, k, budgetstore.Release{Lease: "s5", Refused: true, Left: []budgetstore.Level{left}, Owe: []budgetstore.Level{owe},
		RefusalWindow: time.Minute, MaxInFlight: 6}); err != nil {
		t.Fatal(err)
	}
	g, err = bud.Acquire(ctx, k, acquire("s6", time.Minute, search(1)))
	if err != nil || g.Admitted || g.Reason != "search" || !g.Refusal || g.Wait > 300*time.Millisecond || g.Wait < 200*time.Millisecond {
		t.Fatalf("a call during the refusal's hold: %+v %v, want a refusal's wait on search", g, err)
	}
	time.Sleep(g.Wait + 20*time.Millisecond)
	if g, err := bud.Acquire(ctx, k, acquire("s6", time.Minute, search(1))); err != nil || !g.Admitted {
		t.Fatalf("a call after the hold: %+v %v", g, err)
	}
}

// TestAMomentAddsWhatTheRefillHasNot: at the moment an answer named, a
// level that refills holds at least one unit more than the answer left it,
// its refill since counting toward that unit: a bucket refilling 0.1 a
// second, left empty for 1 s, holds 1 then, not 1.1, and a call of 1.09
// waits for the refill.
func TestAMomentAddsWhatTheRefillHasNot(t *testing.T) {
	t.Parallel()
	bud, _, k := twoProcesses(t)
	bucket := func(amount float64) budgetstore.Level {
		return budgetstore.Level{Name: "bucket", Amount: amount, Rate: 0.1, Size: 10}
	}
	left := bucket(0)
	left.Reset = time.Second
	take(t, bud, k, "b0", []budgetstore.Level{bucket(10)}, left)
	time.Sleep(left.Reset + 50*time.Millisecond)
	g, err := bud.Acquire(context.Background(), k, acquire("b1", time.Minute, bucket(1.09)))
	if err != nil || g.Admitted || g.Reason != "bucket" || g.Wait <= 0 {
		t.Fatalf("a call of 1.09 just after the moment: %+v %v, want held by bucket for the refill", g, err)
	}
}

// TestALevelThatFreesInStepsSpreadsWhatIsLeft: a paced level that frees in
// steps lets what is left of it go over the time until its oldest take
// leaves the log, over all processes, however fast the pace a process
// asks: 2 left for 2 s go one a second, not at once.
func TestALevelThatFreesInStepsSpreadsWhatIsLeft(t *testing.T) {
	t.Parallel()
	a, b, k := twoProcesses(t)
	ctx := context.Background()
	write := func(amount, pace float64) []budgetstore.Level {
		return []budgetstore.Level{{Name: "write", Amount: amount, Size: 10, Quota: 10, Window: 2 * time.Second, Pace: pace, Burst: 1}}
	}
	take(t, a, k, "w0", write(8, 0)) // 8 of 10
	if g, err := b.Acquire(ctx, k, acquire("w1", time.Minute, write(1, 100)...)); err != nil || !g.Admitted {
		t.Fatalf("the first of the 2 left: %+v %v", g, err)
	}
	g, err := a.Acquire(ctx, k, acquire("w2", time.Minute, write(1, 100)...))
	if err != nil || g.Admitted || g.Reason != "write" || g.Wait < 700*time.Millisecond || g.Wait > 2*time.Second {
		t.Fatalf("the second of the 2 left at once: %+v %v, want held by write for about a second", g, err)
	}
}

// TestASpreadLevelLetsATenthOfWhatIsLeftGoAtOnce: a process whose own
// model still holds a level that frees in steps full asks for a burst of a
// tenth of its size; with 11 of 100 left for the minute until the oldest
// take leaves the log (other processes took the rest), the store lets a
// tenth of the 11 go at once, not 10 of them with one left for the minute.
func TestASpreadLevelLetsATenthOfWhatIsLeftGoAtOnce(t *testing.T) {
	t.Parallel()
	a, b, k := twoProcesses(t)
	write := func(amount, pace, burst float64) []budgetstore.Level {
		return []budgetstore.Level{{Name: "write", Amount: amount, Size: 100, Quota: 100, Window: time.Minute, Pace: pace, Burst: burst}}
	}
	take(t, a, k, "w0", write(89, 0, 0))
	if n := elevenLeft(t, b, k, write(1, 100, 10)); n != 1 {
		t.Errorf("%d of the 11 left went at once, want 1 (a tenth of them)", n)
	}
}

// elevenLeft acquires writes of levels on bud, with 11 left of a minute's
// window, until one is held, which must be held by write for about the
// 5 s that 10 left over the minute allow; it returns how many went.
func elevenLeft(t *testing.T, bud *Budget, k string, levels []budgetstore.Level) int {
	t.Helper()
	for n := range 11 {
		g, err := bud.Acquire(context.Background(), k, acquire(fmt.Sprint("w", n+1), time.Minute, levels...))
		if err != nil {
			t.Fatal(err)
		}
		if !g.Admitted {
			if g.Reason != "write" || g.Wait < 4*time.Second {
				t.Errorf("write %d of the 11 left: %+v, want held by write for about 5 s (10 left over the minute)", n+1, g)
			}
			return n
		}
	}
	return 11
}

// TestAProcessThatHasNotSeenTheStepsIsSpreadToo: once one process has
// shown that a level frees in steps, another that still asks with its
// quota's refill and no pace is spread with the rest: with 11 of 60 left
// for the minute until the oldest take leaves the log, one goes at once,
// not all 11.
func TestAProcessThatHasNotSeenTheStepsIsSpreadToo(t *testing.T) {
	t.Parallel()
	a, b, k := twoProcesses(t)
	write := func(amount, rate float64) []budgetstore.Level {
		return []budgetstore.Level{{Name: "write", Amount: amount, Rate: rate, Size: 60, Quota: 60, Window: time.Minute}}
	}
	take(t, a, k, "w0", write(49, 0))
	if n := elevenLeft(t, b, k, write(1, 1)); n != 1 {
		t.Errorf("%d of the 11 left went at once, want 1", n)
	}
}

// TestWhatOneProcessShowsOfAStepsLevelBindsAll: a process that has not
// learned yet that a level frees in steps gives the store its quota's
// refill; once another has shown the steps (Rate 0), the store refills it
// for no one for a window, and the first process's write waits for the log.
func TestWhatOneProcessShowsOfAStepsLevelBindsAll(t *testing.T) {
	t.Parallel()
	a, b, k := twoProcesses(t)
	const window = 1500 * time.Millisecond
	for i := range 3 {
		take(t, a, k, fmt.Sprint("w", i), []budgetstore.Level{stepsWrite(0, window)})
	}
	time.Sleep(300 * time.Millisecond) // a refill of 10 a second would have 3 again
	g, err := b.Acquire(context.Background(), k, acquire("w3", time.Minute, stepsWrite(10, window)))
	if err != nil || g.Admitted || g.Reason != "write" || g.Wait < window/2 {
		t.Fatalf("a write of a process that gives a refill: %+v %v, want held by write until the log frees", g, err)
	}
}

// burst is a call's take from a policy of 10, refilled at rate.
func burst(amount, rate float64) budgetstore.Level {
	return budgetstore.Level{Name: "burst", Amount: amount, Rate: rate, Size: 10}
}

// TestAWordThatFreesInStepsBindsEveryProcessUntilItsMoment: a process
// that learned that a policy refills only from the moments its words name
// reports the server's word with Steps: no process refills the level
// before the word's moment, also one that gives it its quota's refill (10
// a second here, a unit in 100 ms), and the moment frees one unit. From
// then on it refills as before, from the moment, not from the word.
func TestAWordThatFreesInStepsBindsEveryProcessUntilItsMoment(t *testing.T) {
	t.Parallel()
	a, b, k := twoProcesses(t)
	ctx := context.Background()
	left := burst(0, 0)
	left.Reset, left.Steps = 600*time.Millisecond, true
	word := time.Now()
	take(t, a, k, "a0", []budgetstore.Level{burst(10, 0)}, left)
	time.Sleep(300 * time.Millisecond)
	g, err := b.Acquire(ctx, k, acquire("b0", time.Minute, burst(1, 10)))
	if err != nil || g.Admitted || g.Reason != "burst" || g.Wait <= 0 {
		t.Fatalf("another process's call 300 ms before the moment, at a refill of 10 a second: %+v %v, want held by burst", g, err)
	}
	time.Sleep(left.Reset - time.Since(word) + 20*time.Millisecond)
	if g, err := b.Acquire(ctx, k, acquire("b0", time.Minute, burst(1, 10))); err != nil || !g.Admitted {
		t.Fatalf("a call at the moment: %+v %v, want admitted", g, err)
	}
	g, err = b.Acquire(ctx, k, acquire("b1", time.Minute, burst(1, 10)))
	if err != nil || g.Admitted || g.Reason != "burst" {
		t.Fatalf("a second call at the moment: %+v %v, want held: the moment frees one unit, and the refill counts from it", g, err)
	}
	time.Sleep(150 * time.Millisecond)
	if g, err := b.Acquire(ctx, k, acquire("b1", time.Minute, burst(1, 10))); err != nil || !g.Admitted {
		t.Fatalf("a call 150 ms after the moment at a refill of 10 a second: %+v %v, want admitted", g, err)
	}
}

// TestALaterStepsWordMovesTheMoment: the moment a word with Steps names is
// the last such word's, also when it is sooner than an earlier one's: a
// level emptied with its moment 2 s away, then told that it frees in
// 100 ms, refills from then at the Rate the requests give (10 a second).
func TestALaterStepsWordMovesTheMoment(t *testing.T) {
	t.Parallel()
	a, b, k := twoProcesses(t)
	ctx := context.Background()
	first, later := burst(0, 0), burst(0, 0)
	first.Reset, first.Steps = 2*time.Second, true
	later.Reset, later.Steps = 100*time.Millisecond, true
	take(t, a, k, "a0", []budgetstore.Level{burst(10, 0)}, first)
	take(t, a, k, "a1", nil, later)
	time.Sleep(400 * time.Millisecond)
	if g, err := b.Acquire(ctx, k, acquire("b0", time.Minute, burst(3, 10))); err != nil || !g.Admitted {
		t.Fatalf("a call of 3 400 ms after the later word: %+v %v, want admitted: the earlier word's moment (2 s) no longer binds", g, err)
	}
}
