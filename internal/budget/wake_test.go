package budget

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// The tests that a call a gate holds goes as soon as what held it ends, not
// at the next answer that happens to wake the gate.

// TestASlotWaiterGoesWhenTheCutCapStepsUp: a refusal that names no level
// cuts the calls in flight to 3; with 3 slow calls out, a 4th waits, and
// goes once the cap steps back up (about a second), not when a slow call
// ends a minute later.
func TestASlotWaiterGoesWhenTheCutCapStepsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		admitNow(t, s, call(ops.GetMe, "")).Finish(refusal(http.StatusTooManyRequests, codeRateLimited, "", 100*time.Millisecond))
		time.Sleep(100 * time.Millisecond)
		var slow []*Ticket
		for range 3 {
			tk, _ := admitAt(t, s, call(ops.GetMe, ""))
			slow = append(slow, tk)
		}
		var wg sync.WaitGroup
		var went time.Duration
		goLater(t, s, &wg, call(ops.GetMe, ""), &went)
		time.Sleep(time.Minute)
		for _, tk := range slow {
			tk.Finish(answer("", ""))
		}
		wg.Wait()
		if went > 2*time.Second {
			t.Errorf("the 4th call went after %v", went)
		}
	})
}

// TestAnUnbudgetedCallIsNotQueuedBehindTheServersWait: an OVERLOADED's
// wait holds the budgeted calls only; a call without a budget that comes
// while one of them waits goes at once.
func TestAnUnbudgetedCallIsNotQueuedBehindTheServersWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		admitNow(t, s, call(ops.GetMe, "")).Finish(refusal(http.StatusServiceUnavailable, codeOverloaded, "", 30*time.Second))
		var wg sync.WaitGroup
		var budgeted time.Duration
		goLater(t, s, &wg, call(ops.GetMe, ""), &budgeted)
		tk, waited := admitAt(t, s, unbudgeted(ops.GetMe))
		tk.Finish(answer("", ""))
		wg.Wait()
		if waited > 0 {
			t.Errorf("the call without a budget waited %v", waited)
		}
		if budgeted < 30*time.Second {
			t.Errorf("the budgeted call went after %v, within the server's wait", budgeted)
		}
	})
}

// TestSlowStartEndedByAnUnbudgetedAnswerWakesTheSlots: the key's first
// budgeted call is out alone; the answer to a call without a budget ends
// slow start, and a budgeted call that waited for a slot goes then, not
// when the first call answers.
func TestSlowStartEndedByAnUnbudgetedAnswerWakesTheSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		first := admitNow(t, s, call(ops.GetMe, ""))
		untk := admitNow(t, s, unbudgeted(ops.GetMe))
		var wg sync.WaitGroup
		var went time.Duration
		goLater(t, s, &wg, call(ops.GetMe, ""), &went)
		time.Sleep(time.Second)
		untk.Finish(answer("", ""))
		time.Sleep(20 * time.Second)
		first.Finish(answer("", ""))
		wg.Wait()
		if went > 2*time.Second {
			t.Errorf("the second budgeted call went after %v", went)
		}
	})
}

// TestAnUnbudgetedCallGoesWhenTheLockoutEnds: a lockout holds every call
// and the server's longer wait only the budgeted ones; a call without a
// budget queued behind a budgeted one goes when the lockout ends.
func TestAnUnbudgetedCallGoesWhenTheLockoutEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		locked, overloaded := admitNow(t, s, call(ops.GetMe, "")), admitNow(t, s, call(ops.GetMe, ""))
		locked.Finish(refusal(http.StatusTooManyRequests, codeRateLimited, Lockout, time.Minute))
		overloaded.Finish(refusal(http.StatusServiceUnavailable, codeOverloaded, "", 2*time.Minute))
		var wg sync.WaitGroup
		var budgeted, un time.Duration
		goLater(t, s, &wg, call(ops.GetMe, ""), &budgeted)
		goLater(t, s, &wg, unbudgeted(ops.GetMe), &un)
		wg.Wait()
		if un != time.Minute || budgeted < 2*time.Minute {
			t.Errorf("the call without a budget went after %v, the budgeted one after %v; want 1m0s and 2m0s or more", un, budgeted)
		}
	})
}

