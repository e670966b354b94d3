package budget

import (
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
