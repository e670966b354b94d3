package sandbox

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// TestOperationCosts checks every operation's cost as bodo-api.md states it
// (and that the ops table agrees) through Stats.PointsAccepted and, where
// the key level is the narrowest, through RateLimit.
func TestOperationCosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New())
		con := c.createContact("Kosten", "email", "a@example.com")
		gone := c.createContact("Weg")
		open := c.createInvoice(con, 100, "open")
		paid := c.createInvoice(con, 100, "open")
		c.do("POST", "/v1/invoices/"+paid+"/pay", nil, "Idempotency-Key", "setup").want(t, http.StatusOK)
		op := c.do("POST", "/v1/exports", `{"resource":"contacts","format":"jsonl"}`).want(t, http.StatusAccepted).obj(t)["id"].(string)

		cases := []struct {
			id     string
			method string
			path   string
			body   string
			hdr    []string
			cost   int // from bodo-api.md
			status int
		}{
			{"listContacts", "GET", "/v1/contacts", "", nil, 2, 200},
			{"listContacts", "GET", "/v1/contacts?q=kost", "", nil, 7, 200},
			{"countContacts", "GET", "/v1/contacts/count", "", nil, 2, 200},
			{"countContacts", "GET", "/v1/contacts/count?q=kost", "", nil, 7, 200},
			{"getContact", "GET", "/v1/contacts/" + con, "", nil, 1, 200},
			{"createContact", "POST", "/v1/contacts", `{"name":"Neu"}`, nil, 5, 201},
			{"updateContact", "PATCH", "/v1/contacts/" + con, `{"phone":"1"}`, nil, 5, 200},
			{"deleteContact", "DELETE", "/v1/contacts/" + gone, "", nil, 10, 204},
			{"listInvoices", "GET", "/v1/invoices", "", nil, 2, 200},
			{"getInvoice", "GET", "/v1/invoices/" + open, "", nil, 1, 200},
			{"createInvoice", "POST", "/v1/invoices", `{"contactId":"` + con + `","amount":5,"currency":"EUR"}`, nil, 5, 201},
			{"payInvoice", "POST", "/v1/invoices/" + open + "/pay", "", []string{"Idempotency-Key", "pay"}, 10, 200},
			{"refundInvoice", "POST", "/v1/invoices/" + paid + "/refund", "", []string{"Idempotency-Key", "refund"}, 10, 200},
			{"createExport", "POST", "/v1/exports", `{"resource":"invoices","format":"csv"}`, nil, 10, 202},
			{"getOperation", "GET", "/v1/operations/" + op, "", nil, 1, 200},
			{"listEvents", "GET", "/v1/events", "", nil, 1, 200},
			{"getMe", "GET", "/v1/me", "", nil, 1, 200},
			{"getRateLimit", "GET", "/v1/rate_limit", "", nil, 1, 200},
			{"getOpenAPI", "GET", "/v1/openapi.json", "", nil, 1, 200},
		}
		seen := map[string]bool{"batch": true}
		for _, tc := range cases {
			seen[tc.id] = true
			o, _ := ops.ByID(tc.id)
			_, q, _ := strings.Cut(tc.path, "?")
			if got := o.CostFor(func(name string) string {
				if name == "q" && strings.HasPrefix(q, "q=") {
					return "x"
				}
				return ""
			}); got != tc.cost {
				t.Errorf("%s: ops table says %d, bodo-api.md %d", tc.path, got, tc.cost)
			}
			before := c.points()
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := c.do(tc.method, tc.path, body, tc.hdr...).want(t, tc.status)
			if got := c.points() - before; got != tc.cost {
				t.Errorf("%s %s cost %d, want %d", tc.method, tc.path, got, tc.cost)
			}
			if o.Class == ops.ClassRead {
				name, rem, _ := r.rateLimit(t)
				want := int64(600 - c.points())
				if name != "key" || rem != want {
					t.Errorf("%s %s: RateLimit %s r=%d, want key r=%d", tc.method, tc.path, name, rem, want)
				}
			}
		}
		for _, o := range ops.Table {
			if !seen[o.ID] {
				t.Errorf("operation %s not costed", o.ID)
			}
		}

		// A 304 costs the GET; a 404 costs the call; a replay costs 1.
		etag := c.do("GET", "/v1/contacts/"+con, nil).header.Get("ETag")
		before := c.points()
		c.do("GET", "/v1/contacts/"+con, nil, "If-None-Match", etag).want(t, http.StatusNotModified)
		c.do("GET", "/v1/invoices/inv_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil).want(t, http.StatusNotFound)
		c.do("POST", "/v1/invoices/"+open+"/pay", nil, "Idempotency-Key", "pay").want(t, http.StatusOK)
		if got := c.points() - before; got != 3 {
			t.Errorf("304 + 404 + replay cost %d, want 3", got)
		}
	})
}

