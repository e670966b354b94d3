package sandbox

import (
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// wantRL checks the RateLimit field of r: one member, name, r and t.
func wantRL(t *testing.T, r *reply, name string, rem, reset int64) {
	t.Helper()
	if n, got, gotT := r.rateLimit(t); n != name || got != rem || gotT != reset {
		t.Errorf("RateLimit %s r=%d t=%d, want %s r=%d t=%d", n, got, gotT, name, rem, reset)
	}
}

// wantWait checks that r is refused by policy with retryAfterMs ms.
func wantWait(t *testing.T, r *reply, policy string, ms int64) {
	t.Helper()
	if _, got := r.wantRefusal(t, codeRateLimited, policy); got != ms {
		t.Errorf("retryAfterMs %d, want %d", got, ms)
	}
}

func TestShapeTokenBucketCapacityNotTwiceTheQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{KeyQuota: 60, KeyCapacity: 5, Shape: TokenBucket})))
		var last *reply
		for range 5 {
			last = c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		wantRL(t, last, "key", 0, 5)
		wantWait(t, c.do("GET", "/v1/me", nil), "key", 1000)
		time.Sleep(999 * time.Millisecond)
		wantWait(t, c.do("GET", "/v1/me", nil), "key", 1)
		time.Sleep(time.Millisecond)
		wantRL(t, c.do("GET", "/v1/me", nil).want(t, http.StatusOK), "key", 0, 5)
	})
}

func TestShapeFixedWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{KeyQuota: 10, Shape: FixedWindow})))
		var st rateLimitJSON
		c.do("GET", "/v1/rate_limit", nil).want(t, http.StatusOK).decode(t, &st)
		if k, w := st.Policies[0], st.Policies[1]; k.Remaining != 9 || k.ResetSeconds != 60 || *k.Capacity != 10 ||
			w.Remaining != 60 || w.ResetSeconds != 0 {
			t.Errorf("key %+v, write %+v: want r=9 t=60 capacity 10, and an unused window with t=0", k, w)
		}
		time.Sleep(20 * time.Second)
		wantRL(t, c.do("GET", "/v1/me", nil).want(t, http.StatusOK), "key", 8, 40)
		var last *reply
		for range 8 {
			last = c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		wantRL(t, last, "key", 0, 40)
		r := c.do("GET", "/v1/me", nil)
		wantWait(t, r, "key", 40000)
		wantRL(t, r, "key", 0, 40)
		time.Sleep(40*time.Second - time.Millisecond)
		wantWait(t, c.do("GET", "/v1/me", nil), "key", 1)
		time.Sleep(time.Millisecond)
		wantRL(t, c.do("GET", "/v1/contacts", nil).want(t, http.StatusOK), "key", 8, 60)
	})
}

func TestShapeSlidingLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{KeyQuota: 10, KeyCapacity: 1000, Shapes: map[string]Shape{policyKey: SlidingLog}})))
		r := c.do("GET", "/v1/me", nil).want(t, http.StatusOK) // 1 unit at 0s
		wantRL(t, r, "key", 9, 60)
		time.Sleep(10 * time.Second)
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK) // 1 unit at 10s
		time.Sleep(10 * time.Second)
		var last *reply
		for range 8 { // 8 units at 20s
			last = c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		wantRL(t, last, "key", 0, 40) // the unit of 0s leaves at 60s
		r = c.do("GET", "/v1/me", nil)
		wantWait(t, r, "key", 40000)
		wantRL(t, r, "key", 0, 40)
		wantWait(t, c.do("GET", "/v1/contacts", nil), "key", 50000) // 2 points: the unit of 10s must leave too
		time.Sleep(40*time.Second - time.Millisecond)
		wantWait(t, c.do("GET", "/v1/me", nil), "key", 1)
		time.Sleep(time.Millisecond)
		wantRL(t, c.do("GET", "/v1/me", nil).want(t, http.StatusOK), "key", 0, 10) // at 60s; next out: 10s's at 70s
		// 2 points at 60s: counted are 10s (1), 20s (8), 60s (1); the 20s units leave at 80s.
		wantWait(t, c.do("GET", "/v1/contacts", nil), "key", 20000)
		time.Sleep(20*time.Second - time.Millisecond)
		wantWait(t, c.do("GET", "/v1/contacts", nil), "key", 1)
		time.Sleep(time.Millisecond)
		wantRL(t, c.do("GET", "/v1/contacts", nil).want(t, http.StatusOK), "key", 7, 40) // 60s's unit leaves at 120s
	})
}

