package sandbox

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestKeyLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{KeyQuota: 60, KeyCapacity: 10})))
		var last *reply
		for range 10 {
			last = c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		if name, r, reset := last.rateLimit(t); name != "key" || r != 0 || reset != 10 {
			t.Errorf("RateLimit %s r=%d t=%d, want key r=0 t=10", name, r, reset)
		}
		r := c.do("GET", "/v1/me", nil)
		_, ms := r.wantRefusal(t, codeRateLimited, "key")
		if ms != 1000 {
			t.Errorf("retryAfterMs %d, want 1000 at 1 point/s", ms)
		}
		if name, rem, reset := r.rateLimit(t); name != "key" || rem != 0 || reset != 10 {
			t.Errorf("refusal RateLimit %s r=%d t=%d", name, rem, reset)
		}
		time.Sleep(999 * time.Millisecond)
		_, ms = c.do("GET", "/v1/contacts", nil).wantRefusal(t, codeRateLimited, "key")
		if ms != 1001 {
			t.Errorf("retryAfterMs %d for 2 points with 0.999 there, want 1001", ms)
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		c.do("GET", "/v1/contacts", nil).want(t, http.StatusOK)

		st := c.s.Stats(TestKey)
		if st.Requests != 13 || st.Accepted != 11 || st.Refusals[codeRateLimited] != 2 || st.PointsAccepted != 12 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestWriteLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{WriteQuota: 2})))
		r := c.do("POST", "/v1/contacts", `{"name":"W"}`).want(t, http.StatusCreated)
		if name, rem, reset := r.rateLimit(t); name != "write" || rem != 1 || reset != 30 {
			t.Errorf("RateLimit %s r=%d t=%d, want write r=1 t=30", name, rem, reset)
		}
		c.do("POST", "/v1/contacts", `{"name":"W"}`).want(t, http.StatusCreated)
		_, ms := c.do("POST", "/v1/contacts", `{"name":"W"}`).wantRefusal(t, codeRateLimited, "write")
		if ms != 30000 {
			t.Errorf("retryAfterMs %d, want 30000", ms)
		}
		c.do("GET", "/v1/contacts", nil).want(t, http.StatusOK)
		if c.s.ContactsNamed("W") != 2 {
			t.Error("refused write ran")
		}
	})
}

func TestParallelLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithLimits(Limits{Parallel: 2}), WithFaults(func(r *http.Request) Fault {
			if r.Header.Get("X-Slow") != "" {
				return Fault{Delay: time.Second}
			}
			return Fault{}
		}))
		c := newTester(t, s)
		var wg sync.WaitGroup
		replies := make([]*reply, 2)
		for i := range 2 {
			wg.Go(func() { replies[i] = c.do("GET", "/v1/me", nil, "X-Slow", "1") })
		}
		synctest.Wait()
		r := c.do("GET", "/v1/me", nil)
		_, ms := r.wantRefusal(t, codeRateLimited, "parallel")
		if ms < 100 || ms >= 1000 || r.header.Get("Retry-After") != "1" {
			t.Errorf("parallel wait %dms, Retry-After %s", ms, r.header.Get("Retry-After"))
		}
		if name, rem, _ := r.rateLimit(t); name != "parallel" || rem != 0 {
			t.Errorf("RateLimit %s r=%d", name, rem)
		}
		if st := s.Stats(TestKey); st.InFlight != 2 || st.MaxInFlight != 3 {
			t.Errorf("in flight %d, max %d", st.InFlight, st.MaxInFlight)
		}
		wg.Wait()
		full := 0
		for _, r := range replies {
			r.want(t, http.StatusOK)
			if name, rem, _ := r.rateLimit(t); name == "parallel" && rem == 0 {
				full++
			}
		}
		if full != 1 {
			t.Errorf("%d answers report the last parallel slot taken, want 1", full)
		}
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		c.as(SecondKey).do("GET", "/v1/me", nil).want(t, http.StatusOK)
		if st := s.Stats(TestKey); st.InFlight != 0 || st.Accepted != 3 {
			t.Errorf("stats after %+v", st)
		}
	})
}

func TestPrincipalLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{PrincipalQuota: 20})))
		for range 15 {
			c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		second := c.as(SecondKey)
		for range 5 {
			second.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		_, ms := second.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "principal")
		if ms != 3000 {
			t.Errorf("retryAfterMs %d, want 3000", ms)
		}
		c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "principal")
		c.as(ForeignKey).do("GET", "/v1/me", nil).want(t, http.StatusOK)
	})
}

func TestOrgLevelAndKeyShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{OrgQuota: 40})))
		var last *reply
		for range 20 {
			last = c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		if name, rem, _ := last.rateLimit(t); name != "org" || rem != 0 {
			t.Errorf("RateLimit %s r=%d, want org r=0", name, rem)
		}
		_, ms := c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "org")
		if ms != 3000 {
			t.Errorf("share wait %dms, want 3000 (20 points/min)", ms)
		}
		second := c.as(SecondKey)
		for range 20 {
			second.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		_, ms = c.as(ForeignKey).do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "org")
		if ms != 1500 {
			t.Errorf("org wait %dms, want 1500 (40 points/min)", ms)
		}
	})
}

func TestForeignLoadReducesWhatTheOrgLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := Limits{OrgQuota: 60, OrgKeyShare: 1}
		orgRemaining := func(c *tester) int {
			var st rateLimitJSON
			c.do("GET", "/v1/rate_limit", nil).want(t, http.StatusOK).decode(t, &st)
			return st.Policies[4].Remaining
		}
		// 2 points/s of foreign load against 1 point/s of refill.
		c := newTester(t, New(WithLimits(lim), WithForeignLoad(2)))
		if got := orgRemaining(c); got != 59 {
			t.Errorf("org remaining %d at start", got)
		}
		time.Sleep(30 * time.Second)
		if got := orgRemaining(c); got != 28 {
			t.Errorf("org remaining %d after 30s, want 60-2-30", got)
		}
		time.Sleep(time.Minute)
		_, ms := c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "org")
		if ms != 60000 {
			t.Errorf("retryAfterMs %d while the foreign load eats every refill", ms)
		}

		// Half a point/s of foreign load: the org refills at half speed.
		c = newTester(t, New(WithLimits(lim), WithForeignLoad(0.5)))
		for range 60 {
			c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		}
		_, ms = c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "org")
		if ms != 2000 {
			t.Errorf("retryAfterMs %d, want 2000", ms)
		}
	})
}

func TestDeleteLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{DeleteQuota: 2})))
		ids := []string{c.createContact("D"), c.createContact("D"), c.createContact("D")}
		c.do("DELETE", "/v1/contacts/"+ids[0], nil).want(t, http.StatusNoContent)
		r := c.do("DELETE", "/v1/contacts/"+ids[1], nil).want(t, http.StatusNoContent)
		if name, rem, reset := r.rateLimit(t); name != "delete" || rem != 0 || reset != 60 {
			t.Errorf("RateLimit %s r=%d t=%d", name, rem, reset)
		}
		_, ms := c.do("DELETE", "/v1/contacts/"+ids[2], nil).wantRefusal(t, codeRateLimited, "delete")
		if ms != 30000 {
			t.Errorf("retryAfterMs %d", ms)
		}
		time.Sleep(30 * time.Second)
		c.do("DELETE", "/v1/contacts/"+ids[2], nil).want(t, http.StatusNoContent)
	})
}

func TestDeleteDayQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{DeleteDayQuota: 3, DeleteQuota: 100})))
		time.Sleep(time.Hour)
		var ids []string
		for range 4 {
			ids = append(ids, c.createContact("Tag"))
		}
		for _, id := range ids[:3] {
			c.do("DELETE", "/v1/contacts/"+id, nil).want(t, http.StatusNoContent)
		}
		r := c.do("DELETE", "/v1/contacts/"+ids[3], nil)
		p, ms := r.wantRefusal(t, codeQuotaExhausted, "delete-day")
		if p["resetsAt"] != "2000-01-02T00:00:00Z" || ms != 23*3600*1000 || r.header.Get("Retry-After") != strconv.Itoa(23*3600) {
			t.Errorf("resetsAt %v, retryAfterMs %d, Retry-After %s", p["resetsAt"], ms, r.header.Get("Retry-After"))
		}
		if name, rem, reset := r.rateLimit(t); name != "delete-day" || rem != 0 || reset != 23*3600 {
			t.Errorf("RateLimit %s r=%d t=%d", name, rem, reset)
		}
		c.do("GET", "/v1/contacts/"+ids[3], nil).want(t, http.StatusOK)
		time.Sleep(23 * time.Hour)
		c.do("DELETE", "/v1/contacts/"+ids[3], nil).want(t, http.StatusNoContent)
	})
}

func TestEgressQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{EgressQuota: 5})))
		id := c.createContact("E")
		etag := c.do("GET", "/v1/contacts/"+id, nil).want(t, http.StatusOK).header.Get("ETag")
		for range 5 {
			c.do("GET", "/v1/contacts/"+id, nil, "If-None-Match", etag).want(t, http.StatusNotModified)
		}
		for range 6 {
			c.createContact("E")
		}
		var page struct{ Data []contactJSON }
		c.do("GET", "/v1/contacts?limit=100", nil).want(t, http.StatusOK).decode(t, &page)
		if len(page.Data) != 7 {
			t.Fatalf("list returned %d", len(page.Data))
		}
		r := c.do("GET", "/v1/contacts/count", nil)
		p, _ := r.wantRefusal(t, codeQuotaExhausted, "egress")
		if p["resetsAt"] != "2000-01-01T01:00:00Z" || r.header.Get("Retry-After") != "3600" {
			t.Errorf("resetsAt %v Retry-After %s", p["resetsAt"], r.header.Get("Retry-After"))
		}
		c.do("GET", "/v1/contacts/"+id, nil, "If-None-Match", etag).wantRefusal(t, codeQuotaExhausted, "egress")
		var st rateLimitJSON
		c.do("GET", "/v1/rate_limit", nil).want(t, http.StatusOK).decode(t, &st)
		if e := st.Policies[7]; e.Name != "egress" || e.Remaining != 0 || e.ResetSeconds != 3600 || *e.Window != 3600 || e.Unit != "records" {
			t.Errorf("egress %+v", e)
		}
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		c.as(SecondKey).do("GET", "/v1/contacts/"+id, nil).want(t, http.StatusOK)
		time.Sleep(time.Hour)
		c.do("GET", "/v1/contacts/"+id, nil).want(t, http.StatusOK)
	})
}

