package sandbox

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
	"github.com/dunglas/httpsfv"
)

func TestProfilesServe(t *testing.T) {
	var names []string
	for _, p := range Profiles() {
		names = append(names, p.Name)
		if p.Summary == "" {
			t.Errorf("%s has no summary", p.Name)
		}
		if got, ok := ProfileByName(p.Name); !ok || got.Name != p.Name {
			t.Errorf("ProfileByName(%q)", p.Name)
		}
		t.Run(p.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newTester(t, p.New())
				r := c.do("GET", "/v1/me", nil)
				for r.status == http.StatusServiceUnavailable { // the overloaded profile
					r = c.do("GET", "/v1/me", nil)
				}
				r.want(t, http.StatusOK)
				pol, err := httpsfv.UnmarshalList(r.header.Values("RateLimit-Policy"))
				if err != nil {
					t.Fatalf("RateLimit-Policy %q: %v", r.header.Values("RateLimit-Policy"), err)
				}
				want := int64(p.Limits.withDefaults().KeyQuota)
				if p.Name == "contradicted-headers" {
					want = 0
				}
				for _, m := range pol {
					if it := m.(httpsfv.Item); it.Value == "key" {
						if q, _ := it.Params.Get("q"); q != want {
							t.Errorf("key q=%v, want %d", q, want)
						}
					}
				}
				if _, err := httpsfv.UnmarshalList(r.header.Values("RateLimit")); err != nil {
					t.Errorf("RateLimit %q: %v", r.header.Values("RateLimit"), err)
				}
			})
		})
	}
	for _, want := range []string{"documented", "small-plan", "big-plan", "sliding-log", "fixed-window", "sliding-log-far", "noisy-headers",
		"search-policy", "overloaded", "foreign-90", "narrowest-all", "contradicted-headers", "gateway"} {
		if !slices.Contains(names, want) {
			t.Errorf("no profile %q", want)
		}
	}
	if _, ok := ProfileByName("nope"); ok {
		t.Error("ProfileByName found nope")
	}
}

func TestProfileAllowance(t *testing.T) {
	for _, tc := range []struct {
		profile string
		d       time.Duration
		want    int
	}{
		{"documented", time.Hour, 600 + 300*60},
		{"documented", 90 * time.Second, 600 + 450},
		{"small-plan", time.Hour, 300 + 150*60},
		{"big-plan", 10 * time.Minute, 1200 + 6000},
		{"sliding-log", 90 * time.Second, 600},
		{"fixed-window", time.Hour, 300 * 60},
		{"fixed-window", time.Minute + time.Millisecond, 600},
		{"foreign-90", time.Minute, 1200 + 600},        // the key binds at first
		{"foreign-90", time.Hour, 3000 + (50-45)*3600}, // then the org
	} {
		p, _ := ProfileByName(tc.profile)
		if got := p.Allowance(tc.d); got != tc.want {
			t.Errorf("%s.Allowance(%v) = %d, want %d", tc.profile, tc.d, got, tc.want)
		}
	}
	p, _ := ProfileByName("foreign-90-greedy")
	if got := p.AllowanceLeft(2*time.Minute, 5000); got != 1000 {
		t.Errorf("foreign-90-greedy with 5000 points foreign in 2 minutes: %d, want 3000×2-5000", got)
	}
	if got := p.AllowanceLeft(2*time.Minute, 1000); got != 2400 {
		t.Errorf("foreign-90-greedy with 1000 points foreign in 2 minutes: %d, want the key's 1200+600×2", got)
	}
	p = Profile{Limits: Limits{Shape: SlidingLog}, Foreign: 25}
	if got := p.Allowance(2 * time.Minute); got != 600 {
		t.Errorf("a sliding-log org with half its quota foreign: %d, want min(600, 1500×2)", got)
	}
	p.Foreign = 45
	if got := p.Allowance(2 * time.Minute); got != 600 {
		t.Errorf("a sliding-log org with 90 %% foreign: %d, want 300×2", got)
	}
}

