package bodo

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

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

// TestBudgetSaysWhatTheModelHolds: Budget's Capacity, Remaining, Share and
// FullIn tell one story, also where the server showed a level other than
// the contract's:
//   - a status that says the key level holds its quota and no more (a
//     fixed window, a sliding log): Capacity 300, not the contract's 600;
//   - a refusal of the key level whose wait the contract's bucket would
//     never ask: once the level is full again, Remaining is its Capacity
//     and FullIn 0;
//   - principal and org levels two keys of this process split: each key's
//     Share is its part, and once idle, the level is full.
func TestBudgetSaysWhatTheModelHolds(t *testing.T) {
	for _, sh := range []sandbox.Shape{sandbox.FixedWindow, sandbox.SlidingLog} {
		t.Run(fmt.Sprint(sh), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := sandbox.DefaultLimits()
				lim.Shape = sh
				c := sandboxClient(t, sandbox.New(sandbox.WithLimits(lim)))
				st, err := c.RateLimit(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if k := c.Budget().Levels[0]; k.Capacity != st.Policies[0].Capacity {
					t.Errorf("the key level's Capacity %d, where the status said %v", k.Capacity, st.Policies[0])
				}
			})
		})
	}
	t.Run("refused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			first := true
			srv := sandbox.New(sandbox.WithFaults(func(r *http.Request) sandbox.Fault {
				if r.URL.Path == "/v1/contacts" && first {
					first = false
					return sandbox.Fault{RateLimited: "key", RetryAfter: 2 * time.Second}
				}
				return sandbox.Fault{}
			}))
			c := sandboxClient(t, srv, WithMaxRetries(0))
			if _, err := c.Contacts.List(context.Background(), nil); err == nil {
				t.Fatal("want the fault's 429")
			}
			time.Sleep(3 * time.Minute)
			if k := c.Budget().Levels[0]; k.FullIn != 0 || k.Remaining != float64(k.Capacity) {
				t.Errorf("the key level 3 minutes after a refusal: Remaining %v of Capacity %d, FullIn %v; want it full", k.Remaining, k.Capacity, k.FullIn)
			}
		})
	})
	t.Run("split", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := sandbox.New()
			base := uniqueBaseURL()
			a, b := sandboxClient(t, srv, WithBaseURL(base)), sandboxClient(t, srv, WithBaseURL(base), WithAPIKey(sandbox.SecondKey))
			for _, c := range []*Client{a, b, a} {
				if _, err := c.Contacts.List(context.Background(), nil); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Second) // the keys' identities, asked beside the calls, are in
			for _, l := range a.Budget().Levels {
				if want := map[string]float64{"principal": 0.5, "org": 0.25}[l.Name]; want > 0 && l.Share != want {
					t.Errorf("%s split by two keys: Share %v, want %v", l.Name, l.Share, want)
				}
			}
			time.Sleep(5 * time.Minute)
			for _, l := range a.Budget().Levels {
				if (l.Name == "principal" || l.Name == "org") && (l.FullIn != 0 || l.Remaining != l.Share*float64(l.Capacity)) {
					t.Errorf("%s split by two keys, 5 idle minutes on: Remaining %v of Capacity %d, Share %v, FullIn %v; want it full",
						l.Name, l.Remaining, l.Capacity, l.Share, l.FullIn)
				}
			}
		})
	})
}