func TestLockout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithLimits(Limits{KeyQuota: 1, KeyCapacity: 1}))
		c := newTester(t, s)
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		for i := range 51 {
			c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "key")
			if locks := s.Stats(TestKey).Lockouts; locks != 0 && i < 50 || locks != 1 && i == 50 {
				t.Fatalf("after %d refusals: %d lockouts", i+1, locks)
			}
		}
		r := c.do("GET", "/v1/me", nil)
		_, ms := r.wantRefusal(t, codeRateLimited, "lockout")
		if ms != 300000 || r.header.Get("Retry-After") != "300" {
			t.Errorf("lockout wait %dms, Retry-After %s", ms, r.header.Get("Retry-After"))
		}
		if name, rem, reset := r.rateLimit(t); name != "key" || rem != 0 || reset != 300 {
			t.Errorf("RateLimit %s r=%d t=%d", name, rem, reset)
		}
		c.as(SecondKey).do("GET", "/v1/me", nil).want(t, http.StatusOK)

		time.Sleep(299 * time.Second)
		r = c.do("POST", "/v1/contacts", `{"name":"L"}`)
		if _, ms := r.wantRefusal(t, codeRateLimited, "lockout"); ms != 1000 {
			t.Errorf("lockout wait %dms one second before the end", ms)
		}
		time.Sleep(time.Second)
		var st rateLimitJSON
		c.do("GET", "/v1/rate_limit", nil).want(t, http.StatusOK).decode(t, &st)
		if st.LockedUntil != nil || st.RejectionsLast60s != 1 {
			t.Errorf("after the lockout: %+v", st)
		}
		stats := s.Stats(TestKey)
		if stats.Lockouts != 1 || stats.Refusals[codeRateLimited] != 53 || stats.Accepted != 2 {
			t.Errorf("stats %+v", stats)
		}
		// Refusals from before the lockout's end do not count again.
		c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "key")
		if s.Stats(TestKey).Lockouts != 1 {
			t.Error("locked again at once")
		}
	})
}

func TestLockoutWindowSlides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithLimits(Limits{KeyQuota: 1, KeyCapacity: 1, LockoutRefusals: 4, LockoutWindow: 10 * time.Second}))
		c := newTester(t, s)
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		for range 4 {
			c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "key")
			time.Sleep(3 * time.Second)
		}
		// The first refusal left the window: 4 in the last 10 s, not more.
		c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "key")
		if s.Stats(TestKey).Lockouts != 0 {
			t.Fatal("locked with only 4 refusals in the window")
		}
		c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "key")
		if s.Stats(TestKey).Lockouts != 1 {
			t.Fatal("not locked with 5 refusals in the window")
		}
		c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "lockout")
	})
}

func TestOverloadedFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		status := http.StatusServiceUnavailable
		s := New(WithFaults(func(r *http.Request) Fault {
			if r.Header.Get("X-Overload") != "" {
				return Fault{Overloaded: status, RetryAfter: 1500 * time.Millisecond}
			}
			return Fault{}
		}))
		c := newTester(t, s)
		for range 60 {
			r := c.do("POST", "/v1/contacts", `{"name":"O"}`, "X-Overload", "1")
			r.wantProblem(t, status, codeOverloaded)
			if p := r.obj(t); p["retryAfterMs"] != 1500.0 || r.header.Get("Retry-After") != "2" {
				t.Fatalf("retryAfterMs %v, Retry-After %s", p["retryAfterMs"], r.header.Get("Retry-After"))
			}
		}
		status = http.StatusTooManyRequests
		c.do("GET", "/v1/me", nil, "X-Overload", "1").wantProblem(t, status, codeOverloaded)
		st := s.Stats(TestKey)
		if st.PointsAccepted != 0 || st.Lockouts != 0 || st.Refusals[codeOverloaded] != 61 || st.Accepted != 0 || s.ContactsNamed("O") != 0 {
			t.Errorf("stats %+v", st)
		}
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
	})
}

func TestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLatency(250*time.Millisecond)))
		start := time.Now()
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		c.as("").do("GET", "/v1/me", nil).want(t, http.StatusUnauthorized)
		if d := time.Since(start); d != 500*time.Millisecond {
			t.Errorf("two calls took %v", d)
		}
	})
}
