package sandbox

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

func TestEveryOperationHasARoute(t *testing.T) {
	s := New()
	for _, op := range ops.Table {
		path := strings.ReplaceAll(op.Path, "{id}", "x_1")
		rt := s.lookup(op.Method, &url.URL{Path: path})
		if rt == nil || rt.op.ID != op.ID {
			t.Errorf("%s %s: routed to %v, want %s", op.Method, path, rt, op.ID)
		}
	}
	if len(s.routes) != len(ops.Table) {
		t.Errorf("%d routes for %d operations", len(s.routes), len(ops.Table))
	}
}

func TestContactLifecycle(t *testing.T) {
	c := newTester(t, New())
	r := c.do("POST", "/v1/contacts", map[string]any{
		"name": "Ada Lovelace", "email": "ada@example.com", "company": "Analytical GmbH", "tags": []string{"vip"},
	}).want(t, http.StatusCreated)
	ct := r.obj(t)
	id := ct["id"].(string)
	if !validID(id, "con_") || r.header.Get("Location") != "/v1/contacts/"+id || r.header.Get("ETag") == "" {
		t.Fatalf("create: id %q, Location %q, ETag %q", id, r.header.Get("Location"), r.header.Get("ETag"))
	}
	if ct["phone"] != nil || ct["email"] != "ada@example.com" || ct["createdAt"] != ct["updatedAt"] {
		t.Errorf("created contact %s", r.body)
	}
	for _, f := range []string{"id", "name", "email", "phone", "company", "tags", "createdAt", "updatedAt"} {
		if _, ok := ct[f]; !ok {
			t.Errorf("contact lacks %s", f)
		}
	}
	if _, err := time.Parse(time.RFC3339, ct["createdAt"].(string)); err != nil {
		t.Errorf("createdAt: %v", err)
	}

	got := c.do("GET", "/v1/contacts/"+id, nil).want(t, http.StatusOK)
	if got.header.Get("ETag") != r.header.Get("ETag") || !bytes.Equal(got.body, r.body) {
		t.Errorf("get differs from create: %s", got.body)
	}

	// Merge patch: absent keeps, null clears.
	up := c.do("PATCH", "/v1/contacts/"+id, `{"phone":"+49 30 1234","email":null,"tags":null}`).want(t, http.StatusOK).obj(t)
	if up["phone"] != "+49 30 1234" || up["email"] != nil || up["company"] != "Analytical GmbH" || up["name"] != "Ada Lovelace" {
		t.Errorf("patched %v", up)
	}
	if tags := up["tags"].([]any); len(tags) != 0 {
		t.Errorf("tags %v after null", tags)
	}
	for _, body := range []string{`{"name":null}`, `{"name":""}`, `{"name":5}`} {
		p := c.do("PATCH", "/v1/contacts/"+id, body).wantProblem(t, http.StatusUnprocessableEntity, codeValidationFailed)
		if errs := p["errors"].([]any); errs[0].(map[string]any)["field"] != "name" {
			t.Errorf("%s: errors %v", body, errs)
		}
	}

	c.do("DELETE", "/v1/contacts/"+id, nil).want(t, http.StatusNoContent)
	c.do("GET", "/v1/contacts/"+id, nil).wantProblem(t, http.StatusNotFound, codeNotFound)
	c.do("DELETE", "/v1/contacts/"+id, nil).wantProblem(t, http.StatusNotFound, codeNotFound)
	c.do("PATCH", "/v1/contacts/"+id, `{"name":"x"}`).wantProblem(t, http.StatusNotFound, codeNotFound)
	c.do("GET", "/v1/contacts/not-an-id", nil).wantProblem(t, http.StatusNotFound, codeNotFound)
	if c.s.ContactsNamed("Ada Lovelace") != 0 {
		t.Error("deleted contact still counted")
	}
}

