package budget

import (
	"testing"
	"time"
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

// TestASpreadLevelRefillsInTheStore: a level spread with nothing left (its
// spread rate is then zero) is still sent to the shared store with a rate
// above zero: a bucket of the store that never refills would hold the
// key's calls in every process for good.
func TestASpreadLevelRefillsInTheStore(t *testing.T) {
	now := time.Now()
	l := documentedLevels()[Write]
	l.steps = true
	l.tokens = 0
	l.log.add(now, l.quota)
	if !l.spreads() {
		t.Fatal("the level is not spread")
	}
	sl := storeLevel(l, 1, now.Add(time.Second))
	if sl.Rate <= 0 || sl.Size != spreadBurst*l.quota {
		t.Errorf("the store's model of an empty spread level: %+v, want a rate above zero and a size of %v", sl, spreadBurst*l.quota)
	}
}