func TestBatchCostsTheSumOfItsParts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New())
		con := c.createContact("Teil")
		before := c.points()
		c.do("POST", "/v1/batch", map[string]any{"requests": []map[string]any{
			{"method": "GET", "path": "/v1/contacts?q=teil"},                                 // 7
			{"method": "POST", "path": "/v1/contacts", "body": map[string]any{"name": "B1"}}, // 5
			{"method": "DELETE", "path": "/v1/contacts/" + con},                              // 10
			{"method": "GET", "path": "/v1/me"},                                              // 1
			{"method": "GET", "path": "/v1/unknown"},                                         // 1
		}}).want(t, http.StatusOK)
		if got := c.points() - before; got != 24 {
			t.Errorf("batch cost %d, want 7+5+10+1+1", got)
		}
		st := c.s.Stats(TestKey)
		if st.Writes != 3 {
			t.Errorf("writes %d, want 3 (create, create in batch, delete)", st.Writes)
		}
	})
}

// TestABatchChargesRepeatsAndStrayPathsOnePoint: a part whose
// Idempotency-Key an earlier part of the batch used replays it, and a part
// whose path has no route (a trailing slash) answers 404: each costs one
// point and no write, as on its own, also where the write level has room
// for one write only.
func TestABatchChargesRepeatsAndStrayPathsOnePoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{WriteQuota: 2})))
		con := c.createContact("Bleibt")
		before, writes := c.points(), c.s.Stats(TestKey).Writes
		part := map[string]any{"method": "POST", "path": "/v1/contacts", "body": map[string]any{"name": "Einmal"}, "idempotencyKey": "k1"}
		c.do("POST", "/v1/batch", map[string]any{"requests": []any{part, part,
			map[string]any{"method": "DELETE", "path": "/v1/contacts/" + con + "/"}}}).want(t, http.StatusOK)
		if got := c.points() - before; got != 5+1+1 {
			t.Errorf("batch cost %d, want 5 + 1 (the replay) + 1 (no route)", got)
		}
		if got := c.s.Stats(TestKey).Writes - writes; got != 1 || c.s.ContactsNamed("Einmal") != 1 || c.s.ContactsNamed("Bleibt") != 1 {
			t.Errorf("%d writes, %d contacts made, %d kept; want one write that made one, the other kept",
				got, c.s.ContactsNamed("Einmal"), c.s.ContactsNamed("Bleibt"))
		}
	})
}

func TestBatchIsRefusedAsAWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{KeyQuota: 30, KeyCapacity: 30})))
		create := func(name string) map[string]any {
			return map[string]any{"method": "POST", "path": "/v1/contacts", "body": map[string]any{"name": name}}
		}
		c.do("POST", "/v1/batch", map[string]any{"requests": []any{create("A"), create("A"), create("A"),
			map[string]any{"method": "GET", "path": "/v1/contacts?q=a"}}}).want(t, http.StatusOK)
		if c.points() != 22 || c.s.ContactsNamed("A") != 3 {
			t.Fatalf("points %d, contacts %d", c.points(), c.s.ContactsNamed("A"))
		}
		r := c.do("POST", "/v1/batch", map[string]any{"requests": []any{create("B"), create("B")}})
		_, ms := r.wantRefusal(t, codeRateLimited, "key")
		if ms != 4000 {
			t.Errorf("retryAfterMs %d, want 4000 (2 points missing at 0.5/s)", ms)
		}
		if c.s.ContactsNamed("B") != 0 || c.points() != 22 {
			t.Errorf("refused batch ran or was charged: %d contacts, %d points", c.s.ContactsNamed("B"), c.points())
		}

		// More deletes than the delete level ever holds can never pass.
		var parts []any
		for range 11 {
			parts = append(parts, map[string]any{"method": "DELETE", "path": "/v1/contacts/con_01ARZ3NDEKTSV4RRFFQ69G5FAV"})
		}
		c.do("POST", "/v1/batch", map[string]any{"requests": parts}).wantProblem(t, http.StatusBadRequest, codeBadRequest)
		if c.points() != 22 {
			t.Errorf("impossible batch charged")
		}
	})
}