func TestContactValidation(t *testing.T) {
	c := newTester(t, New())
	cases := []struct {
		body  string
		field string
	}{
		{`{}`, "name"},
		{`{"name":""}`, "name"},
		{`{"name":"` + strings.Repeat("x", 201) + `"}`, "name"},
		{`{"name":"A","email":7}`, "email"},
		{`{"name":"A","phone":[]}`, "phone"},
		{`{"name":"A","tags":"vip"}`, "tags"},
		{`{"name":"A","tags":[null]}`, "tags[0]"},
	}
	for _, tc := range cases {
		p := c.do("POST", "/v1/contacts", tc.body).wantProblem(t, http.StatusUnprocessableEntity, codeValidationFailed)
		errs, _ := p["errors"].([]any)
		if len(errs) == 0 || errs[0].(map[string]any)["field"] != tc.field || errs[0].(map[string]any)["message"] == "" {
			t.Errorf("%s: errors %v, want field %s", tc.body, p["errors"], tc.field)
		}
	}
	for _, body := range []string{``, `{`, `[1]`, `null`, `"name"`} {
		c.do("POST", "/v1/contacts", body).wantProblem(t, http.StatusBadRequest, codeBadRequest)
	}
	if n := c.s.ContactsNamed("A"); n != 0 {
		t.Errorf("%d invalid contacts created", n)
	}
	c.createContact(strings.Repeat("ü", 200))

	// What bodo-api.md (and so openapi.json) allows, the sandbox takes:
	// no format or length for email, phone and company, any tags, any
	// name of 1 to 200 characters.
	for _, body := range []string{
		`{"name":"   "}`,
		`{"name":"B","email":"no-at-sign","phone":"` + strings.Repeat("1", 80) + `","company":""}`,
		`{"name":"C","email":"","tags":["", "` + strings.Repeat("t", 80) + `"]}`,
		`{"name":"D","email":null,"phone":null,"company":null,"tags":null}`,
	} {
		c.do("POST", "/v1/contacts", body).want(t, http.StatusCreated)
	}
}

func TestContactListPagingAndSearch(t *testing.T) {
	c := newTester(t, New())
	var ids []string
	for i := range 25 {
		ids = append(ids, c.createContact(fmt.Sprintf("Person %02d", i), "email", fmt.Sprintf("p%d@example.com", i)))
	}
	c.createContact("Grace Hopper", "company", "Navy Labs")
	c.createContact("Someone", "email", "GRACE@example.com")

	var page struct {
		Data       []contactJSON `json:"data"`
		NextCursor *string       `json:"nextCursor"`
	}
	c.do("GET", "/v1/contacts", nil).want(t, http.StatusOK).decode(t, &page)
	if len(page.Data) != 20 || page.NextCursor == nil || page.Data[0].ID != ids[0] || page.Data[19].ID != ids[19] {
		t.Fatalf("first page: %d items, cursor %v", len(page.Data), page.NextCursor)
	}
	c.do("GET", "/v1/contacts?limit=20&cursor="+*page.NextCursor, nil).want(t, http.StatusOK).decode(t, &page)
	if len(page.Data) != 7 || page.NextCursor != nil || page.Data[0].ID != ids[20] {
		t.Fatalf("second page: %d items, cursor %v", len(page.Data), page.NextCursor)
	}
	c.do("GET", "/v1/contacts?limit=5", nil).decode(t, &page)
	if len(page.Data) != 5 {
		t.Errorf("limit=5 gave %d", len(page.Data))
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=abc", "cursor=garbage", "cursor=" + encodeCursor("inv_01ARZ3NDEKTSV4RRFFQ69G5FAV")} {
		c.do("GET", "/v1/contacts?"+q, nil).wantProblem(t, http.StatusBadRequest, codeBadRequest)
	}

	c.do("GET", "/v1/contacts?q=grace", nil).decode(t, &page)
	if len(page.Data) != 2 {
		t.Errorf("q=grace matched %d (name and email)", len(page.Data))
	}
	c.do("GET", "/v1/contacts?q=NAVY", nil).decode(t, &page)
	if len(page.Data) != 1 || page.Data[0].Name != "Grace Hopper" {
		t.Errorf("q=NAVY matched %+v", page.Data)
	}
	var count struct{ Count int }
	c.do("GET", "/v1/contacts/count", nil).want(t, http.StatusOK).decode(t, &count)
	if count.Count != 27 {
		t.Errorf("count %d", count.Count)
	}
	c.do("GET", "/v1/contacts/count?q=grace", nil).decode(t, &count)
	if count.Count != 2 {
		t.Errorf("count q=grace %d", count.Count)
	}
	// A cursor stays valid when its contact is deleted.
	c.do("GET", "/v1/contacts?limit=3", nil).decode(t, &page)
	c.do("DELETE", "/v1/contacts/"+ids[2], nil).want(t, http.StatusNoContent)
	c.do("GET", "/v1/contacts?limit=3&cursor="+*page.NextCursor, nil).want(t, http.StatusOK).decode(t, &page)
	if page.Data[0].ID != ids[3] {
		t.Errorf("after deleted cursor contact: %s", page.Data[0].ID)
	}
}

