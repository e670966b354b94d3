package sandbox

import (
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestNarrowestAllProfile: the RateLimit of reads and writes that do not
// search names "search" once it is the key's narrowest level; a refusal
// names the level that refused.
func TestNarrowestAllProfile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := ProfileByName("narrowest-all")
		c := newTester(t, p.New())
		wantRL(t, c.do("GET", "/v1/me", nil).want(t, http.StatusOK), "key", 599, 1)
		for range 10 {
			c.do("GET", "/v1/contacts?q=x", nil).want(t, http.StatusOK)
		}
		// search holds 10 of 20, key 529 of 600.
		wantRL(t, c.do("GET", "/v1/me", nil).want(t, http.StatusOK), "search", 10, 60)
		wantRL(t, c.do("POST", "/v1/contacts", map[string]any{"name": "Ada"}).want(t, http.StatusCreated), "search", 10, 60)
		for range 10 {
			c.do("GET", "/v1/contacts/count?q=x", nil).want(t, http.StatusOK)
		}
		wantWait(t, c.do("GET", "/v1/contacts?q=x", nil), "search", 60000)
		wantRL(t, c.do("GET", "/v1/contacts/count", nil).want(t, http.StatusOK), "search", 0, 60)
		for range 59 {
			c.do("POST", "/v1/contacts", map[string]any{"name": "Bea"}).want(t, http.StatusCreated)
		}
		r := c.do("POST", "/v1/contacts", map[string]any{"name": "Cem"})
		wantWait(t, r, "write", 1000)
		if name, _, _ := r.rateLimit(t); name != "write" {
			t.Errorf("a write refusal's RateLimit names %s", name)
		}
		time.Sleep(time.Minute)
		if name, _, _ := c.do("GET", "/v1/me", nil).want(t, http.StatusOK).rateLimit(t); name != "key" {
			t.Errorf("a minute later RateLimit names %s, want key", name)
		}
	})
}

// TestContradictedHeadersProfile: every success says "key";q=0 and
// "key";r=0;t=0 while the levels are enforced as documented; a refusal
// and any other failure carry the true fields.
func TestContradictedHeadersProfile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := ProfileByName("contradicted-headers")
		c := newTester(t, p.New())
		contradicted := func(r *reply) {
			t.Helper()
			if pol, rl := r.header.Values("RateLimit-Policy"), r.header.Values("RateLimit"); !slices.Equal(pol, []string{`"key";q=0;w=60`}) ||
				!slices.Equal(rl, []string{`"key";r=0;t=0`}) {
				t.Errorf("a %d answers RateLimit-Policy %q, RateLimit %q", r.status, pol, rl)
			}
		}
		truthful := func(r *reply) {
			t.Helper()
			if q := policyItems(t, r.header)["key"].params["q"]; q != int64(300) {
				t.Errorf("a %d announces key q=%v", r.status, q)
			}
		}
		contradicted(c.do("GET", "/v1/me", nil).want(t, http.StatusOK))
		for range 60 {
			contradicted(c.do("POST", "/v1/contacts", map[string]any{"name": "Ada"}).want(t, http.StatusCreated))
		}
		r := c.do("POST", "/v1/contacts", map[string]any{"name": "Bea"})
		wantWait(t, r, "write", 1000)
		truthful(r)
		wantRL(t, r, "write", 0, 60)
		r = c.do("GET", "/v1/contacts/con_01JBD8Y3K5M7Q2W9X4Z6T1V0NP", nil).want(t, http.StatusNotFound)
		truthful(r)
		wantRL(t, r, "key", 298, 61)
		if got := c.points(); got != 1+300+1 {
			t.Errorf("%d points charged, want every success and the 404", got)
		}
	})
}

