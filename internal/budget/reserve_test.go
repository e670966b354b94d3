package budget

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// drainedOrgAnswer names the org with r left and a t that implies a refill
// slower than its quota's: a bucket others drain, which t counts as if no
// one took more.
func drainedOrgAnswer(r float64) Answer {
	return answer(`"org";q=3000;w=60`, fmt.Sprintf(`"org";r=%g;t=150`, r))
}

// TestABucketOthersDrainKeepsBackWhatTheyTookAtOnce (rule 2): of an org
// whose t implies a refill slower than its quota's, a bucket others drain,
// what they took at once between two answers a second apart is kept back
// as of a log they keep full: a key of another process that read the same
// r would take it too. A call that fits what is left only without the
// fall waits.
func TestABucketOthersDrainKeepsBackWhatTheyTookAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		get := func() *Call { return call(ops.GetContact, "") }
		admitNow(t, s, get()).Finish(drainedOrgAnswer(100))
		time.Sleep(time.Second)
		admitNow(t, s, get()).Finish(drainedOrgAnswer(40)) // this key took 1, the others 59 at once
		org := s.levels[Org]
		now := time.Now()
		if org.frees(now) {
			t.Fatalf("an org whose t implies %.1f points/s of its quota's %.1f frees what this key took", org.observedRate, org.grossRate())
		}
		if got := org.reserve(now); got < 58 || got > 60 {
			t.Errorf("the org keeps back %v after the others took 59 at once, want 59", got)
		}
		if why := held(s, get()); why != Org {
			t.Errorf("a call that fits the 40 left only with the others' fall of 59 kept back: held by %q, want org", why)
		}
	})
}
