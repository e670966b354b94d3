package budget

import "testing"

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