// TestProfilesAllowanceIsWhatAGreedyKeyGets: a key that calls whenever
// WouldAccept says yes gets its AllowanceAt one point a request (against a
// greedy foreign load its AllowanceLeft), never more.
func TestProfilesAllowanceIsWhatAGreedyKeyGets(t *testing.T) {
	const d = 20 * time.Minute
	for _, p := range Profiles() {
		t.Run(p.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// One caller at a time takes far less than a level
				// allows at round trips of hundreds of milliseconds:
				// the allowance is the levels', measured without them.
				s := p.New(WithJitteredLatency(0, 0))
				c := newTester(t, s)
				end := time.Now().Add(d)
				var got int
				var foreign float64
				for time.Now().Before(end) {
					for s.WouldAccept(TestKey, "getMe", nil) {
						if r := c.do("GET", "/v1/me", nil); r.status != http.StatusOK {
							r.wantProblem(t, http.StatusServiceUnavailable, codeOverloaded)
							break
						}
					}
					// Read within d: a foreign take at d itself is the next window's.
					got, foreign = s.Stats(TestKey).PointsAccepted, s.ForeignTaken()
					time.Sleep(time.Second)
				}
				want := p.AllowanceAt(d, 1)
				if p.Greedy {
					want = p.AllowanceLeft(d, foreign)
				}
				if got > want || float64(got) < 0.99*float64(want) {
					t.Errorf("a greedy key got %d points in %v, Allowance says %d (the foreign key took %v)", got, d, want, foreign)
				}
			})
		})
	}
}

// benchmarkMix mirrors Mix of internal/agents: the share of each kind of
// call, its operation, whether it searches (q) and the records it reads.
var benchmarkMix = []struct {
	share   float64
	op      string
	q       bool
	records float64
}{
	{0.30, "getContact", false, 1},
	{0.10, "listContacts", false, 5},
	{0.10, "listContacts", true, 5},
	{0.10, "countContacts", false, 1},
	{0.12, "createContact", false, 0},
	{0.08, "updateContact", false, 0},
	{0.04, "deleteContact", false, 0},
	{0.08, "createInvoice", false, 0},
	{0.08, "payInvoice", false, 0},
}

