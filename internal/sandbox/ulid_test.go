package sandbox

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

func TestULID(t *testing.T) {
	var rnd [10]byte
	for i := range rnd {
		rnd[i] = 0xff
	}
	if got := encodeULID(1469918176385, rnd); got != "01ARYZ6S41ZZZZZZZZZZZZZZZZ" {
		t.Errorf("encodeULID = %s", got)
	}
	var g ulids
	now := time.UnixMilli(1469918176385)
	prev := ""
	for range 1000 {
		id := g.next(now)
		if !validID(id, "") || id <= prev || id[:10] != "01ARYZ6S41" {
			t.Fatalf("id %s after %s", id, prev)
		}
		prev = id
	}
	if id := g.next(now.Add(-time.Hour)); id <= prev {
		t.Errorf("id %s went back after %s", id, prev)
	}
}

// TestConcurrentClients drives the sandbox from many goroutines for the race
// detector and checks that no level lets more through than it holds.
func TestConcurrentClients(t *testing.T) {
	s := New(WithLimits(Limits{Window: time.Hour, KeyQuota: 100, KeyCapacity: 100}))
	var wg sync.WaitGroup
	for _, key := range []string{TestKey, SecondKey, ForeignKey} {
		for range 4 {
			wg.Go(func() {
				c := newTester(t, s).as(key)
				for range 30 {
					req, _ := c.request("POST", "/v1/contacts", `{"name":"Viele"}`)
					resp, err := c.hc.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusTooManyRequests {
						t.Errorf("status %d", resp.StatusCode)
					}
				}
			})
		}
	}
	wg.Wait()
	total := 0
	for _, key := range []string{TestKey, SecondKey, ForeignKey} {
		st := s.Stats(key)
		if st.Requests != 120 || st.PointsAccepted > 100 || st.Accepted+st.Refusals[codeRateLimited] != 120 || st.MaxInFlight > 4 {
			t.Errorf("%s: %+v", key, st)
		}
		total += st.Writes
	}
	if n := s.ContactsNamed("Viele"); n != total {
		t.Errorf("%d contacts, %d writes", n, total)
	}
}
