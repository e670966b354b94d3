package budget

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/ops"
)

// TestACallThatCanNeverFitADocumentedLevelFailsAtOnce: a budgeted write
// bigger than the write level can ever hold fails at once, unsent, with a
// NeverFitsError; the same call outside the budget takes from no level and
// goes.
func TestACallThatCanNeverFitADocumentedLevelFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		big := func() *Call {
			return &Call{Op: "huge", Cost: 1, Demand: []Demand{{Level: Write, Amount: 1e6}}, Target: "POST /v1/huge", Budgeted: true}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		var never *NeverFitsError
		if _, _, err := s.Admit(ctx, big()); !errors.As(err, &never) || never.Level != Write || never.Amount != 1e6 {
			t.Errorf("a write of a million units: %v, want a NeverFitsError of the write level", err)
		}
		c := big()
		c.Budgeted = false
		tk, _, err := s.Admit(context.Background(), c)
		if err != nil {
			t.Fatalf("the same call outside the budget: %v", err)
		}
		tk.Finish(answer("", ""))
	})
}

// writesSpent is a learned state whose write log frees the whole write
// quota a minute from now.
func writesSpent(t *testing.T) *State {
	t.Helper()
	s := learned(t)
	s.Spend(Write, 0)
	return s
}

// failsAtOnce admits c under ctx, checks that Admit came back at once and
// returns its error.
func failsAtOnce(t *testing.T, s *State, ctx context.Context, c *Call) error {
	t.Helper()
	start := time.Now()
	_, _, err := s.Admit(ctx, c)
	if el := time.Since(start); el != 0 {
		t.Errorf("it failed after %v, want at once", el)
	}
	return err
}

// holdTooLong admits c, which must fail at once with ErrHoldTooLong, and
// returns what held it and for how long.
func holdTooLong(t *testing.T, s *State, c *Call) (string, time.Duration) {
	t.Helper()
	err := failsAtOnce(t, s, context.Background(), c)
	var he *HoldError
	if !errors.As(err, &he) || !errors.Is(err, ErrHoldTooLong) {
		t.Errorf("%s: %v, want ErrHoldTooLong", c.Op, err)
		return "", 0
	}
	return he.Reason, he.Wait
}

// TestAnExhaustedQuotaFailsItsCallsAtOnce: after a QUOTA_EXHAUSTED, a call
// of the operation it refused fails at once with an ExhaustedError instead
// of being sent to be refused again.
func TestAnExhaustedQuotaFailsItsCallsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := getsExhausted(t, "monthly-reads")
		var ex *ExhaustedError
		if err := failsAtOnce(t, s, context.Background(), call(ops.GetContact, "")); !errors.As(err, &ex) || ex.Policy != "monthly-reads" {
			t.Errorf("a get after its quota was exhausted: %v, want an ExhaustedError of monthly-reads", err)
		}
	})
}

// TestAnUnbudgetedCallTakesFromNoLevel: a call outside the budget leaves
// every level, the in-flight count and the pace as they were.
func TestAnUnbudgetedCallTakesFromNoLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		key, writes := availableOf(s, Key), availableOf(s, Write)
		tk, _, err := s.Admit(context.Background(), unbudgeted(ops.CreateContact))
		if err != nil {
			t.Fatal(err)
		}
		if k, w, n := availableOf(s, Key), availableOf(s, Write), s.Snapshot().InFlight; k != key || w != writes || n != 0 {
			t.Errorf("an unbudgeted write in flight: key %v (was %v), write %v (was %v), %d budgeted in flight", k, key, w, writes, n)
		}
		tk.Finish(answer("", ""))
	})
}

// TestAnAdmissionSaysHowLongItsCallWasHeld: the Event of a write held a
// minute by the write level says so; that of a call that went at once
// says nothing.
func TestAnAdmissionSaysHowLongItsCallWasHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		tk, ev, err := s.Admit(context.Background(), call(ops.GetContact, ""))
		if err != nil {
			t.Fatal(err)
		}
		tk.Finish(answer("", ""))
		if ev != (Event{}) {
			t.Errorf("a read that went at once: %+v, want no wait", ev)
		}
		s.Spend(Write, 0) // the write log frees the whole quota a minute from now
		tk, ev, err = s.Admit(context.Background(), call(ops.CreateContact, ""))
		if err != nil {
			t.Fatal(err)
		}
		tk.Finish(answer("", ""))
		if want := (Event{Wait: time.Minute, Reason: Write}); ev != want {
			t.Errorf("a write held by the write level: %+v, want %+v", ev, want)
		}
	})
}