// TestProfilesKeyLevelBinds: for the benchmark mix, every level other than
// the key (and the org for foreign-90, the principal beside a Peer) allows
// at least 1.3 times what the
// profile's Allowance implies, over runs of 2, 10 and 60 minutes; a gateway
// in front allows less than the key.
func TestProfilesKeyLevelBinds(t *testing.T) {
	const margin = 1.3
	var points, writes, deletes, records float64
	for _, m := range benchmarkMix {
		op, _ := ops.ByID(m.op)
		q := url.Values{}
		if m.q {
			q.Set("q", "agent-01")
		}
		d := opDemand(op, q.Get)
		points += m.share * d.points
		writes += m.share * float64(d.writes)
		deletes += m.share * float64(d.deletes)
		records += m.share * m.records
	}
	if points < 3.9 || points > 4.1 || writes != 0.4 || deletes != 0.04 || records < 1.39 || records > 1.41 {
		t.Fatalf("the mix is %.2f points, %.2f writes, %.2f deletes, %.2f records a call", points, writes, deletes, records)
	}
	for _, p := range Profiles() {
		s := p.New()
		lim := s.lim
		for _, d := range []time.Duration{2 * time.Minute, 10 * time.Minute, time.Hour} {
			allowed := float64(p.Allowance(d))
			if p.Gateway.Rate > 0 && float64(p.AllowanceAt(d, points)) >= allowed {
				t.Errorf("%s over %v: the gateway lets %d points through, the key %.0f", p.Name, d, p.AllowanceAt(d, points), allowed)
			}
			calls := allowed / points
			level := func(name string, quota, capacity float64, window time.Duration, sh Shape, need float64) {
				if got := levelAllowance(sh, quota, capacity, window, d); got < margin*need {
					t.Errorf("%s over %v: %s allows %.0f, the mix needs %.0f (×%.1f)", p.Name, d, name, got, need, margin)
				}
			}
			level("write", float64(lim.WriteQuota), float64(lim.WriteQuota), lim.Window, lim.shapeOf(policyWrite), calls*writes)
			level("delete", float64(lim.DeleteQuota), float64(lim.DeleteQuota), lim.Window, lim.shapeOf(policyDelete), calls*deletes)
			level("delete-day", float64(lim.DeleteDayQuota), 0, lim.DayLength, FixedWindow, calls*deletes)
			level("egress", float64(lim.EgressQuota), 0, lim.EgressWindow, FixedWindow, calls*records)
			if !p.Peer {
				level("principal", float64(lim.PrincipalQuota), float64(lim.PrincipalQuota), lim.Window, lim.shapeOf(policyPrincipal), allowed)
			}
			share := lim.OrgKeyShare * float64(lim.OrgQuota)
			level("org share", share, share, lim.Window, lim.shapeOf(policyOrg), allowed)
			if p.Foreign == 0 {
				level("org", float64(lim.OrgQuota), float64(lim.OrgQuota), lim.Window, lim.shapeOf(policyOrg), allowed)
			}
			for i := range s.extras {
				x := &s.extras[i]
				if !x.Enforced {
					continue
				}
				var need float64
				for _, m := range benchmarkMix {
					op, _ := ops.ByID(m.op)
					query := func(string) string { return map[bool]string{true: "agent-01"}[m.q] }
					if x.covers(op, query) {
						n := 1.0
						if x.Unit == unitPoints {
							n = float64(op.CostFor(query))
						}
						need += calls * m.share * n
					}
				}
				if need == 0 {
					t.Errorf("%s: %s covers nothing of the mix", p.Name, x.Name)
				}
				level(x.Name, float64(x.Quota), float64(x.Quota), x.Window, x.Shape, need)
			}
		}
		if p.Foreign > 0 {
			key := Profile{Limits: p.Limits}
			if p.Allowance(time.Hour) >= key.Allowance(time.Hour) {
				t.Errorf("%s: over an hour the org does not bind: %d, the key alone %d", p.Name, p.Allowance(time.Hour), key.Allowance(time.Hour))
			}
		}
	}
}

func TestOverloadedProfile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := ProfileByName("overloaded")
		var seqs [2][]int
		for i := range seqs {
			s := p.New(WithLimits(Limits{KeyQuota: 1 << 20, KeyCapacity: 1 << 20, PrincipalQuota: 1 << 20, OrgQuota: 1 << 21}))
			c := newTester(t, s)
			for range 2000 {
				r := c.do("GET", "/v1/me", nil)
				seqs[i] = append(seqs[i], r.status)
				if r.status == http.StatusOK {
					continue
				}
				pr := r.wantProblem(t, http.StatusServiceUnavailable, codeOverloaded)
				if ms, _ := pr["retryAfterMs"].(float64); ms < 300 || ms > 3000 || r.header.Values("Retry-After") != nil {
					t.Fatalf("retryAfterMs %v, Retry-After %q", pr["retryAfterMs"], r.header.Values("Retry-After"))
				}
			}
			if n := s.Stats(TestKey).Refusals[codeOverloaded]; n < 60 || n > 140 {
				t.Errorf("%d of 2000 requests overloaded, want about 5 %%", n)
			}
		}
		if !slices.Equal(seqs[0], seqs[1]) {
			t.Error("two servers of the profile overload different requests")
		}
	})
}

func TestSearchPolicyProfile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := ProfileByName("search-policy")
		c := newTester(t, p.New())
		time.Sleep(10 * time.Second)
		for range 30 {
			c.do("GET", "/v1/contacts?q=x", nil).want(t, http.StatusOK)
		}
		wantWait(t, c.do("GET", "/v1/contacts/count?q=x", nil), "bodo-search", 60000)
		c.do("GET", "/v1/contacts/count", nil).want(t, http.StatusOK)
		time.Sleep(time.Minute)
		c.do("GET", "/v1/contacts/count?q=x", nil).want(t, http.StatusOK)
	})
}