func TestInvoiceStateMachine(t *testing.T) {
	c := newTester(t, New())
	con := c.createContact("Kundin")
	key := func(k string) []string { return []string{"Idempotency-Key", k} }

	draft := c.do("POST", "/v1/invoices", map[string]any{"contactId": con, "amount": 1000, "currency": "EUR"}).want(t, http.StatusCreated).obj(t)
	if draft["status"] != "draft" || draft["amountRefunded"] != 0.0 || draft["contactId"] != con {
		t.Errorf("draft %v", draft)
	}
	c.do("POST", "/v1/invoices/"+draft["id"].(string)+"/pay", nil, key("d1")...).wantProblem(t, http.StatusConflict, codeInvalidState)

	inv := c.createInvoice(con, 1000, "open")
	c.do("POST", "/v1/invoices/"+inv+"/refund", nil, key("r0")...).wantProblem(t, http.StatusConflict, codeInvalidState)
	paid := c.do("POST", "/v1/invoices/"+inv+"/pay", nil, key("p1")...).want(t, http.StatusOK).obj(t)
	if paid["status"] != "paid" {
		t.Fatalf("paid %v", paid)
	}
	c.do("POST", "/v1/invoices/"+inv+"/pay", nil, key("p2")...).wantProblem(t, http.StatusConflict, codeInvalidState)

	part := c.do("POST", "/v1/invoices/"+inv+"/refund", `{"amount":300}`, key("r1")...).want(t, http.StatusOK).obj(t)
	if part["status"] != "paid" || part["amountRefunded"] != 300.0 {
		t.Errorf("partial refund %v", part)
	}
	p := c.do("POST", "/v1/invoices/"+inv+"/refund", `{"amount":800}`, key("r2")...).wantProblem(t, http.StatusUnprocessableEntity, codeValidationFailed)
	if p["errors"].([]any)[0].(map[string]any)["field"] != "amount" {
		t.Errorf("errors %v", p["errors"])
	}
	c.do("POST", "/v1/invoices/"+inv+"/refund", `{"amount":0}`, key("r3")...).wantProblem(t, http.StatusUnprocessableEntity, codeValidationFailed)
	full := c.do("POST", "/v1/invoices/"+inv+"/refund", nil, key("r4")...).want(t, http.StatusOK).obj(t)
	if full["status"] != "refunded" || full["amountRefunded"] != 1000.0 {
		t.Errorf("full refund %v", full)
	}
	c.do("POST", "/v1/invoices/"+inv+"/refund", nil, key("r5")...).wantProblem(t, http.StatusConflict, codeInvalidState)
	c.do("POST", "/v1/invoices/inv_01ARZ3NDEKTSV4RRFFQ69G5FAV/pay", nil, key("p3")...).wantProblem(t, http.StatusNotFound, codeNotFound)

	got := c.do("GET", "/v1/invoices/"+inv, nil).want(t, http.StatusOK)
	if got.header.Get("ETag") == "" || got.obj(t)["status"] != "refunded" {
		t.Errorf("get invoice %s", got.body)
	}

	var list struct {
		Data       []invoiceJSON
		NextCursor *string
	}
	c.do("GET", "/v1/invoices", nil).want(t, http.StatusOK).decode(t, &list)
	if len(list.Data) != 2 || list.NextCursor != nil {
		t.Errorf("list %+v", list)
	}
	c.do("GET", "/v1/invoices?status=draft", nil).decode(t, &list)
	if len(list.Data) != 1 || list.Data[0].Status != "draft" {
		t.Errorf("status=draft %+v", list.Data)
	}
	c.do("GET", "/v1/invoices?status=lost", nil).wantProblem(t, http.StatusBadRequest, codeBadRequest)
}