// TestACallWhoseDeadlineFallsBeforeItsWaitEndsFailsAtOnce: a write with
// 10 s left of its context, held a minute by the write level, fails at
// once with the minute it had to wait, not at its deadline.
func TestACallWhoseDeadlineFallsBeforeItsWaitEndsFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := writesSpent(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := failsAtOnce(t, s, ctx, call(ops.CreateContact, ""))
		var h *HoldError
		if !errors.As(err, &h) || h.Reason != Write || h.Wait != time.Minute || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a write with 10 s to go held a minute: %v, want a HoldError of the write level's minute", err)
		}
	})
}

// TestACallWhoseDeadlineFallsBeforeItsWaitAsksForTheStatusFirst: a write
// whose deadline falls before the write level frees tells OnHeld, waits
// for what that started to end and looks again: the status showed room,
// and it goes.
func TestACallWhoseDeadlineFallsBeforeItsWaitAsksForTheStatusFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := writesSpent(t)
		var told []string
		c := call(ops.CreateContact, "")
		c.OnHeld = func(reason string) <-chan struct{} {
			told = append(told, reason)
			done := make(chan struct{})
			go func() {
				time.Sleep(time.Second) // the status's round trip
				s.Spend(Write, 60)
				close(done)
			}()
			return done
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		tk, _, err := s.Admit(ctx, c)
		if err != nil {
			t.Fatalf("a write whose status showed room: %v", err)
		}
		tk.Finish(answer("", ""))
		if el := time.Since(start); el != time.Second || len(told) != 1 || told[0] != Write {
			t.Errorf("the write went after %v, told %q, want after the status's second, told once of the write level", el, told)
		}
	})
}

// slowWaits admits c in a goroutine of wg, finished with a plain answer,
// and returns what its OnSlow said.
func slowWaits(t *testing.T, s *State, wg *sync.WaitGroup, c *Call) *[]SlowWait {
	said := new([]SlowWait)
	var mu sync.Mutex
	c.OnSlow = func(_ context.Context, sw SlowWait) {
		mu.Lock()
		*said = append(*said, sw)
		mu.Unlock()
	}
	admitLater(t, s, wg, c)
	return said
}

// saysOnceAfterARefusal answers a call of op with refused, then admits
// another call of op, held by that refusal's wait, and checks that its
// OnSlow said want, once; held says what holds it.
func saysOnceAfterARefusal(t *testing.T, op *ops.Operation, refused Answer, want SlowWait, held string) {
	t.Helper()
	s := learned(t)
	admitNow(t, s, call(op, "")).Finish(refused)
	var wg sync.WaitGroup
	said := slowWaits(t, s, &wg, call(op, ""))
	wg.Wait()
	if len(*said) != 1 || (*said)[0] != want {
		t.Errorf("%s said %+v, want once %+v", held, *said, want)
	}
}

// TestASlowCallHeldByTheServersWaitSaysWhatIsLeftOfIt: a read held by an
// OVERLOADED's 30 s wait says, after SlowAfter, that the server's wait
// holds it for 25 s more; one held for a slot in flight cannot tell how
// long it waits.
func TestASlowCallHeldByTheServersWaitSaysWhatIsLeftOfIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		saysOnceAfterARefusal(t, ops.GetContact, refusal(http.StatusServiceUnavailable, codeOverloaded, "", 30*time.Second),
			SlowWait{Op: "getContact", Reason: ReasonServer, Waited: SlowAfter, Remaining: 30*time.Second - SlowAfter}, "a read held by the server's wait")
	})
}

// TestASlowCallCountsTheCallsAheadOfIt: of three 50-point calls held by an
// empty key bucket refilling 5 points a second, each says it waits for
// the calls ahead of it too: 10 s a call.
func TestASlowCallCountsTheCallsAheadOfIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer("", `"key";r=600;t=0`))
		s.Spend(Key, 0)
		var wg sync.WaitGroup
		var said []*[]SlowWait
		for range 3 {
			said = append(said, slowWaits(t, s, &wg, &Call{Op: "big", Cost: 50, Demand: []Demand{{Level: Key, Amount: 50}}, Budgeted: true}))
		}
		wg.Wait()
		for i, got := range said {
			want := SlowWait{Op: "big", Reason: Key, Waited: SlowAfter, Remaining: time.Duration(i+1)*10*time.Second - SlowAfter, Behind: 2 - i}
			if len(*got) != 1 || (*got)[0] != want {
				t.Errorf("call %d said %+v, want once %+v", i, *got, want)
			}
		}
	})
}

// TestASlowCallSaysTheRefusalsWaitOnItsLevel: a write held by a refusal's
// 30 s wait on the write level says, after SlowAfter, that the write level
// holds it 25 s more.
func TestASlowCallSaysTheRefusalsWaitOnItsLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		saysOnceAfterARefusal(t, ops.CreateContact, refusal(http.StatusTooManyRequests, codeRateLimited, Write, 30*time.Second),
			SlowWait{Op: "createContact", Reason: Write, Waited: SlowAfter, Remaining: 30*time.Second - SlowAfter}, "a write held by a refusal's wait")
	})
}

