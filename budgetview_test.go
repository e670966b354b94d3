package bodo

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// TestBudgetAndRateLimitTellOneStory: Budget lists the levels RateLimit
// lists, in its order, with the same quota, window, capacity and unit, and
// the server's last word as the status reported it; before any call it is
// the contract's, parallel and the key level's 600 points included.
func TestBudgetAndRateLimitTellOneStory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := sandboxClient(t, sandbox.New())
		before := c.Budget().Levels
		names := func(n int, name func(int) string) []string {
			out := make([]string, n)
			for i := range out {
				out[i] = name(i)
			}
			return out
		}
		want := []string{"key", "write", "parallel", "principal", "org", "delete", "delete-day", "egress"}
		if got := names(len(before), func(i int) string { return before[i].Name }); !slices.Equal(got, want) {
			t.Fatalf("levels before any call %v, want %v", got, want)
		}
		if k := before[0]; k.Capacity != 600 || k.Quota != 300 || !k.ReportedAt.IsZero() {
			t.Errorf("key level before any call: capacity %d, quota %d, reported at %v; want the contract's 600 and 300, not reported", k.Capacity, k.Quota, k.ReportedAt)
		}
		if p := before[2]; p.Quota != 6 || p.Remaining != 6 {
			t.Errorf("parallel before any call: quota %d, remaining %v; want 6 and 6", p.Quota, p.Remaining)
		}

		st, err := c.RateLimit(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		after := c.Budget().Levels
		if got, want := names(len(after), func(i int) string { return after[i].Name }), names(len(st.Policies), func(i int) string { return st.Policies[i].Name }); !slices.Equal(got, want) {
			t.Fatalf("Budget lists %v, RateLimit %v", got, want)
		}
		for i, p := range st.Policies {
			l := after[i]
			if l.Unit != p.Unit || l.Quota != p.Quota || l.Window != p.Window || l.Capacity != p.Capacity {
				t.Errorf("%s: Budget says %s %d per %v, capacity %d; RateLimit %s %d per %v, capacity %d",
					p.Name, l.Unit, l.Quota, l.Window, l.Capacity, p.Unit, p.Quota, p.Window, p.Capacity)
			}
			if p.Name != "parallel" && (l.ReportedRemaining != float64(p.Remaining) || l.ReportedReset != p.Reset || l.ReportedAt.IsZero()) {
				t.Errorf("%s: Budget reports %v left, full in %v at %v; RateLimit said %d and %v",
					p.Name, l.ReportedRemaining, l.ReportedReset, l.ReportedAt, p.Remaining, p.Reset)
			}
		}
		if org := after[4]; org.Share != 0.5 {
			t.Errorf("org share %v, want this key's half", org.Share)
		}
	})
}
