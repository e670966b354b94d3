package budget

import (
	"encoding/base64"
	"math"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
	"github.com/dunglas/httpsfv"
)

// policySeeds are RateLimit-Policy values: bodo's and the draft's own
// examples (draft-ietf-httpapi-ratelimit-headers), then odd but legal
// Structured Fields shapes (RFC 9651), then a few illegal ones.
var policySeeds = []string{
	// bodo-api.md and the sandbox.
	`"key";q=300;w=60, "org";q=3000;w=60`,
	`"key";q=300;w=60;qu="points", "write";q=60;w=60, "parallel";q=6;qu="concurrent-requests", "principal";q=1200;w=60;qu="points", "org";q=3000;w=60;qu="points", "delete";q=10;w=60, "delete-day";q=300;w=86400, "egress";q=10000;w=3600;qu="records"`,
	// The draft's examples.
	`"default";q=100;w=10`,
	`"burst";q=100;w=60,"daily";q=1000;w=86400`,
	`"permin";q=50;w=60,"perhr";q=1000;w=3600`,
	`"peruser";q=100;w=60;pk=:cHJvamVjdDEyMw==:`,
	`"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`,
	`"day";q=1000;w=86400;qu="requests"`,
	`"concurrent";q=5;qu="concurrent-requests"`,
	// Odd but legal: tokens, key and token characters, flags, other
	// parameter types, inner lists, duplicates, white space, extremes.
	`default;q=100;w=10`,
	`*star;q=1;w=1, a:b/c;q=2;w=2, x.y-z_0!#$%&'^|~+;q=3`,
	`"key";q=300;w=60;*x=1;a_b-c.d*=?0;flag`,
	`"key";q=300;w=60;pk=?1;d=1.5;s="s";t=tok;b=:AQID:;at=@1659578233;ds=%"f%c3%bc"`,
	`("a" "b");q=1, "c";q=2`,
	`();q=1, "d";q=4;w=5`,
	`"key";q=1;q=2;w=3;w=4`,
	`"key";q=1;w=1, "key";q=2;w=2`,
	`"";q=1`,
	`"a\"b\\c";q=1;w=1`,
	`"  spaced name  ";q=1;w=1`,
	`   "key";q=300;w=60   ,	"org";q=3000;w=60	`,
	`"key";q=0;w=0`,
	`"key";q=999999999999999;w=999999999999999`,
	`"key";q=300;w=9223372037`,
	`"key";q=300;w=18446744074`,
	`"hourly";q=5`,
	`"parallel";q=999999999999999;qu="concurrent-requests"`,
	`"parallel";q=0`,
	`"x";q=1;qu="concurrent-requests";w=60`,
	`"key";q=300;w=60;qu=""`,
	`"key";q=300;w=60;qu=points`,
	`1;q=1, 1.5;q=2, ?1;q=3, :AQ==:;q=4, @1;q=5, %"x";q=6`,
	``,
	` `,
	// Illegal: nothing is taken.
	`"key";q=300;w=60,`,
	`"key";q=-1;w=60`,
	`"key";q=1000000000000000`,
	`"key";Q=1`,
	`"key"; q=1`,
	`"k\ey";q=1`,
	"\"k\x7fy\";q=1",
	"\"k\u00fcy\";q=1",
}

// limitSeeds are RateLimit values, likewise.
var limitSeeds = []string{
	`"key";r=12;t=41`,
	`"default";r=50;t=30`,
	`"problemPolicy";r=0;t=10`,
	`"default";r=0;t=60`,
	`"permin";r=10;t=30;pk=:cHJvamVjdDEyMw==:, "perhr";r=900;t=1800`,
	`"key";r=0`,
	`key;r=1;t=2`,
	`"key";r=1;t=2;x;y=?0;z=@1;d=%"a"`,
	`"key";r=1;t=0`,
	`"key";r=999999999999999;t=999999999999999`,
	`"key";r=0;t=1`,
	`"org";r=100;t=100`,
	`"burst";r=3;t=1`,
	`"nosuch";r=1;t=1`,
	`"key";r=1;r=2;t=3;t=-4`,
	`"key";r=5, "key";r=3;t=7`,
	`("key");r=1`,
	`   "key";r=5;t=5	,	"org";r=1;t=1   `,
	`"key";r=-1`,
	`"key";r=1.0`,
	`"key";r=1;t=-1`,
	`"key";r=1;t="1"`,
	`"key";r=`,
	``,
}

// headerOf puts up to two field lines of name into a header; an empty
// second line is left out.
func headerOf(name, line1, line2 string) http.Header {
	h := http.Header{}
	h.Add(name, line1)
	if line2 != "" {
		h.Add(name, line2)
	}
	return h
}