// TestASlowCallBehindMoreThanItsLevelHoldsSaysHowLongTheRefillTakes: a
// write behind a minute's worth of writes, more than the write level's
// log frees, says it waits at least as long as they do, not that it
// cannot tell.
func TestASlowCallBehindMoreThanItsLevelHoldsSaysHowLongTheRefillTakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := writesSpent(t)
		var wg sync.WaitGroup
		for range 60 {
			admitLater(t, s, &wg, call(ops.CreateContact, ""))
		}
		said := slowWaits(t, s, &wg, call(ops.CreateContact, ""))
		wg.Wait()
		if len(*said) != 1 || (*said)[0].Reason != Write || (*said)[0].Remaining < time.Minute-SlowAfter {
			t.Errorf("the 61st write said %+v, want once the write level and at least the %v the writes ahead wait", *said, time.Minute-SlowAfter)
		}
	})
}

// TestAStatusCountsTheWritesAnsweredBeforeIt: a write admitted after a
// status request and answered before it may have reached the server after
// the status did: a status that says the write level is full leaves it
// one write short, as the model counted it.
func TestAStatusCountsTheWritesAnsweredBeforeIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		status := statusCall()
		asked := admitNow(t, s, status)
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", ""))
		asked.Finish(answer("", ""))
		s.ObserveStatus(status, []LevelStatus{{Name: Write, Remaining: 60}})
		if got := availableOf(s, Write); got != 59 {
			t.Errorf("the write level after a status that did not count the write: %v left, want 59", got)
		}
	})
}

// TestAHintlessLimiterCountsRequestsOfWhatTheFirstCallsCost: a bare 429
// to a key's first call, of 10 points, paces requests at the key level's
// rate of points over those 10 points, not over a mean that starts at
// nothing.
func TestAHintlessLimiterCountsRequestsOfWhatTheFirstCallsCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		tk := admitNow(t, s, &Call{Op: "ten", Cost: 10, Demand: []Demand{{Level: Key, Amount: 10}}, Budgeted: true})
		tk.Finish(Answer{Status: http.StatusTooManyRequests, Header: http.Header{}, Problem: &Problem{}})
		s.mu.Lock()
		got, want := s.pace.requestRate, s.levels[Key].rate(time.Now())/10
		s.mu.Unlock()
		if got != want {
			t.Errorf("the limiter's rate after a bare 429 to a 10-point call: %v requests a second, want %v", got, want)
		}
	})
}

// panickingStore is a store whose Acquire panics.
type panickingStore struct{ downStore }

func (*panickingStore) Acquire(context.Context, string, budgetstore.Acquire) (budgetstore.Grant, error) {
	panic("a store that panics")
}

// TestACallWhoseStorePanicsFails: a panic of the shared store's Acquire
// fails the call with a PanicError, instead of letting it go on the local
// budget as a store that failed would.
func TestACallWhoseStorePanicsFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		s.UseStore(&panickingStore{}, "k", nil)
		var p *PanicError
		if _, _, err := s.Admit(context.Background(), call(ops.GetContact, "")); !errors.As(err, &p) || p.Where != PanicStore {
			t.Errorf("a read through a store that panics: %v, want a PanicError of the store", err)
		}
		time.Sleep(rejoinWindow + 2*keepEvery) // the keeper ends the lease the store may have granted, and ends
	})
}

// TestACallOnAStateRetiredWhileItWaitedForTheLockGoesOnTheKeysNewState:
// a state of For retired by a sweep between Admit finding it live and
// taking its lock passes the call on to the key's state in the map, which
// counts it; the retired one counts nothing. It runs outside a bubble: the
// call is left a moment to reach the lock, which a bubble cannot wait for.
func TestACallOnAStateRetiredWhileItWaitedForTheLockGoesOnTheKeysNewState(t *testing.T) {
	const host = "retiring.admit.test"
	s := For(host, "k")
	s.mu.Lock()
	type admitted struct {
		tk  *Ticket
		err error
	}
	got := make(chan admitted, 1)
	go func() {
		tk, _, err := s.Admit(context.Background(), call(ops.GetContact, ""))
		got <- admitted{tk, err}
	}()
	time.Sleep(20 * time.Millisecond) // the call has found s live and waits for its lock
	retireAsSweepDoes(s)
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer a.tk.Finish(answer("", ""))
	s.mu.Lock()
	left := s.reserved
	s.mu.Unlock()
	if cur := For(host, "k"); a.tk.s != cur || cur == s || left != 0 {
		t.Errorf("a call admitted on the retired state (%d reserved there), not the key's state in the map", left)
	}
}