// TestACallHeldToKeepThePromiseGoesWhenThePromiseRunsOut: on a key level
// of 20 points a minute that frees this key's takes a window later, 7-point
// searches answered at 0 s and 20 s and a 2-point list in flight at 30 s
// leave 4. A 10-point delete that comes then waits for the first search to
// leave, at 60 s; a 2-point list behind it would make it wait for the
// second, at 80 s, past the promise the first call that may pass gives it
// (60 s and a quarter of its 30 s wait: 67.5 s), and is held. The list in
// flight is answered at 31 s with r=0: others took the 4, and the delete
// waits for 80 s whatever the list behind it does. When the promise runs
// out, the delete looks again and lets the list try, which passes it then,
// 37.5 s after it came, not with the delete at 80 s; the delete still goes
// at 80 s.
func TestACallHeldToKeepThePromiseGoesWhenThePromiseRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := keyOf20(t)
		s.Spend(Key, 20)
		search := func() *Call { return call(ops.ListContacts, "q=a") }
		admitNow(t, s, search()).Finish(answer("", ""))
		time.Sleep(20 * time.Second)
		admitNow(t, s, search()).Finish(answer("", ""))
		time.Sleep(10 * time.Second)
		inFlight := admitNow(t, s, call(ops.ListContacts, ""))
		var wg sync.WaitGroup
		var del, list time.Duration
		goLater(t, s, &wg, call(ops.DeleteContact, ""), &del)
		goLater(t, s, &wg, call(ops.ListContacts, ""), &list)
		if b := s.Snapshot(); b.Waiting != 2 {
			t.Fatalf("%d waiting at 30 s, want the delete and the list behind it", b.Waiting)
		}
		time.Sleep(time.Second)
		inFlight.Finish(answer("", `"key";r=0;t=60`))
		wg.Wait()
		if list < 37500*time.Millisecond || list > 37500*time.Millisecond+10*time.Millisecond {
			t.Errorf("the list behind the delete went %v after it came, want once the delete's promise ran out, 37.5 s", list)
		}
		if del != 50*time.Second {
			t.Errorf("the delete went %v after it came, want 50 s, when the second search leaves the window", del)
		}
	})
}

// TestTheFirstWaiterCallsPassGoesAtItsMomentWithoutTheirAnswers: behind a
// create that waits for an org the others keep full (orgPacedToThree: 3
// left, no refill while answers name it), three gets pass it one by one as
// the org's spread lets them, about 0.4 s apart, and a list comes last.
// No answer comes until every call went, so nothing but the gates' own
// wakes moves them: each get that goes wakes the next of its size as it
// leaves the queue, the create looks again on its own timer when the
// reserve lapses, 7.5 s after the last answer, and goes 0.2 s later, when
// the refill back at the org's 25 points a second brings its 5; the list,
// first once the create went, waits for the create's answer as the others
// do for a call that goes once the reserve lapsed, at most an eighth of the
// window, and goes at 15.28 s with its 2 points. A call that passes the
// first waiter only delays it, so the first need not look again when one
// does.
func TestTheFirstWaiterCallsPassGoesAtItsMomentWithoutTheirAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := orgPacedToThree(t)
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		went := map[string][]time.Duration{}
		answers := make(chan struct{}) // none until every call went
		later := func(what string, c *Call) {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				tk, _, err := s.Admit(ctx, c)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				went[what] = append(went[what], time.Since(start))
				mu.Unlock()
				<-answers
				tk.Finish(answer("", ""))
			})
			synctest.Wait()
		}
		later("create", call(ops.CreateContact, ""))
		for range 3 {
			later("get", call(ops.GetContact, ""))
		}
		later("list", call(ops.ListContacts, ""))
		time.Sleep(20 * time.Second)
		synctest.Wait()
		mu.Lock()
		gets, create, list := went["get"], went["create"], went["list"]
		mu.Unlock()
		if len(gets) != 3 || gets[2] > 1500*time.Millisecond {
			t.Errorf("the gets went at %v, want all three within 1.5 s", gets)
		}
		for i := 1; i < len(gets); i++ {
			if gap := gets[i] - gets[i-1]; gap > 450*time.Millisecond {
				t.Errorf("get %d went %v after the one before it, want about 0.4 s, as the spread lets it", i+1, gap)
			}
		}
		for _, c := range []struct {
			what string
			got  []time.Duration
			want time.Duration
		}{{"create", create, 7700 * time.Millisecond}, {"list", list, 15280 * time.Millisecond}} {
			if len(c.got) != 1 || c.got[0] < c.want || c.got[0] > c.want+10*time.Millisecond {
				t.Errorf("the %s went at %v, want %v", c.what, c.got, c.want)
			}
		}
		close(answers)
		wg.Wait()
	})
}