// FuzzParsePolicyHeader: no panic; every policy taken has a name, a
// non-negative quota and window and a unit; the result is deterministic and
// survives a round trip through its canonical serialisation.
func FuzzParsePolicyHeader(f *testing.F) {
	for _, s := range policySeeds {
		f.Add(s, "")
	}
	f.Add(`"key";q=300;w=60`, `"egress";q=10000;w=3600;qu="records"`)
	f.Add(`"key";q=300;w=60`, `,`)
	f.Fuzz(func(t *testing.T, line1, line2 string) {
		h := headerOf("RateLimit-Policy", line1, line2)
		got := parsePolicyHeader(h)
		var list httpsfv.List
		for _, p := range got {
			if p.name == "" || p.quota < 0 || p.window < 0 || p.unit == "" {
				t.Fatalf("parsePolicyHeader(%q) took %+v", h.Values("RateLimit-Policy"), p)
			}
			params := httpsfv.NewParams()
			params.Add("q", p.quota)
			if p.window > 0 {
				params.Add("w", p.window)
			}
			params.Add("qu", p.unit)
			list = append(list, httpsfv.Item{Value: p.name, Params: params})
		}
		if again := parsePolicyHeader(h); !policiesEqual(got, again) {
			t.Fatalf("two parses differ: %+v and %+v", got, again)
		}
		canon, err := httpsfv.Marshal(list)
		if err != nil {
			t.Fatalf("what was parsed does not serialise: %+v: %v", got, err)
		}
		if back := parsePolicyHeader(http.Header{"Ratelimit-Policy": {canon}}); !policiesEqual(got, back) {
			t.Fatalf("round trip through %q: %+v, then %+v", canon, got, back)
		}
	})
}

