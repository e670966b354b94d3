package agents

import (
	"time"

	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// Allowance is what one key may use in a run of d: the key bucket's capacity
// plus its quota over d, or, when another key of the organisation eats
// foreign points a second of the org budget, the org bucket plus what the
// org's refill leaves, if that is less.
func Allowance(d time.Duration, foreign float64, lim sandbox.Limits) int {
	secs := d.Seconds()
	key := float64(lim.KeyCapacity) + float64(lim.KeyQuota)*secs/lim.Window.Seconds()
	if foreign == 0 {
		return int(key)
	}
	org := float64(lim.OrgQuota) + (float64(lim.OrgQuota)/lim.Window.Seconds()-foreign)*secs
	return int(min(key, org))
}
