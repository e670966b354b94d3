package bodo

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go/internal/budget"
)

// FuzzParseRetryAfter: no panic, and any accepted hint is a wait between 0
// and maxHint.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"41", "0", "-1", "Mon, 30 Nov 2026 12:00:30 GMT", "Monday, 30-Nov-26 12:01:00 GMT", "Mon Nov 30 12:00:05 2026", "99999999999999999999", "1e3", " 5", "86400", "Fri, 31 Dec 9999 23:59:59 GMT"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := parseRetryAfter(v, now)
		if d < 0 || d > maxHint || !ok && d != 0 {
			t.Fatalf("parseRetryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}

// FuzzProblem feeds arbitrary answers to the problem parser, the wait
// computation and the budget: no panic, no negative wait, no wait beyond
// the bounds, no pause of the key longer than the contract allows.
func FuzzProblem(f *testing.F) {
	f.Add(429, "application/problem+json", "41", []byte(`{"type":"https://developers.bodo-app.com/problems/RATE_LIMITED","title":"Zu viele Anfragen","status":429,"code":"RATE_LIMITED","requestId":"req_01JBD8Y3K5M7Q2W9X4Z6T1V0NP","retryAfterMs":40250,"policy":"key"}`))
	f.Add(429, "application/problem+json", "", []byte(`{"code":"QUOTA_EXHAUSTED","resetsAt":"2026-12-01T00:00:00Z","policy":"egress"}`))
	f.Add(422, "application/problem+json; charset=utf-8", "", []byte(`{"code":"VALIDATION_FAILED","errors":[{"field":"name","message":"fehlt"}]}`))
	f.Add(503, "text/html", "Mon, 30 Nov 2026 12:00:30 GMT", []byte(`<html>overloaded</html>`))
	f.Add(429, "application/json", "-5", []byte(`{"code":"RATE_LIMITED","retryAfterMs":-1}`))
	f.Add(429, "application/problem+json", "x", []byte(`{"code":"RATE_LIMITED","retryAfterMs":1e300}`))
	f.Add(503, "text/html", "86400", []byte(`<html>Service Unavailable</html>`))
	f.Add(429, "application/problem+json", "86400", []byte(`{"code":"RATE_LIMITED","policy":"lockout","retryAfterMs":86400000}`))
	f.Fuzz(func(t *testing.T, status int, contentType, retryAfter string, body []byte) {
		resp := &http.Response{
			StatusCode: status,
			Header:     http.Header{"Content-Type": {contentType}, "Retry-After": {retryAfter}},
			Body:       io.NopCloser(bytes.NewReader(body)),
		}
		e := newError("getMe", resp, time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
		if e.RetryAfter < 0 || e.RetryAfter > maxHint {
			t.Fatalf("RetryAfter = %v", e.RetryAfter)
		}
		_ = e.Error()
		// The budget holds the key for no longer than the contract allows,
		// and not at all for an answer that is not the API's.
		st := budget.New()
		ticket, _, err := st.Admit(context.Background(), &budget.Call{Op: "getMe", Budgeted: true})
		if err != nil {
			t.Fatal(err)
		}
		ticket.Finish(answerOf(resp, e))
		paused := time.Until(st.Snapshot().PausedUntil)
		switch {
		case e.Code == "" && paused > 0:
			t.Fatalf("an answer without the API's problem paused the key for %v", paused)
		case e.Policy == "lockout" && paused > budget.MaxLockout, paused > budget.MaxServerWait:
			t.Fatalf("the key paused for %v after %s %s", paused, e.Code, e.Policy)
		}
		for n := range 6 {
			w, _ := retryWait(e, n)
			if w < 0 || w > maxHint+jitterBound(maxHint)+3*time.Second {
				t.Fatalf("wait %v", w)
			}
		}
	})
}