func TestLimitFactor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Given before the profile's limits, it still scales them, the
		// profile's own policy and the foreign load.
		p, _ := ProfileByName("search-policy")
		c := newTester(t, p.New(WithLimitFactor(2.5), WithForeignLoad(100)))
		var st rateLimitJSON
		c.do("GET", "/v1/rate_limit", nil).want(t, http.StatusOK).decode(t, &st)
		want := map[string][2]int{ // quota, capacity (0: none reported)
			"key": {750, 1500}, "write": {150, 0}, "parallel": {15, 0}, "principal": {3000, 0}, "org": {7500, 0},
			"delete": {25, 0}, "delete-day": {750, 0}, "egress": {25000, 0}, "bodo-search": {75, 0},
		}
		for _, pol := range st.Policies {
			w, ok := want[pol.Name]
			if !ok || pol.Quota != w[0] || w[1] != 0 && (pol.Capacity == nil || *pol.Capacity != w[1]) {
				t.Errorf("%s: %+v, want quota %d capacity %d", pol.Name, pol, w[0], w[1])
			}
			delete(want, pol.Name)
		}
		if len(want) != 0 {
			t.Errorf("not reported: %v", want)
		}
		// ForeignKey spends 100×2.5 points/s of the org's 7500/min (125/s):
		// after 40 s the org holds about 7500 − 40×125 = 2500, below the
		// key's share of 3750 (unscaled, the load would leave it full).
		time.Sleep(40 * time.Second)
		c.do("GET", "/v1/rate_limit", nil).want(t, http.StatusOK).decode(t, &st)
		if i := slices.IndexFunc(st.Policies, func(p policyJSON) bool { return p.Name == "org" }); i < 0 ||
			st.Policies[i].Remaining < 2490 || st.Policies[i].Remaining > 2500 {
			t.Errorf("org after 40 s: %+v", st.Policies)
		}
	})
	for _, f := range []float64{0, -1, MaxLimitFactor * 2} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(WithLimitFactor(%g)) did not panic", f)
				}
			}()
			New(WithLimitFactor(f))
		}()
	}
}

// TestWithSeed: a server's seeded choices (OVERLOADED answers, noisy
// headers, late foreign takes) follow WithSeed, wherever it comes among the
// options, and are the options' own without it.
func TestWithSeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := WithLimits(Limits{KeyQuota: 1 << 20, KeyCapacity: 1 << 20, PrincipalQuota: 1 << 20, OrgQuota: 1 << 21})
		answers := func(name string, opts ...Option) []string {
			p, _ := ProfileByName(name)
			c := newTester(t, p.New(append([]Option{big}, opts...)...))
			var seq []string
			for range 300 {
				r := c.do("GET", "/v1/me", nil)
				seq = append(seq, fmt.Sprint(r.status, r.header.Values("RateLimit"), r.header.Values("RateLimit-Policy")))
			}
			return seq
		}
		lateness := func(opts ...Option) []time.Duration {
			s := New(opts...)
			var seq []time.Duration
			for range 100 {
				seq = append(seq, s.cfg.late())
			}
			return seq
		}
		late := WithLateForeignLoad(6*time.Millisecond, 1)
		for _, tc := range []struct {
			what       string
			a, b, none func() any
		}{
			{"overloaded answers",
				func() any { return answers("overloaded", WithSeed(7)) },
				func() any { return answers("overloaded", WithSeed(7)) },
				func() any { return answers("overloaded") }},
			{"noisy headers",
				func() any { return answers("noisy-headers", WithSeed(7)) },
				func() any { return answers("noisy-headers", WithSeed(7)) },
				func() any { return answers("noisy-headers") }},
			{"late takes",
				func() any { return lateness(late, WithSeed(7)) },
				func() any { return lateness(WithSeed(7), late) },
				func() any { return lateness(late) }},
		} {
			a, b, none := tc.a(), tc.b(), tc.none()
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s: two servers of seed 7 differ", tc.what)
			}
			if reflect.DeepEqual(a, none) {
				t.Errorf("%s: seed 7 makes the same choices as none", tc.what)
			}
			if again := tc.none(); !reflect.DeepEqual(none, again) {
				t.Errorf("%s: two servers without a seed differ", tc.what)
			}
		}
	})
}
