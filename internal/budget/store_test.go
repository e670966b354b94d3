package budget

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// TestSharesAddUpToTheKeysLimits: however many processes share a key, the
// parts of a limit that fall to their places add up to the limit, and no
// two places' parts differ by more than one.
func TestSharesAddUpToTheKeysLimits(t *testing.T) {
	for _, total := range []int{1, 6, 25, 100} {
		for n := 1; n <= 64; n++ {
			sum, lo, hi := 0, total, 0
			for rank := range n {
				p := shareOf(total, n, rank)
				sum += p
				lo, hi = min(lo, p), max(hi, p)
			}
			if sum != total || hi-lo > 1 || lo < 0 {
				t.Errorf("%d over %d processes: parts add up to %d, from %d to %d", total, n, sum, lo, hi)
			}
		}
	}
}

// TestTheStoreGetsTheLevelsAsTheProcessModelsThem: a write level that showed
// it frees in steps goes to the store without a refill, bounded by the
// key's log; the key level, a documented bucket, keeps its refill and is
// not spread when a process read a drained bucket's t as a step's.
func TestTheStoreGetsTheLevelsAsTheProcessModelsThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", `"key";r=200;t=80, "write";r=55;t=60`))
		now := time.Now()
		w := storeLevel(s.levels[Write], 1, now)
		if w.Rate != 0 || w.Quota != 60 || w.Window != time.Minute {
			t.Errorf("the write level for the store: %+v, want no refill and a log of 60 a minute", w)
		}
		k := pacedLevel(s.levels[Key], 1, now)
		if !s.levels[Key].steps || k.Rate != 5 || k.Quota != 300 || k.Window != time.Minute || k.Pace != 0 {
			t.Errorf("the key level for the store (steps %v): %+v, want a refill of 5 a second, a log of 300 a minute and no spread", s.levels[Key].steps, k)
		}
	})
}
