package budget

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// TestAWordAnsweredLateIsNoOtherKeysTake: on a sliding log of this key
// alone (the write level), x is sent at 0 s and answered at 0.1 s, so the
// model frees it at 60.1 s; the server counted it at about 0.05 s and
// frees it at 60.05 s. y is sent at 59.9 s, the server counts it at 60 s
// with x still in its window (r=58, full again when y leaves: t=60), and
// y's answer takes the long way back, arriving at 60.5 s, after the model
// freed x. That r is older than the log, not a take of another key's: by
// rule 1 the level of this key alone holds at least its quota less this
// key's own takes in the last window (only y), 59. Answered at once,
// before the model frees x, the same r leaves the level at 59 once x
// leaves the log. Read against the log as it stood when y was taken (Call.freedSince),
// the late r shows no take of another's.
func TestAWordAnsweredLateIsNoOtherKeysTake(t *testing.T) {
	const policy = `"key";q=300;w=60, "write";q=60;w=60`
	for _, late := range []bool{false, true} {
		name := map[bool]string{false: "answered at once", true: "answered late"}[late]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New()
				start := time.Now()
				at := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }
				x := admitNow(t, s, call(ops.CreateContact, ""))
				at(100 * time.Millisecond)
				x.Finish(answer(policy, `"write";r=59;t=60`))
				at(59900 * time.Millisecond)
				y := admitNow(t, s, call(ops.CreateContact, ""))
				if late {
					at(60500 * time.Millisecond)
				} else {
					at(60000 * time.Millisecond)
				}
				y.Finish(answer(policy, `"write";r=58;t=60`))
				at(61 * time.Second)
				if l, _ := levelOf(s, Write); l.Remaining < 59 {
					t.Errorf("at 61 s the write level holds %g, want 59: only y of this key's takes is in the last window", l.Remaining)
				}
			})
		})
	}
}