func policiesEqual(a, b []policyHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzParseLimitHeader: like FuzzParsePolicyHeader for RateLimit: r is
// non-negative, t non-negative or -1 (absent).
func FuzzParseLimitHeader(f *testing.F) {
	for _, s := range limitSeeds {
		f.Add(s, "")
	}
	f.Add(`"key";r=12;t=41`, `"org";r=3;t=4`)
	f.Fuzz(func(t *testing.T, line1, line2 string) {
		h := headerOf("RateLimit", line1, line2)
		got := parseLimitHeader(h)
		var list httpsfv.List
		for _, l := range got {
			if l.name == "" || l.remaining < 0 || l.reset < -1 {
				t.Fatalf("parseLimitHeader(%q) took %+v", h.Values("RateLimit"), l)
			}
			params := httpsfv.NewParams()
			params.Add("r", l.remaining)
			if l.reset >= 0 {
				params.Add("t", l.reset)
			}
			if l.partition != "" {
				pk, err := base64.StdEncoding.DecodeString(l.partition)
				if err != nil {
					t.Fatalf("partition %q is no base64: %v", l.partition, err)
				}
				params.Add("pk", pk)
			}
			list = append(list, httpsfv.Item{Value: l.name, Params: params})
		}
		canon, err := httpsfv.Marshal(list)
		if err != nil {
			t.Fatalf("what was parsed does not serialise: %+v: %v", got, err)
		}
		back := parseLimitHeader(http.Header{"Ratelimit": {canon}})
		if len(back) != len(got) {
			t.Fatalf("round trip through %q: %+v, then %+v", canon, got, back)
		}
		for i := range got {
			if got[i] != back[i] {
				t.Fatalf("round trip through %q: %+v, then %+v", canon, got, back)
			}
		}
	})
}

// fuzzCalls are calls of every shape the budget knows, for the wait
// computation: a cheap read, a search, a list page, a write, a delete.
func fuzzCalls() []*Call {
	mk := func(op *ops.Operation, q url.Values) *Call {
		return &Call{Op: op.ID, Cost: float64(op.CostFor(q.Get)), Demand: DemandOf(op, q), Target: op.Method + " " + op.Path, Budgeted: true}
	}
	return []*Call{
		mk(ops.GetMe, url.Values{}),
		mk(ops.CountContacts, url.Values{"q": {"ada"}}),
		mk(ops.ListContacts, url.Values{"limit": {"100"}}),
		mk(ops.CreateContact, url.Values{}),
		mk(ops.DeleteContact, url.Values{}),
	}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// checkModel fails t when the model of s is not sane at now: every number
// finite, sizes, quotas, rates and windows non-negative (windows whole
// seconds: w is), no level believed to hold more than it can, the AIMD cap
// and pace in range.
func checkModel(t *testing.T, s *State, now time.Time, what string) {
	t.Helper()
	for name, l := range s.levels {
		vals := map[string]float64{
			"tokens": l.tokens, "quota": l.quota, "capacity": l.capacity, "share": l.share,
			"seenMax": l.seenMax, "observedRate": l.observedRate, "rate": l.rate(now),
			"grossRate": l.grossRate(), "size": l.size(), "log": l.log.sum, "inflight": l.inflight,
		}
		for k, v := range vals {
			if !finite(v) {
				t.Fatalf("%s: level %q: %s is %v", what, name, k, v)
			}
		}
		if l.size() < 0 || l.quota < 0 || l.rate(now) < 0 || l.grossRate() < 0 || l.observedRate < 0 || l.seenMax < 0 || l.log.sum < -1e-6 {
			t.Fatalf("%s: level %q negative: size %v quota %v rate %v gross %v observed %v seenMax %v log %v",
				what, name, l.size(), l.quota, l.rate(now), l.grossRate(), l.observedRate, l.seenMax, l.log.sum)
		}
		if l.window < 0 || l.window%time.Second != 0 {
			t.Fatalf("%s: level %q has a window of %v (w is whole seconds: the conversion overflowed)", what, name, l.window)
		}
		if a := l.available(now); a > l.size()+1e-6 {
			t.Fatalf("%s: level %q holds %v, more than its size %v", what, name, a, l.size())
		}
	}
	if s.pace.capOf(s.parallel) < 1 || s.parallel < 1 || !finite(s.pace.share) || s.pace.share <= 0 || s.pace.share > 1 {
		t.Fatalf("%s: parallel %d pace %v", what, s.parallel, s.pace.share)
	}
}

// FuzzObserveHeaders feeds arbitrary RateLimit-Policy and RateLimit values
// to the model, twice, some time apart, with a call in flight, and then asks
// it how long each kind of call would wait: no panic, the model stays sane
// (checkModel), so does what a shared store would be told, and no wait is
// negative.
func FuzzObserveHeaders(f *testing.F) {
	for i, p := range policySeeds {
		f.Add(p, limitSeeds[i%len(limitSeeds)], uint32(1500))
	}
	for _, l := range limitSeeds {
		f.Add(`"key";q=300;w=60;qu="points", "burst";q=50;w=10;qu="points"`, l, uint32(0))
	}
	f.Add(`"hourly";q=5`, `"hourly";r=0;t=3600`, uint32(60000))
	f.Add(`"key";q=0;w=60`, `"key";r=0;t=0`, uint32(1))
	f.Add(`"key";q=30;w=60`, `"key";r=500;t=20`, uint32(10000))
	f.Add(`"p";q=3;w=60`, `"p";r=1;t=20;pk=:AQ==:`, uint32(100))
	f.Fuzz(func(t *testing.T, policy, limit string, gapMs uint32) {
		s := New()
		now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		h := http.Header{}
		h.Set("RateLimit-Policy", policy)
		h.Set("RateLimit", limit)
		calls := fuzzCalls()

		s.mu.Lock()
		defer s.mu.Unlock()
		checkModel(t, s, now, "documented")
		// One create in flight, so that what is left is less than r.
		s.takeLocked(calls[3], time.Now())
		rel := &release{}
		s.observeLocked(calls[3], h, now, rel, true)
		checkModel(t, s, now, "after the first answer")
		later := now.Add(time.Duration(gapMs) * time.Millisecond)
		s.observeLocked(calls[1], h, later, rel, true)
		checkModel(t, s, later, "after the second answer")
		// What would go to a shared store is as sane as the model.
		for _, l := range rel.Left {
			if !finite(l.Amount) || !finite(l.Rate) || !finite(l.Size) || l.Amount < 0 || l.Rate < 0 || l.Size < 0 {
				t.Fatalf("shared release level %+v", l)
			}
		}
		for _, c := range calls[:3] {
			g, d, why := s.holdLocked(c, later)
			if d < 0 || g == nil && (why != "" || d != 0) {
				t.Fatalf("%s would wait %v (%q)", c.Op, d, why)
			}
		}
		checkModel(t, s, later, "after the waits")
	})
}

// FuzzLimitFastPath: whatever the fast path accepts, httpsfv parses to the
// same members.
func FuzzLimitFastPath(f *testing.F) {
	for _, s := range limitSeeds {
		f.Add(s)
	}
	f.Add(`"key";r=12;t=41, "write";t=3;r=0`)
	f.Add(`"a";r=1;r=2`)
	f.Add(`  "x-y_z.1";r=007`)
	f.Fuzz(func(t *testing.T, line string) {
		fast, ok := parseLimitFast(line, nil)
		if !ok {
			return
		}
		list, err := httpsfv.UnmarshalList([]string{line})
		if err != nil {
			t.Fatalf("the fast path took %q, which is no Structured Field list: %v", line, err)
		}
		var slow []limitHeader
		for _, m := range list {
			name, params, ok := namedItem(m)
			if !ok {
				t.Fatalf("%q: a member httpsfv does not take", line)
			}
			l := limitHeader{name: name, reset: -1}
			l.remaining, _ = intParam(params, "r", true)
			if _, has := params.Get("t"); has {
				l.reset, _ = intParam(params, "t", true)
			}
			slow = append(slow, l)
		}
		if len(slow) != len(fast) {
			t.Fatalf("%q: fast %+v, httpsfv %+v", line, fast, slow)
		}
		for i := range slow {
			if slow[i] != fast[i] {
				t.Fatalf("%q: fast %+v, httpsfv %+v", line, fast, slow)
			}
		}
	})
}
