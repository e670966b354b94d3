package budget

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

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