// TestShapeSlidingLogCountsOnlyItsOwnTakes: a call that takes nothing
// from a sliding log (a read, of the write level) leaves no entry there,
// so t names when the oldest write leaves, not when that read would.
func TestShapeSlidingLogCountsOnlyItsOwnTakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{WriteQuota: 2, Shapes: map[string]Shape{policyWrite: SlidingLog}})))
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK) // no write at 0s
		time.Sleep(10 * time.Second)
		c.createContact("a") // a write at 10s
		time.Sleep(10 * time.Second)
		// And one at 20s: the write of 10s leaves at 70s.
		r := c.do("POST", "/v1/contacts", map[string]any{"name": "b"}).want(t, http.StatusCreated)
		wantRL(t, r, "write", 0, 50)
	})
}

// TestShapeSlidingLogUntilFull: the same log, but t says when the newest
// counted unit leaves, so every take moves it to a whole window, and a
// refusal still waits for the oldest.
func TestShapeSlidingLogUntilFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{KeyQuota: 10, KeyCapacity: 1000, Shapes: map[string]Shape{policyKey: SlidingLogUntilFull}})))
		wantRL(t, c.do("GET", "/v1/me", nil).want(t, http.StatusOK), "key", 9, 60) // 1 unit at 0s
		time.Sleep(10 * time.Second)
		var last *reply
		for range 9 { // 9 units at 10s
			last = c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		wantRL(t, last, "key", 0, 60) // full again when the units of 10s leave, at 70s
		time.Sleep(20 * time.Second)
		r := c.do("GET", "/v1/me", nil)
		wantWait(t, r, "key", 30000) // the unit of 0s leaves at 60s
		wantRL(t, r, "key", 0, 40)
	})
}

func TestShapeSlidingWindowCounter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{KeyQuota: 10, Shape: SlidingWindow})))
		time.Sleep(30 * time.Second)
		var last *reply
		for range 10 {
			last = c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		// Estimate 10 in window [0,60). One more unit fits when
		// 10×(1−x) ≤ 9 in the next window: x = 0.1, at 66s.
		wantRL(t, last, "key", 0, 36)
		wantWait(t, c.do("GET", "/v1/me", nil), "key", 36000)
		time.Sleep(36*time.Second - time.Millisecond)
		wantWait(t, c.do("GET", "/v1/me", nil), "key", 1)
		time.Sleep(time.Millisecond)
		// At 66s: 10×0.9 + 1 = 10; one more unit when 10×(1−x) + 1 ≤ 9, x = 0.2, at 72s.
		wantRL(t, c.do("GET", "/v1/me", nil).want(t, http.StatusOK), "key", 0, 6)
		// 2 points need 10×(1−x) + 1 ≤ 8: x = 0.3, at 78s.
		wantWait(t, c.do("GET", "/v1/contacts", nil), "key", 12000)
		time.Sleep(12*time.Second - time.Millisecond)
		wantWait(t, c.do("GET", "/v1/contacts", nil), "key", 1)
		time.Sleep(time.Millisecond)
		// At 78s: 10×0.7 + 3 = 10; one more when 10×(1−x) + 3 ≤ 9, x = 0.4, at 84s.
		wantRL(t, c.do("GET", "/v1/contacts", nil).want(t, http.StatusOK), "key", 0, 6)
		var st rateLimitJSON
		time.Sleep(60 * time.Second)
		// At 138s: window [120,180) is empty, [60,120) held 3: estimate 3×(1−18/60) = 2.1.
		c.do("GET", "/v1/rate_limit", nil).want(t, http.StatusOK).decode(t, &st)
		// After this call (1 unit): 2.1 + 1 = 3.1, r = 6; one more when 3×(1−x) + 1 ≤ 3.0, x = 1/3, at 140s.
		if k := st.Policies[0]; k.Remaining != 6 || k.ResetSeconds != 2 {
			t.Errorf("key %+v, want r=6 t=2", k)
		}
	})
}

