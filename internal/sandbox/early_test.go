package sandbox

import (
	"maps"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

func TestHintInBodyOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hint := true
		s := New(WithFaults(func(r *http.Request) Fault {
			return Fault{Overloaded: http.StatusServiceUnavailable, RetryAfter: 250 * time.Millisecond, HintInBodyOnly: hint}
		}))
		c := newTester(t, s)
		r := c.do("GET", "/v1/me", nil)
		p := r.wantProblem(t, http.StatusServiceUnavailable, codeOverloaded)
		if p["retryAfterMs"] != 250.0 || r.header.Values("Retry-After") != nil {
			t.Errorf("retryAfterMs %v, Retry-After %q", p["retryAfterMs"], r.header.Values("Retry-After"))
		}
		if _, _, reset := r.rateLimit(t); reset != 0 {
			t.Errorf("RateLimit t=%d", reset)
		}
		hint = false
		r = c.do("GET", "/v1/me", nil)
		if p := r.wantProblem(t, http.StatusServiceUnavailable, codeOverloaded); p["retryAfterMs"] != 250.0 || r.header.Get("Retry-After") != "1" {
			t.Errorf("without the flag: retryAfterMs %v, Retry-After %q", p["retryAfterMs"], r.header.Get("Retry-After"))
		}
	})
}

func wantEarly(t *testing.T, s *Server, n int, by map[string]int) {
	t.Helper()
	st := s.Stats(TestKey)
	if st.EarlyRequests != n || !maps.Equal(st.EarlyByPolicy, by) {
		t.Errorf("early %d by %v, want %d by %v", st.EarlyRequests, st.EarlyByPolicy, n, by)
	}
}

func TestEarlyRequestsKeyWide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		overload := false
		s := New(WithFaults(func(r *http.Request) Fault {
			if overload {
				return Fault{Overloaded: http.StatusTooManyRequests, RetryAfter: 1500 * time.Millisecond, HintInBodyOnly: true}
			}
			return Fault{}
		}))
		c := newTester(t, s)
		overload = true
		c.do("GET", "/v1/me", nil).wantProblem(t, http.StatusTooManyRequests, codeOverloaded)
		overload = false
		wantEarly(t, s, 0, map[string]int{})
		time.Sleep(time.Second)
		c.do("POST", "/v1/contacts", `{"name":"E"}`).want(t, http.StatusCreated) // served as usual
		c.do("GET", "/v1/nope", nil).want(t, http.StatusNotFound)
		c.as(SecondKey).do("GET", "/v1/me", nil).want(t, http.StatusOK) // another key
		wantEarly(t, s, 2, map[string]int{codeOverloaded: 2})
		time.Sleep(500*time.Millisecond - time.Millisecond)
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		wantEarly(t, s, 3, map[string]int{codeOverloaded: 3})
		time.Sleep(time.Millisecond)
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		wantEarly(t, s, 3, map[string]int{codeOverloaded: 3})
		if st := s.Stats(SecondKey); st.EarlyRequests != 0 {
			t.Errorf("SecondKey early %d", st.EarlyRequests)
		}
	})
}

func TestEarlyRequestsLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithLimits(Limits{WriteQuota: 1}), WithExtraPolicies(ExtraPolicy{Name: "bodo-path", Quota: 1, Shape: FixedWindow,
			Enforced: true, Partitioned: true, Operations: []string{"getContact"}}))
		c := newTester(t, s)
		id := c.createContact("E")
		wantWait(t, c.do("POST", "/v1/contacts", `{"name":"E"}`), "write", 60000)
		time.Sleep(time.Second)
		c.do("GET", "/v1/contacts", nil).want(t, http.StatusOK) // takes no write
		wantEarly(t, s, 0, map[string]int{})
		c.do("DELETE", "/v1/contacts/"+id, nil).wantRefusal(t, codeRateLimited, "write") // a delete is a write
		time.Sleep(29 * time.Second)
		wantWait(t, c.do("PATCH", "/v1/contacts/"+id, `{}`), "write", 30000)
		wantEarly(t, s, 2, map[string]int{"write": 2})
		time.Sleep(30 * time.Second)
		c.do("PATCH", "/v1/contacts/"+id, `{}`).want(t, http.StatusOK)
		wantEarly(t, s, 2, map[string]int{"write": 2})

		// A partitioned policy's wait binds its partition only.
		time.Sleep(time.Minute)
		other := c.createContact("F")
		c.do("GET", "/v1/contacts/"+other, nil).want(t, http.StatusOK)
		wantWait(t, c.do("GET", "/v1/contacts/"+other, nil), "bodo-path", 60000)
		c.do("GET", "/v1/contacts/"+id, nil).want(t, http.StatusOK)
		wantEarly(t, s, 2, map[string]int{"write": 2})
		time.Sleep(time.Millisecond) // sent at the very moment of the answer, it would not be early
		c.do("GET", "/v1/contacts/"+other, nil).wantRefusal(t, codeRateLimited, "bodo-path")
		wantEarly(t, s, 3, map[string]int{"write": 2, "bodo-path": 1})
	})
}

func TestEarlyRequestsLockoutAndParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithLimits(Limits{KeyQuota: 60, KeyCapacity: 1, LockoutRefusals: 2, Parallel: 1}), WithFaults(func(r *http.Request) Fault {
			if r.Header.Get("X-Slow") != "" {
				return Fault{Delay: 10 * time.Second}
			}
			return Fault{}
		}))
		c := newTester(t, s)
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		for range 3 { // each refusal's wait is a key wait; the 2nd and 3rd come early for it
			time.Sleep(time.Millisecond)
			c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "key")
		}
		wantEarly(t, s, 2, map[string]int{"key": 2})
		time.Sleep(time.Millisecond)
		_, ms := c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "lockout")
		wantEarly(t, s, 3, map[string]int{"key": 3})
		time.Sleep(time.Duration(ms)*time.Millisecond - time.Second)
		c.do("GET", "/v1/openapi.json", nil).wantRefusal(t, codeRateLimited, "lockout")
		wantEarly(t, s, 4, map[string]int{"key": 3, "lockout": 1})
		time.Sleep(time.Second)

		done := make(chan *reply)
		go func() { done <- c.do("GET", "/v1/me", nil, "X-Slow", "1") }()
		synctest.Wait()
		time.Sleep(2 * time.Second)
		_, ms = c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "parallel")
		wantEarly(t, s, 4, map[string]int{"key": 3, "lockout": 1})
		time.Sleep(time.Duration(ms-1) * time.Millisecond)
		c.do("GET", "/v1/nope", nil).want(t, http.StatusNotFound)
		wantEarly(t, s, 5, map[string]int{"key": 3, "lockout": 1, "parallel": 1})
		(<-done).want(t, http.StatusOK)
	})
}
