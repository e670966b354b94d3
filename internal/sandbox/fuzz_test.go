package sandbox

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzServe checks that no method, path, body or header makes the sandbox
// panic or answer outside its contract.
func FuzzServe(f *testing.F) {
	f.Add("POST", "/v1/batch", `{"requests":[{"method":"PATCH","path":"/v1/contacts/con_1?x=%zz","body":{"name":null},"idempotencyKey":""}]}`, "k")
	f.Add("GET", "/v1/contacts?limit=1&cursor=Ym9kbzE6Y29uXw", "", "")
	f.Add("PATCH", "/v1/contacts/con_01ARZ3NDEKTSV4RRFFQ69G5FAV", `{"tags":[1]}`, "")
	f.Add("POST", "/v1/invoices", `{"contactId":1,"amount":"x","currency":null}`, "x")
	f.Add("POST", "/v1/invoices/inv_/refund", `{"amount":-1}`, "y")
	f.Add("GET", "/v1/events?after=evt_&limit=-1", "", "")
	// Hostile header values: an Idempotency-Key far past 255 characters,
	// and one with a line break and a NUL, alone and in a batch part.
	f.Add("POST", "/v1/contacts", `{"name":"Lang"}`, strings.Repeat("k", 1<<16))
	f.Add("POST", "/v1/contacts", `{"name":"Bruch"}`, "a\r\nRetry-After: 86400\x00")
	f.Add("POST", "/v1/batch", `{"requests":[{"method":"POST","path":"/v1/contacts","body":{"name":"x"},"idempotencyKey":"`+strings.Repeat("k", 4096)+`"}]}`, "b")
	lim := Limits{KeyQuota: 1 << 20, KeyCapacity: 1 << 20, PrincipalQuota: 1 << 20, OrgQuota: 1 << 21,
		WriteQuota: 1 << 20, DeleteQuota: 1 << 20, DeleteDayQuota: 1 << 20, EgressQuota: 1 << 30}
	s := New(WithLimits(lim))
	addContacts(s)
	f.Fuzz(func(t *testing.T, method, target, body, idem string) {
		if !strings.HasPrefix(target, "/") {
			return
		}
		req, err := http.NewRequest(method, "http://sandbox.test"+target, strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+TestKey)
		if idem != "" {
			req.Header.Set("Idempotency-Key", idem)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code < 200 || w.Code >= 500 || w.Header().Get("Request-Id") == "" || w.Header().Get("RateLimit") == "" {
			t.Errorf("%s %s %q: status %d, headers %v", method, target, body, w.Code, w.Header())
		}
	})
}

// addContacts gives the fuzzer's server some data to find.
func addContacts(s *Server) {
	for _, body := range []string{`{"name":"Fuzz","email":"f@example.com"}`, `{"name":"Zwei"}`} {
		req := httptest.NewRequest("POST", "/v1/contacts", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+TestKey)
		s.ServeHTTP(httptest.NewRecorder(), req)
	}
}