func TestInvoiceValidation(t *testing.T) {
	c := newTester(t, New())
	con := c.createContact("Kunde")
	cases := []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"amount": 1, "currency": "EUR"}, "contactId"},
		{map[string]any{"contactId": "con_01ARZ3NDEKTSV4RRFFQ69G5FAV", "amount": 1, "currency": "EUR"}, "contactId"},
		{map[string]any{"contactId": con, "currency": "EUR"}, "amount"},
		{map[string]any{"contactId": con, "amount": 0, "currency": "EUR"}, "amount"},
		{map[string]any{"contactId": con, "amount": 1.5, "currency": "EUR"}, "amount"},
		{map[string]any{"contactId": con, "amount": 1}, "currency"},
		{map[string]any{"contactId": con, "amount": 1, "currency": "eur"}, "currency"},
		{map[string]any{"contactId": con, "amount": 1, "currency": "EUR", "status": "paid"}, "status"},
	}
	for _, tc := range cases {
		p := c.do("POST", "/v1/invoices", tc.body).wantProblem(t, http.StatusUnprocessableEntity, codeValidationFailed)
		errs := p["errors"].([]any)
		if len(errs) != 1 || errs[0].(map[string]any)["field"] != tc.field {
			t.Errorf("%v: errors %v, want one for %s", tc.body, errs, tc.field)
		}
	}
}

func TestExportRunsToCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTester(t, New(WithLimits(Limits{ExportDuration: 5 * time.Second})))
		c.createContact("Eins")
		c.createContact("Zwei")
		r := c.do("POST", "/v1/exports", map[string]any{"resource": "contacts", "format": "csv"}).want(t, http.StatusAccepted)
		op := r.obj(t)
		id := op["id"].(string)
		if r.header.Get("Location") != "/v1/operations/"+id || op["status"] != "running" || op["kind"] != "export" ||
			op["finishedAt"] != nil || op["result"] != nil || op["error"] != nil {
			t.Fatalf("export %s, Location %q", r.body, r.header.Get("Location"))
		}
		running := c.do("GET", "/v1/operations/"+id, nil).want(t, http.StatusOK)
		c.do("GET", "/v1/operations/"+id, nil, "If-None-Match", running.header.Get("ETag")).want(t, http.StatusNotModified)

		time.Sleep(5 * time.Second)
		done := c.do("GET", "/v1/operations/"+id, nil, "If-None-Match", running.header.Get("ETag")).want(t, http.StatusOK).obj(t)
		res, _ := done["result"].(map[string]any)
		if done["status"] != "succeeded" || done["finishedAt"] != "2000-01-01T00:00:05.000Z" || res["records"] != 2.0 ||
			!strings.HasSuffix(res["url"].(string), id+".csv") {
			t.Errorf("finished export %v", done)
		}
		var events struct{ Data []eventJSON }
		c.do("GET", "/v1/events", nil).decode(t, &events)
		last := events.Data[len(events.Data)-1]
		if last.Type != "export.succeeded" || last.CreatedAt != "2000-01-01T00:00:05.000Z" {
			t.Errorf("last event %+v", last)
		}
		for _, body := range []string{`{"resource":"users","format":"csv"}`, `{"resource":"contacts"}`, `{"format":"csv"}`} {
			c.do("POST", "/v1/exports", body).wantProblem(t, http.StatusUnprocessableEntity, codeValidationFailed)
		}
		c.do("GET", "/v1/operations/op_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil).wantProblem(t, http.StatusNotFound, codeNotFound)
	})
}

func TestEvents(t *testing.T) {
	c := newTester(t, New())
	con := c.createContact("Ereignis")
	c.do("PATCH", "/v1/contacts/"+con, `{"company":"X"}`).want(t, http.StatusOK)
	inv := c.createInvoice(con, 500, "open")
	c.do("POST", "/v1/invoices/"+inv+"/pay", nil, "Idempotency-Key", "a").want(t, http.StatusOK)
	c.do("POST", "/v1/invoices/"+inv+"/refund", nil, "Idempotency-Key", "b").want(t, http.StatusOK)
	c.do("DELETE", "/v1/contacts/"+con, nil).want(t, http.StatusNoContent)
	want := []string{"contact.created", "contact.updated", "invoice.created", "invoice.paid", "invoice.refunded", "contact.deleted"}

	var got []string
	after := ""
	for range 10 {
		var page struct {
			Data       []eventJSON
			NextCursor *string
		}
		c.do("GET", "/v1/events?limit=4&after="+after, nil).want(t, http.StatusOK).decode(t, &page)
		for _, e := range page.Data {
			got = append(got, e.Type)
			if !validID(e.ID, "evt_") || len(e.Data) == 0 {
				t.Errorf("event %+v", e)
			}
		}
		if page.NextCursor == nil {
			break
		}
		if *page.NextCursor != page.Data[len(page.Data)-1].ID {
			t.Errorf("nextCursor %s is not the last id", *page.NextCursor)
		}
		after = *page.NextCursor
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", got, want)
	}
	c.do("GET", "/v1/events?after=con_x", nil).wantProblem(t, http.StatusBadRequest, codeBadRequest)
	c.do("GET", "/v1/events?limit=500", nil).wantProblem(t, http.StatusBadRequest, codeBadRequest)
}