// TestGatewayProfile: the gateway lets 5 requests through at once and then
// one a second; what it refuses is a bare 429 that never reaches the API.
func TestGatewayProfile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := ProfileByName("gateway")
		s := p.New()
		c := newTester(t, s)
		for range 5 {
			c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		if s.WouldAccept(TestKey, "getMe", nil) {
			t.Error("WouldAccept with the gateway's bucket full")
		}
		r := c.do("GET", "/v1/me", nil).want(t, http.StatusTooManyRequests)
		if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" || string(r.body) != "Too Many Requests\n" {
			t.Errorf("Content-Type %q, body %q", ct, r.body)
		}
		for _, h := range []string{"Retry-After", "RateLimit", "RateLimit-Policy", "Request-Id", "Bodo-Version"} {
			if v := r.header.Values(h); v != nil {
				t.Errorf("the gateway's 429 has %s %q", h, v)
			}
		}
		time.Sleep(999 * time.Millisecond)
		c.do("GET", "/v1/me", nil).want(t, http.StatusTooManyRequests)
		time.Sleep(time.Millisecond)
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		// 200 refusals in a minute reach no lockout: the API never sees them.
		for range 200 {
			c.do("GET", "/v1/me", nil).want(t, http.StatusTooManyRequests)
		}
		time.Sleep(5 * time.Second)
		for range 5 {
			c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		st := s.Stats(TestKey)
		if st.Requests != 11 || st.GatewayRefused != 202 || st.Lockouts != 0 || len(st.Refusals) != 0 || st.PointsAccepted != 11 {
			t.Errorf("stats %+v", st)
		}
		if got, want := p.Gateway.Allowance(2*time.Minute), 5+120; got != want {
			t.Errorf("the gateway's Allowance over 2 min is %d, want %d", got, want)
		}
		if got := p.AllowanceAt(2*time.Minute, 4); got != 4*125 {
			t.Errorf("AllowanceAt(2 min, 4 points a request) = %d, want 4 × 125", got)
		}
		if got := p.AllowanceAt(2*time.Minute, 20); got != p.Allowance(2*time.Minute) {
			t.Errorf("AllowanceAt(2 min, 20 points a request) = %d, want the key's %d", got, p.Allowance(2*time.Minute))
		}
	})
}

// TestTheGatewaysRefusalTakesTheLatency: the gateway is on the way to the
// server, so its refusal takes as long as any answer. Answered at once, a
// client that resends a 429 at once never let the bubble's clock move.
func TestTheGatewaysRefusalTakesTheLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithGateway(Gateway{Rate: 1, Burst: 1}), WithLatency(30*time.Millisecond)))
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		start := time.Now()
		c.do("GET", "/v1/me", nil).want(t, http.StatusTooManyRequests)
		if took := time.Since(start); took != 30*time.Millisecond {
			t.Errorf("the gateway's refusal took %v, want the latency, 30ms", took)
		}
	})
}

func TestGatewayScalesWithTheLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithGateway(Gateway{Rate: 1, Burst: 2}), WithLimitFactor(3)))
		for range 6 {
			c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		c.do("GET", "/v1/me", nil).want(t, http.StatusTooManyRequests)
		time.Sleep(time.Second)
		for range 3 {
			c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
	})
	for _, g := range []Gateway{{}, {Rate: 1}, {Burst: 1}, {Rate: -1, Burst: 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(WithGateway(%+v)) did not panic", g)
				}
			}()
			New(WithGateway(g))
		}()
	}
}

// TestTwoKeysAllowanceIsWhatThePrincipalLeaves: beside its peer, a key of
// the two-keys profiles may have what the principal let through less what
// the peer took, when that is less than its own key level's.
func TestTwoKeysAllowanceIsWhatThePrincipalLeaves(t *testing.T) {
	for name, want := range map[string]int{
		"two-keys":     400 + 2*400 - 300, // a bucket holding its quota
		"two-keys-log": 2*400 - 300,       // a sliding log: its quota a window
	} {
		p, _ := ProfileByName(name)
		if !p.Peer {
			t.Errorf("%s runs no peer", name)
		}
		if got := p.AllowanceBeside(2*time.Minute, 300); got != want {
			t.Errorf("%s: AllowanceBeside(2 min, 300 taken by the peer) = %d, want %d", name, got, want)
		}
		if got := p.AllowanceBeside(2*time.Minute, 0); got != min(want+300, p.Allowance(2*time.Minute)) {
			t.Errorf("%s: AllowanceBeside(2 min, 0) = %d, want the lesser of the principal's and the key's", name, got)
		}
	}
}
