package speccheck_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bodo-app/bodo-go/internal/sandbox"
	"github.com/bodo-app/bodo-go/internal/sandbox/speccheck"
)

// exchange runs one request against a fresh sandbox without validation and
// returns what Check says of it, after edit has changed the answer.
func exchange(t *testing.T, method, path, body string, edit func(status *int, h http.Header, b *[]byte)) string {
	t.Helper()
	s := sandbox.New(sandbox.WithValidation(false))
	req := httptest.NewRequest(method, "http://api.bodo-app.com"+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+sandbox.TestKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	status, h, b := rec.Code, rec.Header(), rec.Body.Bytes()
	if edit != nil {
		edit(&status, h, &b)
	}
	return speccheck.Check(req, []byte(body), status, h, b)
}

func TestCheckAcceptsTheSandbox(t *testing.T) {
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/me", ""},
		{"GET", "/v1/contacts?limit=5", ""},
		{"POST", "/v1/contacts", `{"name":"Ada","email":"ada"}`},
		{"POST", "/v1/contacts", `{"name":""}`}, // refused, as the spec says
		{"GET", "/v1/contacts/con_x", ""},       // 404
		{"PUT", "/v1/contacts", ""},             // 405
		{"GET", "/v1/nowhere", ""},              // 404
		{"POST", "/v1/batch", `{"requests":[{"method":"GET","path":"/v1/me"}]}`},
		{"POST", "/v1/batch", `{"requests":[]}`}, // 422
	} {
		if v := exchange(t, tc.method, tc.path, tc.body, nil); v != "" {
			t.Errorf("%s %s: %s", tc.method, tc.path, v)
		}
	}
}

func TestCheckFindsViolations(t *testing.T) {
	cases := []struct {
		name, method, path, body string
		edit                     func(status *int, h http.Header, b *[]byte)
		want                     string
	}{
		{"no RateLimit", "GET", "/v1/me", "", func(_ *int, h http.Header, _ *[]byte) { h.Del("RateLimit") }, "RateLimit"},
		{"no Request-Id", "GET", "/v1/me", "", func(_ *int, h http.Header, _ *[]byte) { h.Del("Request-Id") }, "Request-Id"},
		{"no Content-Language", "GET", "/v1/contacts/con_x", "", func(_ *int, h http.Header, _ *[]byte) { h.Del("Content-Language") }, "Content-Language"},
		{"Content-Language neither de nor en", "GET", "/v1/contacts/con_x", "", func(_ *int, h http.Header, _ *[]byte) { h.Set("Content-Language", "fr") }, "Content-Language"},
		{"no Location", "POST", "/v1/contacts", `{"name":"A"}`, func(_ *int, h http.Header, _ *[]byte) { h.Del("Location") }, "Location"},
		{"no ETag", "POST", "/v1/contacts", `{"name":"A"}`, func(_ *int, h http.Header, _ *[]byte) { h.Del("ETag") }, "ETag"},
		{"undeclared status", "GET", "/v1/me", "", func(s *int, _ http.Header, _ *[]byte) { *s = http.StatusTeapot }, "status"},
		{"bad body", "GET", "/v1/me", "", func(_ *int, _ http.Header, b *[]byte) { *b = []byte(`{"keyId":7}`) }, "keyId"},
		{"accepted a forbidden request", "POST", "/v1/contacts", `{"name":"A","tags":"x"}`, func(s *int, _ http.Header, _ *[]byte) { *s = http.StatusCreated }, "forbids"},
	}
	for _, tc := range cases {
		if v := exchange(t, tc.method, tc.path, tc.body, tc.edit); !strings.Contains(v, tc.want) {
			t.Errorf("%s: violation %q, want one naming %s", tc.name, v, tc.want)
		}
	}
}

func TestViolationAnswers500AndIsRecorded(t *testing.T) {
	// The sandbox answers by the description, so a violation cannot be
	// provoked from outside: a checker that always objects stands in.
	s := sandbox.New(sandbox.WithValidation(true))
	sandbox.RegisterChecker(func(*http.Request, []byte, int, http.Header, []byte) string { return "always" })
	defer sandbox.RegisterChecker(speccheck.Check)
	req := httptest.NewRequest("GET", "http://api.bodo-app.com/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+sandbox.TestKey)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "Verstoß gegen openapi.json: always") ||
		rec.Header().Get("Request-Id") == "" || rec.Header().Get("RateLimit") == "" {
		t.Errorf("answer %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	if vs := s.Violations(); len(vs) != 1 || vs[0] != "always" {
		t.Errorf("violations %q", vs)
	}
}
