package sandbox

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// tester talks to a sandbox through its in-process transport (or, with
// base set to an httptest URL, over loopback).
type tester struct {
	t    testing.TB
	s    *Server
	hc   *http.Client
	base string
	key  string
}

func newTester(t testing.TB, s *Server) *tester {
	return &tester{t: t, s: s, hc: &http.Client{Transport: s.Transport()}, base: "http://sandbox.test", key: TestKey}
}

func (c *tester) as(key string) *tester {
	cp := *c
	cp.key = key
	return &cp
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request. body is nil, a string sent as is, or a value sent as
// JSON; hdr are header name/value pairs.
func (c *tester) do(method, path string, body any, hdr ...string) *reply {
	c.t.Helper()
	req, err := c.request(method, path, body, hdr...)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return &reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func (c *tester) request(method, path string, body any, hdr ...string) (*http.Request, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		rd = bytes.NewReader(marshal(b))
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req, nil
}

func (r *reply) want(t testing.TB, status int) *reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	return r
}

func (r *reply) obj(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

func (r *reply) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
}

var requestIDPattern = regexp.MustCompile(`^req_[0-7][0-9A-HJKMNP-TV-Z]{25}$`)

// wantProblem checks status, code and the problem+json shape.
func (r *reply) wantProblem(t testing.TB, status int, code string) map[string]any {
	t.Helper()
	r.want(t, status)
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q", ct)
	}
	if cl := r.header.Get("Content-Language"); cl != "de" {
		t.Errorf("Content-Language %q", cl)
	}
	p := r.obj(t)
	if p["code"] != code {
		t.Fatalf("code %v, want %s; body %s", p["code"], code, r.body)
	}
	if p["type"] != problemBase+code || p["title"] == "" || p["detail"] == "" || p["status"] != float64(status) {
		t.Errorf("problem fields: %s", r.body)
	}
	if p["requestId"] != r.header.Get("Request-Id") || !requestIDPattern.MatchString(r.header.Get("Request-Id")) {
		t.Errorf("requestId %v, Request-Id %q", p["requestId"], r.header.Get("Request-Id"))
	}
	if inst, _ := p["instance"].(string); !strings.HasPrefix(inst, "/") {
		t.Errorf("instance %v", p["instance"])
	}
	return p
}

// wantRefusal checks a 429 and the consistency of Retry-After and
// retryAfterMs, returning the problem and retryAfterMs.
func (r *reply) wantRefusal(t testing.TB, code, policy string) (map[string]any, int64) {
	t.Helper()
	p := r.wantProblem(t, http.StatusTooManyRequests, code)
	if p["policy"] != policy {
		t.Fatalf("policy %v, want %s; body %s", p["policy"], policy, r.body)
	}
	ms, ok := p["retryAfterMs"].(float64)
	if !ok || ms <= 0 {
		t.Fatalf("retryAfterMs %v", p["retryAfterMs"])
	}
	ra, err := strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
	if err != nil {
		t.Fatalf("Retry-After %q: %v", r.header.Get("Retry-After"), err)
	}
	if want := max(int64(math.Ceil(ms/1000)), 1); ra != want {
		t.Errorf("Retry-After %d, want ceil(%vms) = %d", ra, ms, want)
	}
	return p, int64(ms)
}

// rateLimit parses the RateLimit field: one item with r and t.
func rateLimit(t testing.TB, h http.Header) (name string, remaining, reset int64) {
	t.Helper()
	l, err := parseSFList(h.Values("RateLimit"))
	if err != nil || len(l) != 1 {
		t.Fatalf("RateLimit %q: %v (%d items)", h.Values("RateLimit"), err, len(l))
	}
	rv, ok1 := l[0].params["r"].(int64)
	tv, ok2 := l[0].params["t"].(int64)
	if !ok1 || !ok2 || rv < 0 || tv < 0 {
		t.Fatalf("RateLimit %q: r and t must be non-negative integers", h.Values("RateLimit"))
	}
	name, remaining, reset = l[0].name, rv, tv
	return name, remaining, reset
}

func (r *reply) rateLimit(t testing.TB) (string, int64, int64) {
	t.Helper()
	return rateLimit(t, r.header)
}

// createContact makes a contact and returns its id.
func (c *tester) createContact(name string, extra ...any) string {
	c.t.Helper()
	body := map[string]any{"name": name}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	r := c.do("POST", "/v1/contacts", body).want(c.t, http.StatusCreated)
	return r.obj(c.t)["id"].(string)
}

func (c *tester) createInvoice(contactID string, amount int, status string) string {
	c.t.Helper()
	body := map[string]any{"contactId": contactID, "amount": amount, "currency": "EUR"}
	if status != "" {
		body["status"] = status
	}
	r := c.do("POST", "/v1/invoices", body).want(c.t, http.StatusCreated)
	return r.obj(c.t)["id"].(string)
}

// points returns what the key was charged so far.
func (c *tester) points() int { return c.s.Stats(c.key).PointsAccepted }