func TestMeRateLimitAndOpenAPI(t *testing.T) {
	c := newTester(t, New())
	var a, b, f meJSON
	c.do("GET", "/v1/me", nil).want(t, http.StatusOK).decode(t, &a)
	c.as(SecondKey).do("GET", "/v1/me", nil).want(t, http.StatusOK).decode(t, &b)
	c.as(ForeignKey).do("GET", "/v1/me", nil).want(t, http.StatusOK).decode(t, &f)
	if !validID(a.KeyID, "key_") || a.KeyID == b.KeyID || a.Principal.ID != b.Principal.ID || a.Principal.Type != "user" ||
		f.Principal.ID == a.Principal.ID || f.Principal.Type != "service_account" ||
		a.Organization.ID != f.Organization.ID || !validID(a.Organization.ID, "org_") || !validID(a.Principal.ID, "prn_") {
		t.Errorf("me: %+v %+v %+v", a, b, f)
	}

	var st rateLimitJSON
	c.do("GET", "/v1/rate_limit", nil).want(t, http.StatusOK).decode(t, &st)
	names := []string{"key", "write", "parallel", "principal", "org", "delete", "delete-day", "egress"}
	if len(st.Policies) != len(names) || st.LockedUntil != nil || st.RejectionsLast60s != 0 {
		t.Fatalf("status %+v", st)
	}
	for i, p := range st.Policies {
		if p.Name != names[i] {
			t.Errorf("policy %d is %s, want %s", i, p.Name, names[i])
		}
		if (p.Window == nil) != (p.Name == "parallel") || (p.Capacity != nil) != (p.Name == "key") {
			t.Errorf("%s: window %v capacity %v", p.Name, p.Window, p.Capacity)
		}
	}
	if k := st.Policies[0]; k.Quota != 300 || *k.Capacity != 600 || k.Remaining != 598 || *k.Window != 60 || k.Unit != "points" {
		t.Errorf("key %+v (me and rate_limit cost 1 each)", k)
	}
	if p := st.Policies[2]; p.Remaining != 5 || p.Unit != "concurrent-requests" {
		t.Errorf("parallel %+v (this call is in flight)", p)
	}

	r := c.do("GET", "/v1/openapi.json", nil).want(t, http.StatusOK)
	if !bytes.Equal(r.body, ops.Spec) || r.header.Get("Content-Type") != "application/json" {
		t.Error("openapi.json is not ops.Spec")
	}
}

