package sandbox

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRateLimitPolicyField(t *testing.T) {
	c := newTester(t, New())
	r := c.do("GET", "/v1/me", nil)
	items, err := parseSFList(r.header.Values("RateLimit-Policy"))
	if err != nil {
		t.Fatalf("RateLimit-Policy %q: %v", r.header.Get("RateLimit-Policy"), err)
	}
	want := []struct {
		name string
		q, w int64
		qu   string
	}{
		{"key", 300, 60, "points"},
		{"write", 60, 60, ""},
		{"parallel", 6, 0, "concurrent-requests"},
		{"principal", 1200, 60, "points"},
		{"org", 3000, 60, "points"},
		{"delete", 10, 60, ""},
		{"delete-day", 300, 86400, ""},
		{"egress", 10000, 3600, "records"},
	}
	if len(items) != len(want) {
		t.Fatalf("%d policies: %q", len(items), r.header.Get("RateLimit-Policy"))
	}
	for i, w := range want {
		it := items[i]
		q, _ := it.params["q"].(int64)
		wv, hasW := it.params["w"].(int64)
		qu, hasQu := it.params["qu"].(string)
		if it.name != w.name || q != w.q || wv != w.w || hasW != (w.w != 0) || qu != w.qu || hasQu != (w.qu != "") {
			t.Errorf("policy %d: %+v, want %+v", i, it, w)
		}
	}
	if got := r.header.Get("RateLimit-Policy"); !strings.HasPrefix(got, `"key";q=300;w=60;qu="points", "write";q=60;w=60, "parallel";q=6;qu="concurrent-requests", `) {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if got := r.header.Get("RateLimit"); got != `"key";r=599;t=1` {
		t.Errorf("RateLimit %q", got)
	}
}

func TestEveryResponseCarriesTheHeaders(t *testing.T) {
	s := New(WithLimits(Limits{WriteQuota: 1}), WithFaults(func(r *http.Request) Fault {
		if r.Header.Get("X-Overload") != "" {
			return Fault{Overloaded: http.StatusServiceUnavailable}
		}
		return Fault{}
	}))
	c := newTester(t, s)
	id := c.createContact("H")
	etag := c.do("GET", "/v1/contacts/"+id, nil).header.Get("ETag")
	replies := map[string]*reply{
		"304": c.do("GET", "/v1/contacts/"+id, nil, "If-None-Match", etag),
		"400": c.do("GET", "/v1/contacts?limit=0", nil),
		"401": c.as("").do("GET", "/v1/me", nil),
		"404": c.do("GET", "/v1/nope", nil),
		"412": c.as(SecondKey).do("PATCH", "/v1/contacts/"+id, `{}`, "If-Match", `"x"`),
		"429": c.do("POST", "/v1/contacts", `{"name":"H"}`),
		"503": c.do("GET", "/v1/me", nil, "X-Overload", "1"),
		"204": c.as(ForeignKey).do("DELETE", "/v1/contacts/"+id, nil),
	}
	seen := map[string]bool{}
	for status, r := range replies {
		if got := r.status; http.StatusText(got) == "" || status != itoa(got) {
			t.Errorf("%s: status %d", status, got)
		}
		id := r.header.Get("Request-Id")
		if !requestIDPattern.MatchString(id) || seen[id] {
			t.Errorf("%s: Request-Id %q", status, id)
		}
		seen[id] = true
		if r.header.Get("Bodo-Version") != "2026-11-01" || r.header.Get("RateLimit-Policy") == "" {
			t.Errorf("%s: headers %v", status, r.header)
		}
		rateLimit(t, r.header)
	}
}

func TestTransportResponses(t *testing.T) {
	s := New()
	hc := &http.Client{Transport: s.Transport()}
	req, _ := http.NewRequest("POST", "http://sandbox.test/v1/contacts", strings.NewReader(`{"name":"T"}`))
	req.Header.Set("Authorization", "Bearer "+TestKey)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 || resp.Status != "201 Created" || resp.ContentLength != int64(len(b)) ||
		resp.Request != req || resp.Header.Get("Content-Type") != "application/json" || resp.ProtoMajor != 1 {
		t.Errorf("response %+v", resp)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
		t.Error("read after Close succeeded")
	}
	if _, err := http.ParseTime(resp.Header.Get("Date")); err != nil {
		t.Errorf("Date: %v", err)
	}
}

func TestOverLoopback(t *testing.T) {
	s := New(WithFaults(func(r *http.Request) Fault {
		return Fault{DropAfterCommit: r.Header.Get("X-Drop") != ""}
	}))
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := newTester(t, s)
	c.base, c.hc = srv.URL, srv.Client()

	r := c.do("POST", "/v1/contacts", `{"name":"Netz","email":"netz@example.com"}`, "Idempotency-Key", "n1").want(t, http.StatusCreated)
	id := r.obj(t)["id"].(string)
	got := c.do("GET", "/v1/contacts/"+id, nil).want(t, http.StatusOK)
	c.do("GET", "/v1/contacts/"+id, nil, "If-None-Match", got.header.Get("ETag")).want(t, http.StatusNotModified)
	c.do("DELETE", "/v1/contacts/"+id, nil).want(t, http.StatusNoContent)
	p := c.do("GET", "/v1/contacts/"+id, nil).wantProblem(t, http.StatusNotFound, codeNotFound)
	if p["instance"] != "/v1/contacts/"+id {
		t.Errorf("instance %v", p["instance"])
	}
	if name, rem, _ := rateLimit(t, got.header); name != "key" || rem < 590 {
		t.Errorf("RateLimit %s r=%d", name, rem)
	}

	req, _ := c.request("POST", "/v1/contacts", `{"name":"Fort"}`, "Idempotency-Key", "n2", "X-Drop", "1")
	if resp, err := c.hc.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("dropped connection answered")
	}
	c.hc.CloseIdleConnections()
	c.do("POST", "/v1/contacts", `{"name":"Fort"}`, "Idempotency-Key", "n2").want(t, http.StatusCreated)
	if s.ContactsNamed("Fort") != 1 {
		t.Error("retry after a drop wrote twice")
	}
	// net/http itself may resend the dropped request once (it carries an
	// Idempotency-Key), so only the outcome is checked.
	if st := s.Stats(TestKey); st.InFlight != 0 || st.Writes != 3 {
		t.Errorf("stats %+v", st)
	}
}