// TestShapesOfOtherLevels: write, delete, principal and org take their
// shape from Shapes.
func TestShapesOfOtherLevels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := Limits{WriteQuota: 2, PrincipalQuota: 30, DeleteQuota: 1, Shapes: map[string]Shape{
			policyWrite: FixedWindow, policyPrincipal: SlidingLog, policyDelete: SlidingWindow, policyOrg: FixedWindow}}
		c := newTester(t, New(WithLimits(lim)))
		time.Sleep(45 * time.Second)
		id := c.createContact("S")
		wantRL(t, c.do("POST", "/v1/contacts", `{"name":"S"}`).want(t, http.StatusCreated), "write", 0, 15)
		wantWait(t, c.do("POST", "/v1/contacts", `{"name":"S"}`), "write", 15000)
		// One delete in [0,60): at 60s+x the estimate is 1−x; it is 0 at 120s.
		second := c.as(SecondKey) // a delete is a write too; SecondKey has writes left
		wantRL(t, second.do("DELETE", "/v1/contacts/"+id, nil).want(t, http.StatusNoContent), "delete", 0, 75)
		wantWait(t, second.do("DELETE", "/v1/contacts/"+id, nil), "delete", 75000)
		for range 9 { // principal 30 points: 5+5+10+9 = 29
			c.as(SecondKey).do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		wantWait(t, c.do("GET", "/v1/me", nil), "principal", 60000)
	})
}

// TestForeignLoadOnWindowShapes: a window-shaped org leaves the key its
// quota less the foreign load of a window.
func TestForeignLoadOnWindowShapes(t *testing.T) {
	for _, sh := range []Shape{FixedWindow, SlidingLog, SlidingWindow} {
		t.Run(string(sh), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := Limits{OrgQuota: 60, OrgKeyShare: 1, Shape: sh}
				c := newTester(t, New(WithLimits(lim), WithForeignLoad(0.5)))
				time.Sleep(30 * time.Second)
				var last *reply
				for range 30 {
					last = c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
				}
				if name, rem, _ := last.rateLimit(t); name != "org" || rem != 0 {
					t.Errorf("RateLimit %s r=%d, want org r=0", name, rem)
				}
				want := map[Shape]int64{FixedWindow: 30000, SlidingLog: 60000, SlidingWindow: 32000}[sh]
				r := c.do("GET", "/v1/me", nil)
				wantWait(t, r, "org", want)
				time.Sleep(time.Duration(want-1) * time.Millisecond)
				wantWait(t, c.do("GET", "/v1/me", nil), "org", 1)
				time.Sleep(time.Millisecond)
				c.do("GET", "/v1/me", nil).want(t, http.StatusOK)

				// A foreign load of the whole quota leaves nothing, ever.
				c = newTester(t, New(WithLimits(lim), WithForeignLoad(1)))
				wantWait(t, c.do("GET", "/v1/me", nil), "org", 60000)
			})
		})
	}
}

// TestGreedyForeignLoadCompetesForWhatFrees: a greedy foreign load takes its
// chunk once a second when it fits, leaves what does not fit to the others,
// and takes back what frees when it is there first.
func TestGreedyForeignLoadCompetesForWhatFrees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := New(WithLimits(Limits{OrgQuota: 60, OrgKeyShare: 1, Shape: SlidingLog}), WithGreedyForeignLoad(25))
		c := newTester(t, srv)
		time.Sleep(2500 * time.Millisecond) // chunks at 0 s and 1 s; at 2 s 10 are left, too few
		for range 10 {
			c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "org")
		if got := srv.ForeignTaken(); got != 50 {
			t.Errorf("foreign took %v by 2.5 s, want 50", got)
		}
		time.Sleep(58 * time.Second) // its own chunks free at 60 s and 61 s, and it takes them back
		c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "org")
		time.Sleep(2 * time.Second) // what this key took at 2.5 s frees at 62.5 s, fewer than a chunk
		for range 10 {
			c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		if got := srv.ForeignTaken(); got != 100 {
			t.Errorf("foreign took %v by 62.5 s, want 100", got)
		}
		if got := srv.OrgTakenByWindow(); !slices.Equal(got, []float64{60, 60}) {
			t.Errorf("the org's takes by minute %v, want [60 60]: 50 of the foreign load and 10 of this key in each", got)
		}
		if got := New().OrgTakenByWindow(); got != nil {
			t.Errorf("an org without a greedy foreign load counts takes by window: %v", got)
		}
	})
}