func TestRoutingAndAuth(t *testing.T) {
	c := newTester(t, New())
	c.do("GET", "/v1/nothing", nil).wantProblem(t, http.StatusNotFound, codeNotFound)
	c.do("GET", "/v1/contacts/", nil).wantProblem(t, http.StatusNotFound, codeNotFound)
	if r := c.do("PUT", "/v1/contacts", nil); r.wantProblem(t, http.StatusMethodNotAllowed, codeMethodNotAllowed) != nil && r.header.Get("Allow") != "GET, POST" {
		t.Errorf("405 with Allow %q, want GET, POST", r.header.Get("Allow"))
	}
	c.do("DELETE", "/v1/invoices/inv_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil).wantProblem(t, http.StatusMethodNotAllowed, codeMethodNotAllowed)
	c.do("GET", "/v2/contacts", nil).wantProblem(t, http.StatusNotFound, codeNotFound)
	c.do("GET", "/v1/me", nil, "Bodo-Version", "2019-01-01").wantProblem(t, http.StatusBadRequest, codeBadRequest)
	c.do("GET", "/v1/me", nil, "Bodo-Version", APIVersion).want(t, http.StatusOK)
	if p := c.points(); p != 1 {
		t.Errorf("unknown routes and versions charged: %d points", p)
	}

	c.as("").do("GET", "/v1/me", nil).wantProblem(t, http.StatusUnauthorized, codeUnauthenticated)
	c.as("bodo_test_unknown").do("GET", "/v1/me", nil).wantProblem(t, http.StatusUnauthorized, codeUnauthenticated)
	c.do("GET", "/v1/me", nil, "Authorization", "Basic "+TestKey).wantProblem(t, http.StatusUnauthorized, codeUnauthenticated)
	if st := c.s.Stats("bodo_test_unknown"); st.Requests != 0 || st.Refusals == nil {
		t.Errorf("stats of an unknown key %+v", st)
	}
	c.do("GET", "/v1/me", nil, "Authorization", "bearer "+TestKey).want(t, http.StatusOK)
}

func TestBatch(t *testing.T) {
	c := newTester(t, New())
	con := c.createContact("Vorhanden")
	r := c.do("POST", "/v1/batch", map[string]any{"requests": []map[string]any{
		{"method": "POST", "path": "/v1/contacts", "body": map[string]any{"name": "Neu"}},
		{"method": "GET", "path": "/v1/contacts/" + con},
		{"method": "PATCH", "path": "/v1/contacts/" + con, "body": map[string]any{"name": ""}},
		{"method": "GET", "path": "/v1/nowhere"},
		{"method": "DELETE", "path": "/v1/contacts/" + con},
		{"method": "POST", "path": "/v1/invoices/inv_01ARZ3NDEKTSV4RRFFQ69G5FAV/pay"},
		{"method": "GET", "path": "/v1/contacts/count?q=neu"},
	}}).want(t, http.StatusOK)
	var out struct {
		Responses []struct {
			Status int
			Body   map[string]any
		}
	}
	r.decode(t, &out)
	want := []int{201, 200, 422, 404, 204, 400, 200}
	if len(out.Responses) != len(want) {
		t.Fatalf("responses %s", r.body)
	}
	for i, w := range want {
		if out.Responses[i].Status != w {
			t.Errorf("part %d: status %d, want %d: %v", i, out.Responses[i].Status, w, out.Responses[i].Body)
		}
	}
	if out.Responses[0].Body["name"] != "Neu" || out.Responses[4].Body != nil ||
		out.Responses[5].Body["code"] != codeIdemKeyRequired || out.Responses[3].Body["instance"] != "/v1/nowhere" ||
		out.Responses[6].Body["count"] != 1.0 {
		t.Errorf("bodies %s", r.body)
	}
	if c.s.ContactsNamed("Neu") != 1 || c.s.ContactsNamed("Vorhanden") != 0 {
		t.Error("batch parts did not run")
	}

	// A body that is no JSON object is 400, like every other body; one
	// that does not match BatchRequest is 422 with the fields.
	for _, body := range []string{`not json`, `[]`, `null`} {
		c.do("POST", "/v1/batch", body).wantProblem(t, http.StatusBadRequest, codeBadRequest)
	}
	invalid := []struct{ body, field string }{
		{`{}`, "requests"},
		{`{"requests":[]}`, "requests"},
		{`{"requests":{}}`, "requests"},
		{`{"requests":[` + strings.Repeat(`{"method":"GET","path":"/v1/me"},`, 20) + `{"method":"GET","path":"/v1/me"}]}`, "requests"},
		{`{"requests":[{"method":"POST","path":"/v1/batch","body":{"requests":[]}}]}`, "requests[0].path"},
		{`{"requests":[{"method":"GET","path":"/v1/me"},{"method":"PUT","path":"/v1/me"}]}`, "requests[1].method"},
		{`{"requests":[{"path":"/v1/me"}]}`, "requests[0].method"},
		{`{"requests":[{"method":"GET","path":"https://evil.example/v1/me"}]}`, "requests[0].path"},
		{`{"requests":[{"method":"GET","path":"/v2/me"}]}`, "requests[0].path"},
		{`{"requests":[{"method":"GET","path":5}]}`, "requests[0].path"},
		{`{"requests":[{"method":"POST","path":"/v1/contacts","body":{"name":"L"},"idempotencyKey":""}]}`, "requests[0].idempotencyKey"},
		{`{"requests":[{"method":"POST","path":"/v1/contacts","body":{"name":"L"},"idempotencyKey":"` + strings.Repeat("k", 256) + `"}]}`, "requests[0].idempotencyKey"},
		{`{"requests":[7]}`, "requests[0]"},
	}
	for _, tc := range invalid {
		p := c.do("POST", "/v1/batch", tc.body).wantProblem(t, http.StatusUnprocessableEntity, codeValidationFailed)
		errs, _ := p["errors"].([]any)
		if len(errs) == 0 || errs[0].(map[string]any)["field"] != tc.field {
			t.Errorf("%.80s: errors %v, want field %s", tc.body, p["errors"], tc.field)
		}
	}
	if c.s.ContactsNamed("L") != 0 {
		t.Error("an invalid batch ran")
	}
}
