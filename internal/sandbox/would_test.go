package sandbox

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"
	"testing/synctest"
	"time"
)

// snapshot is everything of TestKey the levels report, for checking that
// nothing changed.
func snapshot(s *Server) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[TestKey]
	now := time.Now()
	s.advance(k, now)
	return fmt.Sprint(s.levels(k, now), s.extraListing(k, now), k.stats, k.lockedUntil, len(k.refusals))
}

func TestWouldAcceptAgreesWithTheServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithLimits(Limits{KeyQuota: 60, KeyCapacity: 30, WriteQuota: 4, DeleteQuota: 2, DeleteDayQuota: 6,
			EgressQuota: 200, EgressWindow: 5 * time.Minute, Shapes: map[string]Shape{policyWrite: SlidingWindow, policyDelete: SlidingLog}}),
			WithExtraPolicies(ExtraPolicy{Name: "bodo-search", Quota: 2, Shape: SlidingLog, Enforced: true,
				Operations: []string{"listContacts", "countContacts"}, Query: "q"}))
		c := newTester(t, s)
		ids := []string{c.createContact("W")}
		rng := rand.New(rand.NewPCG(3, 4))
		seen := map[bool]int{}
		for range 600 {
			time.Sleep(time.Duration(rng.IntN(2500)) * time.Millisecond)
			id := ids[rng.IntN(len(ids))]
			q := url.Values{}
			if rng.IntN(2) == 0 {
				q.Set("q", "W")
			}
			var op, method, path string
			var body any
			switch rng.IntN(7) {
			case 0:
				op, method, path = "getMe", "GET", "/v1/me"
			case 1:
				op, method, path = "listContacts", "GET", "/v1/contacts?"+q.Encode()
			case 2:
				op, method, path = "countContacts", "GET", "/v1/contacts/count?"+q.Encode()
			case 3:
				op, method, path = "getContact", "GET", "/v1/contacts/"+id
			case 4:
				op, method, path, body = "createContact", "POST", "/v1/contacts", `{"name":"W"}`
			case 5:
				op, method, path = "deleteContact", "DELETE", "/v1/contacts/"+id
			default:
				op, method, path = "listEvents", "GET", "/v1/events?limit=3"
			}
			if op != "listContacts" && op != "countContacts" {
				q = url.Values{}
			}
			before := snapshot(s)
			would := s.WouldAccept(TestKey, op, q)
			if again := s.WouldAccept(TestKey, op, q); again != would || snapshot(s) != before {
				t.Fatalf("WouldAccept changed something")
			}
			r := c.do(method, path, body)
			if got := r.status != http.StatusTooManyRequests; got != would {
				t.Fatalf("%s %s: WouldAccept %v, then status %d: %s", method, path, would, r.status, r.body)
			}
			if r.status == http.StatusCreated {
				ids = append(ids, r.obj(t)["id"].(string))
			}
			seen[would]++
		}
		if seen[true] < 100 || seen[false] < 100 {
			t.Errorf("accepted %d, refused %d: the mix does not exercise both", seen[true], seen[false])
		}
		st := s.Stats(TestKey)
		for _, code := range []string{codeRateLimited, codeQuotaExhausted} {
			if st.Refusals[code] == 0 {
				t.Errorf("no %s refusals: %v", code, st.Refusals)
			}
		}
	})
}

func TestWouldAcceptLockoutParallelAndUnknowns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithLimits(Limits{Parallel: 1, KeyQuota: 6000, KeyCapacity: 1, LockoutRefusals: 1}), WithFaults(func(r *http.Request) Fault {
			if r.Header.Get("X-Slow") != "" {
				return Fault{Delay: time.Second}
			}
			return Fault{}
		}))
		c := newTester(t, s)
		for _, bad := range [][2]string{{"bodo_test_nope", "getMe"}, {TestKey, "nope"}, {TestKey, "batch"}} {
			if s.WouldAccept(bad[0], bad[1], nil) {
				t.Errorf("WouldAccept(%q, %q)", bad[0], bad[1])
			}
		}
		if !s.WouldAccept(TestKey, "getMe", nil) || s.WouldAccept(TestKey, "listContacts", nil) {
			t.Error("one point fits, two do not")
		}
		done := make(chan *reply)
		go func() { done <- c.do("GET", "/v1/me", nil, "X-Slow", "1") }()
		synctest.Wait()
		time.Sleep(500 * time.Millisecond)
		if s.WouldAccept(TestKey, "getMe", nil) || !s.WouldAccept(SecondKey, "getMe", nil) {
			t.Error("the only parallel slot is taken")
		}
		c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "parallel")
		(<-done).want(t, http.StatusOK)
		c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "key") // the second refusal: locked
		time.Sleep(time.Minute)
		if s.WouldAccept(TestKey, "getMe", nil) {
			t.Error("accepted while locked")
		}
		c.do("GET", "/v1/me", nil).wantRefusal(t, codeRateLimited, "lockout")
		time.Sleep(5 * time.Minute)
		if !s.WouldAccept(TestKey, "getMe", nil) {
			t.Error("refused after the lockout")
		}
	})
}

// TestWouldComeEarlyFollowsTheAnnouncedWaits: a refusal on the write level
// announces a wait for the writes, not for the reads; the wait binds from
// the moment the answer reached the client until it is over, whatever the
// level would admit meanwhile.
func TestWouldComeEarlyFollowsTheAnnouncedWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithLimits(Limits{KeyQuota: 6000, KeyCapacity: 6000, WriteQuota: 1}), WithLatency(10*time.Millisecond))
		c := newTester(t, s)
		c.createContact("W")
		if s.WouldComeEarly(TestKey, "createContact", nil) {
			t.Fatal("a write comes early before any refusal")
		}
		_, ms := c.do("POST", "/v1/contacts", map[string]any{"name": "W"}).wantRefusal(t, codeRateLimited, "write")
		wait := time.Duration(ms) * time.Millisecond
		time.Sleep(time.Millisecond) // a request at the very moment the answer arrived is not early
		if !s.WouldComeEarly(TestKey, "createContact", nil) || s.WouldComeEarly(TestKey, "getMe", nil) {
			t.Error("after a refusal on write: a write should come early, a read not")
		}
		for _, bad := range [][2]string{{"bodo_test_nope", "createContact"}, {TestKey, "nope"}} {
			if s.WouldComeEarly(bad[0], bad[1], nil) {
				t.Errorf("WouldComeEarly(%q, %q)", bad[0], bad[1])
			}
		}
		time.Sleep(wait - time.Millisecond)
		if s.WouldComeEarly(TestKey, "createContact", nil) {
			t.Errorf("a write comes early %v after a refusal that asked for %v", wait, wait)
		}
	})
}