// TestDrainingForeignLoadTakesWhatIsLeft: a draining foreign load takes
// as much of its chunk as the org holds, so nothing is left to the others
// where a greedy one would leave what is too little for it.
func TestDrainingForeignLoadTakesWhatIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := New(WithLimits(Limits{OrgQuota: 60, OrgKeyShare: 1, Shape: SlidingLog}), WithDrainingForeignLoadEvery(25, time.Second))
		c := newTester(t, srv)
		time.Sleep(2500 * time.Millisecond) // chunks at 0 s and 1 s; at 2 s the 10 left
		c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "org")
		if got := srv.ForeignTaken(); got != 60 {
			t.Errorf("foreign took %v by 2.5 s, want 60", got)
		}
	})
}

func TestKeyCapacityAndBigQuotas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := Limits{KeyQuota: 600, KeyCapacity: 900, PrincipalQuota: 500_000, OrgQuota: 1_000_000, EgressQuota: 1_000_000,
			WriteQuota: 100_000, DeleteDayQuota: 1_000_000}
		c := newTester(t, New(WithLimits(lim)))
		r := c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		wantRL(t, r, "key", 899, 1)
		items, err := parseSFList(r.header.Values("RateLimit-Policy"))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{"key": 600, "write": 100_000, "principal": 500_000, "org": 1_000_000, "delete-day": 1_000_000, "egress": 1_000_000}
		for _, it := range items {
			if q, ok := want[it.name]; ok && it.params["q"] != q {
				t.Errorf("%s q=%v, want %d", it.name, it.params["q"], q)
			}
		}
		var st rateLimitJSON
		c.do("GET", "/v1/rate_limit", nil).want(t, http.StatusOK).decode(t, &st)
		if k := st.Policies[0]; k.Quota != 600 || *k.Capacity != 900 || k.Remaining != 898 {
			t.Errorf("key %+v", k)
		}
		for range 898 {
			c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		wantWait(t, c.do("GET", "/v1/me", nil), "key", 100)
	})
}

// TestLateForeignLoadMeetsItsEarlierTake: a take lands as late as drawn
// once for its tick, and stays in a sliding log until a window after it
// landed, so the tick a window on, on time, finds it still there and a
// draining load takes nothing; what it left is free until its next tick.
func TestLateForeignLoadMeetsItsEarlierTake(t *testing.T) {
	start := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	draws := 0
	g := &greedy{
		limiter: newLimiter(SlidingLog, 25, 25, time.Minute, start, start, 0),
		chunk:   25, every: time.Second, next: start, drain: true,
		late: func() time.Duration {
			if draws++; draws == 1 {
				return 10 * time.Millisecond
			}
			return 0
		},
	}
	g.advance(start.Add(5 * time.Millisecond))
	g.advance(start.Add(9 * time.Millisecond))
	if g.taken != 0 || draws != 1 {
		t.Fatalf("by 9 ms took %v in %d draws, want 0 in 1: the first take lands at 10 ms", g.taken, draws)
	}
	g.advance(start.Add(60*time.Second + 500*time.Millisecond))
	if g.taken != 25 || g.remaining() != 25 {
		t.Errorf("at 60.5 s took %v and the org holds %d, want 25 and 25: the tick at 60 s came before the take of 0.01 s left", g.taken, g.remaining())
	}
	g.advance(start.Add(61 * time.Second))
	if g.taken != 50 || g.remaining() != 0 {
		t.Errorf("at 61 s took %v and the org holds %d, want 50 and 0", g.taken, g.remaining())
	}
}

// TestWithLateForeignLoadDraws: the lateness is under late, the same for
// the same seed, and none for a late of zero.
func TestWithLateForeignLoadDraws(t *testing.T) {
	draws := func(late time.Duration, seed uint64) []time.Duration {
		var c config
		WithLateForeignLoad(late, seed)(&c)
		if c.late == nil {
			return nil
		}
		d := make([]time.Duration, 1000)
		for i := range d {
			d[i] = c.late()
		}
		return d
	}
	a, b, other := draws(6*time.Millisecond, 1), draws(6*time.Millisecond, 1), draws(6*time.Millisecond, 2)
	for _, d := range a {
		if d < 0 || d >= 6*time.Millisecond {
			t.Fatalf("drew %v, want under 6ms", d)
		}
	}
	if !slices.Equal(a, b) || slices.Equal(a, other) {
		t.Error("the draws do not follow the seed")
	}
	if draws(0, 1) != nil {
		t.Error("a late of zero draws a lateness")
	}
}
