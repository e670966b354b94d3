package sandbox

import (
	"encoding/base64"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dunglas/httpsfv"
)

// policyItems parses RateLimit-Policy and returns its members by name.
func policyItems(t *testing.T, h http.Header) map[string]sfItem {
	t.Helper()
	items, err := parseSFList(h.Values("RateLimit-Policy"))
	if err != nil {
		t.Fatalf("RateLimit-Policy %q: %v", h.Values("RateLimit-Policy"), err)
	}
	out := map[string]sfItem{}
	for _, it := range items {
		out[it.name] = it
	}
	return out
}

func TestExtraPoliciesAnnounced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithExtraPolicies(
			ExtraPolicy{Name: "bodo-a", Quota: 5, Window: time.Hour},
			ExtraPolicy{Name: "bodo-b", Quota: 7, Unit: "points", Enforced: true},
			ExtraPolicy{Name: "bodo-hidden", Quota: 3, Enforced: true, Hidden: true},
		)))
		r := c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
		items := policyItems(t, r.header)
		if len(items) != 10 {
			t.Errorf("%d policies, want the 8 levels and 2 announced ones: %q", len(items), r.header.Values("RateLimit-Policy"))
		}
		if a := items["bodo-a"]; a.params["q"] != int64(5) || a.params["w"] != int64(3600) || a.params["qu"] != nil {
			t.Errorf("bodo-a %+v", a)
		}
		if b := items["bodo-b"]; b.params["q"] != int64(7) || b.params["w"] != int64(60) || b.params["qu"] != "points" {
			t.Errorf("bodo-b %+v", b)
		}
		if _, ok := items["bodo-hidden"]; ok {
			t.Error("a hidden policy is announced")
		}
		// bodo-b (7 points) and the hidden one (3 requests) cover every call.
		var st rateLimitJSON
		c.do("GET", "/v1/rate_limit", nil).want(t, http.StatusOK).decode(t, &st)
		var names []string
		for _, p := range st.Policies {
			names = append(names, p.Name)
		}
		if want := []string{"key", "write", "parallel", "principal", "org", "delete", "delete-day", "egress", "bodo-b", "bodo-hidden"}; !slices.Equal(names, want) {
			t.Errorf("rate_limit lists %v, want %v", names, want)
		}
		if b := st.Policies[8]; b.Quota != 7 || *b.Window != 60 || b.Unit != "points" || b.Remaining != 5 || b.Capacity != nil {
			t.Errorf("bodo-b %+v", b)
		}
		if h := st.Policies[9]; h.Unit != "requests" || h.Remaining != 1 || h.ResetSeconds != 40 {
			t.Errorf("bodo-hidden %+v", h)
		}
		wantRL(t, c.do("GET", "/v1/contacts", nil).want(t, http.StatusOK), "bodo-hidden", 0, 60)
		wantWait(t, c.do("GET", "/v1/me", nil), "bodo-hidden", 20000)
	})
}

func TestExtraPolicyNotEnforcedIsNeverCharged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithExtraPolicies(ExtraPolicy{Name: "bodo-soft", Quota: 1})))
		for range 5 {
			r := c.do("GET", "/v1/me", nil).want(t, http.StatusOK)
			if l, err := httpsfv.UnmarshalList(r.header.Values("RateLimit")); err != nil || len(l) != 1 || l[0].(httpsfv.Item).Value != "key" {
				t.Fatalf("RateLimit %q", r.header.Values("RateLimit"))
			}
		}
		var st rateLimitJSON
		c.do("GET", "/v1/rate_limit", nil).want(t, http.StatusOK).decode(t, &st)
		if len(st.Policies) != 8 {
			t.Errorf("rate_limit lists %d policies", len(st.Policies))
		}
	})
}

func TestExtraPolicyOperationsAndQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithExtraPolicies(ExtraPolicy{Name: "bodo-search", Quota: 2, Enforced: true,
			Operations: []string{"listContacts", "countContacts"}, Query: "q"})))
		id := c.createContact("Q")
		wantRL(t, c.do("GET", "/v1/contacts?q=a", nil).want(t, http.StatusOK), "bodo-search", 1, 30)
		wantRL(t, c.do("GET", "/v1/contacts/count?q=a", nil).want(t, http.StatusOK), "bodo-search", 0, 60)
		r := c.do("GET", "/v1/contacts?q=b", nil)
		wantWait(t, r, "bodo-search", 30000)
		wantRL(t, r, "bodo-search", 0, 60)
		wantWait(t, c.do("GET", "/v1/contacts/count?q=b", nil), "bodo-search", 30000)
		// Not covered: no q, another operation.
		wantRL(t, c.do("GET", "/v1/contacts", nil).want(t, http.StatusOK), "key", 579, 5)
		c.do("GET", "/v1/contacts/count?q=", nil).want(t, http.StatusOK)
		c.do("GET", "/v1/contacts/"+id, nil).want(t, http.StatusOK)
		c.do("GET", "/v1/invoices?q=x", nil).want(t, http.StatusOK)
		// A batch is charged as its parts.
		batch := map[string]any{"requests": []map[string]any{
			{"method": "GET", "path": "/v1/contacts?q=c"}, {"method": "GET", "path": "/v1/me"}}}
		wantWait(t, c.do("POST", "/v1/batch", batch), "bodo-search", 30000)
		time.Sleep(30 * time.Second)
		wantRL(t, c.do("POST", "/v1/batch", batch).want(t, http.StatusOK), "bodo-search", 0, 60)
		if st := c.s.Stats(TestKey); st.Refusals[codeRateLimited] != 3 {
			t.Errorf("refusals %v", st.Refusals)
		}
	})
}

func TestExtraPolicyLongestWaitWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{KeyQuota: 60, KeyCapacity: 7}),
			WithExtraPolicies(ExtraPolicy{Name: "bodo-search", Quota: 1, Window: time.Minute, Shape: FixedWindow, Enforced: true,
				Operations: []string{"listContacts"}, Query: "q"})))
		time.Sleep(10 * time.Second)
		r := c.do("GET", "/v1/contacts?q=x", nil).want(t, http.StatusOK)
		if l, err := httpsfv.UnmarshalList(r.header.Values("RateLimit")); err != nil || len(l) != 1 {
			t.Fatalf("RateLimit %q: %v", r.header.Values("RateLimit"), err)
		}
		wantWait(t, c.do("GET", "/v1/contacts?q=x", nil), "bodo-search", 50000) // key: 7 s
		wantWait(t, c.do("GET", "/v1/contacts", nil), "key", 2000)
		time.Sleep(7 * time.Second)
		wantWait(t, c.do("GET", "/v1/contacts?q=x", nil), "bodo-search", 43000)
	})
}

func TestExtraPolicyPartitioned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithExtraPolicies(ExtraPolicy{Name: "bodo-path", Quota: 1, Shape: SlidingLog, Enforced: true,
			Partitioned: true, Operations: []string{"getContact"}})))
		a, b := c.createContact("A"), c.createContact("B")
		pk := func(path string) []byte { return []byte("/v1/contacts/" + path) }
		r := c.do("GET", "/v1/contacts/"+a, nil).want(t, http.StatusOK)
		l, err := httpsfv.UnmarshalList(r.header.Values("RateLimit"))
		if err != nil || len(l) != 1 {
			t.Fatalf("RateLimit %q: %v", r.header.Values("RateLimit"), err)
		}
		it := l[0].(httpsfv.Item)
		rv, _ := it.Params.Get("r")
		tv, _ := it.Params.Get("t")
		pv, _ := it.Params.Get("pk")
		if it.Value != "bodo-path" || rv != int64(0) || tv != int64(60) || string(pv.([]byte)) != string(pk(a)) {
			t.Errorf("RateLimit %q", r.header.Values("RateLimit"))
		}
		pol, err := httpsfv.UnmarshalList(r.header.Values("RateLimit-Policy"))
		if err != nil {
			t.Fatal(err)
		}
		var announced bool
		for _, m := range pol {
			if it := m.(httpsfv.Item); it.Value == "bodo-path" {
				v, _ := it.Params.Get("pk")
				announced = string(v.([]byte)) == string(pk(a))
			}
		}
		if !announced {
			t.Errorf("RateLimit-Policy %q does not announce bodo-path with this path's pk", r.header.Values("RateLimit-Policy"))
		}
		want := `"bodo-path";r=0;t=60;pk=:` + base64.StdEncoding.EncodeToString(pk(a)) + ":"
		refused := c.do("GET", "/v1/contacts/"+a, nil)
		wantWait(t, refused, "bodo-path", 60000)
		if got := refused.header.Get("RateLimit"); got != want {
			t.Errorf("refusal RateLimit %q, want %q", got, want)
		}
		c.do("GET", "/v1/contacts/"+b, nil).want(t, http.StatusOK)
		c.do("PATCH", "/v1/contacts/"+a, `{"phone":"1"}`).want(t, http.StatusOK)
		time.Sleep(time.Minute)
		c.do("GET", "/v1/contacts/"+a, nil).want(t, http.StatusOK)
	})
}

func TestExtraPolicyRejectsBadConfiguration(t *testing.T) {
	for _, p := range []ExtraPolicy{
		{Name: "", Quota: 1}, {Name: "key", Quota: 1}, {Name: "x", Quota: 0}, {Name: "x\n", Quota: 1},
		{Name: "x", Quota: 1, Unit: "records"}, {Name: "x", Quota: 1, Shape: "leaky"}, {Name: "x", Quota: 1, Operations: []string{"nope"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New accepted %+v", p)
				}
			}()
			New(WithExtraPolicies(p))
		}()
	}
}
