package bodo

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/jarcoal/httpmock"
)

func TestErrorMappingOfEveryProblemCode(t *testing.T) {
	cases := []struct {
		status int
		code   string
		is     error
	}{
		{429, CodeRateLimited, ErrRateLimited},
		{503, CodeOverloaded, ErrOverloaded},
		{429, CodeQuotaExhausted, ErrQuotaExhausted},
		{400, CodeBadRequest, ErrBadRequest},
		{400, CodeIdempotencyKeyRequired, ErrIdempotencyKeyRequired},
		{401, CodeUnauthenticated, ErrUnauthenticated},
		{404, CodeNotFound, ErrNotFound},
		{405, CodeMethodNotAllowed, ErrMethodNotAllowed},
		{409, CodeInvalidState, ErrInvalidState},
		{409, CodeIdempotencyKeyInUse, ErrIdempotencyKeyInUse},
		{412, CodePreconditionFailed, ErrPreconditionFailed},
		{422, CodeValidationFailed, ErrValidation},
		{422, CodeIdempotencyKeyReused, ErrIdempotencyKeyReused},
		{500, CodeInternal, ErrInternal},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			c, mt := mockClient(t, WithMaxRetries(0))
			members := map[string]any{"policy": "key", "retryAfterMs": 1500}
			if tc.code == CodeValidationFailed {
				members["errors"] = []map[string]string{{"field": "name", "message": "fehlt"}}
			}
			if tc.code == CodeQuotaExhausted {
				members["resetsAt"] = "2026-12-01T00:00:00Z"
				members["policy"] = "delete-day"
			}
			mt.RegisterResponder("GET", "=~/v1/contacts/", problemResponder(tc.status, tc.code, http.Header{"Retry-After": {"2"}}, members))
			_, err := c.Contacts.Get(context.Background(), "con_01JBD8Y3K5M7Q2W9X4Z6T1V0NP")
			if !errors.Is(err, tc.is) {
				t.Fatalf("errors.Is(%v, %v) = false", err, tc.is)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%T is no *Error", err)
			}
			if e.Status != tc.status || e.Code != tc.code || e.RequestID != "req_01JBD8Y3K5M7Q2W9X4Z6T1V0NP" ||
				e.Title != "Titel" || e.Detail != "Einzelheiten." || e.Instance != "/v1/contacts" ||
				e.Type != "https://developers.bodo-app.com/problems/"+tc.code || e.Operation != "getContact" {
				t.Errorf("fields: %+v", e)
			}
			if e.RetryAfter != 1500*time.Millisecond {
				t.Errorf("RetryAfter = %v, want retryAfterMs 1.5s over Retry-After 2s", e.RetryAfter)
			}
			if tc.code == CodeValidationFailed && (len(e.Fields) != 1 || e.Fields[0].Field != "name") {
				t.Errorf("Fields = %+v", e.Fields)
			}
			if tc.code == CodeQuotaExhausted && !e.ResetsAt.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
				t.Errorf("ResetsAt = %v", e.ResetsAt)
			}
			if e.Response == nil || e.Request == nil || len(e.Body) == 0 {
				t.Errorf("no response, request or body kept")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, tc.code) || !strings.Contains(msg, "getContact") {
				t.Errorf("Error() = %q", msg)
			}
			if strings.Contains(msg, testKey) || strings.Contains(e.Request.Header.Get("Authorization"), testKey) ||
				strings.Contains(e.Response.Request.Header.Get("Authorization"), testKey) {
				t.Errorf("the API key leaks into the error")
			}
			for _, other := range sentinelByCode {
				if other != tc.is && errors.Is(err, other) && !(tc.code == CodeIdempotencyKeyRequired && other == ErrBadRequest) {
					t.Errorf("%s also matches %v", tc.code, other)
				}
			}
		})
	}
}

// TestErrorsWithoutProblemBody covers answers the sandbox never gives.
func TestErrorsWithoutProblemBody(t *testing.T) {
	cases := []struct {
		name        string
		status      int
		contentType string
		body        string
		is          error
	}{
		{"html 502 from a proxy", 502, "text/html", "<html><body>Bad Gateway</body></html>", nil},
		{"truncated problem json", 404, "application/problem+json", `{"type":"https://developers.bodo-app.com/problems/NOT_FOUND","code":"NOT_F`, ErrNotFound},
		{"problem with wrong content type", 404, "text/plain", `{"code":"NOT_FOUND"}`, ErrNotFound},
		{"empty 500", 500, "", "", ErrInternal},
		{"json without problem members", 401, "application/json", `{"message":"nope"}`, ErrUnauthenticated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, mt := mockClient(t, WithMaxRetries(0))
			mt.RegisterResponder("GET", "=~/v1/me", func(r *http.Request) (*http.Response, error) {
				resp := httpmock.NewStringResponse(tc.status, tc.body)
				if tc.contentType != "" {
					resp.Header.Set("Content-Type", tc.contentType)
				}
				resp.Request = r
				return resp, nil
			})
			_, err := c.Me(context.Background())
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%v (%T) is no *Error", err, err)
			}
			if e.Status != tc.status || e.Code != "" || string(e.Body) != tc.body {
				t.Errorf("got status %d code %q body %q", e.Status, e.Code, e.Body)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
			if e.Title == "" || strings.Contains(err.Error(), "\n") {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestInvalidSuccessBodyIsAnError(t *testing.T) {
	c, mt := mockClient(t)
	mt.RegisterResponder("GET", "=~/v1/me", httpmock.NewStringResponder(200, `{"keyId": "key_1", "principal": {`))
	_, err := c.Me(context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Status != 200 || !strings.Contains(err.Error(), "could not be read") {
		t.Fatalf("got %v", err)
	}
}

// TestInvalidSuccessBodyIsCappedInTheError: a 2xx body that cannot be
// read, up to the 32 MB a success may have, is kept in the error no longer
// than a problem's body.
func TestInvalidSuccessBodyIsCappedInTheError(t *testing.T) {
	c, mt := mockClient(t, WithMaxRetries(0))
	mt.RegisterResponder("GET", "=~/v1/contacts/", httpmock.NewStringResponder(200, `{"id":"`+strings.Repeat("x", 20<<20)))
	_, err := c.Contacts.Get(context.Background(), "con_1")
	var e *Error
	if !errors.As(err, &e) || len(e.Body) != maxProblemBody || cap(e.Body) != maxProblemBody {
		t.Fatalf("got %v with a body of %d bytes (capacity %d)", err, len(e.Body), cap(e.Body))
	}
}

// TestAnErrorIsOneLine: line breaks and other control characters in what
// the server said (detail, field messages, an operation's error) come out
// as spaces, so that an error forges no line of a log.
func TestAnErrorIsOneLine(t *testing.T) {
	c, mt := mockClient(t, WithMaxRetries(0))
	mt.RegisterResponder("GET", "=~/v1/contacts/", problemResponder(422, CodeValidationFailed, nil, map[string]any{
		"detail": "weg\nlevel=ERROR msg=\"forged\"\r",
		"errors": []map[string]string{{"field": "name\n", "message": "fehlt\u0000\u001b[31m"}},
	}))
	_, err := c.Contacts.Get(context.Background(), "con_1")
	if err == nil || strings.ContainsFunc(err.Error(), unicode.IsControl) {
		t.Errorf("%q", err)
	}
	op := &Operation{ID: "op_1", Error: Value(OperationError{Code: "EXPORT_FAILED", Message: "a\nb"})}
	if msg := (&OperationFailedError{Operation: op}).Error(); strings.ContainsFunc(msg, unicode.IsControl) {
		t.Errorf("%q", msg)
	}
}

// TestAZeroOperationFailedErrorSaysSo: the zero value prints and unwraps
// without a panic.
func TestAZeroOperationFailedErrorSaysSo(t *testing.T) {
	e := &OperationFailedError{}
	if e.Error() == "" || errors.Is(e, ErrInternal) || e.Unwrap() != nil {
		t.Errorf("%q", e.Error())
	}
}

func TestProblemBodyIsReadCapped(t *testing.T) {
	c, mt := mockClient(t, WithMaxRetries(0))
	big := `{"code":"INTERNAL","detail":"` + strings.Repeat("x", 3*maxProblemBody) + `"}`
	mt.RegisterResponder("GET", "=~/v1/me", httpmock.NewStringResponder(500, big).HeaderSet(http.Header{"Content-Type": {"application/problem+json"}}))
	_, err := c.Me(context.Background())
	var e *Error
	if !errors.As(err, &e) || len(e.Body) != maxProblemBody || e.Status != 500 {
		t.Fatalf("got %v with a body of %d bytes", err, len(e.Body))
	}
}

// TestErrorTextEndsTheDetailOnce: a detail that ends in a full stop and the
// invalid fields after it read as one sentence, not "ungültig.; email: …".
func TestErrorTextEndsTheDetailOnce(t *testing.T) {
	e := &Error{Operation: "createContact", Status: 422, Code: CodeValidationFailed, Detail: "Ein Feld ist ungültig.",
		Fields: []FieldError{{Field: "name", Message: "ist erforderlich"}, {Field: "tags[0]", Message: "muss ein Text sein"}}}
	want := "bodo: createContact: 422 VALIDATION_FAILED: Ein Feld ist ungültig; name: ist erforderlich, tags[0]: muss ein Text sein"
	if got := e.Error(); !strings.HasPrefix(got, want) {
		t.Errorf("Error() = %q, want it to start with %q", got, want)
	}
}

// TestEveryProblemCodeHasASentinel: every code openapi.json lists has a
// sentinel of its own that an *Error of that code matches, and a code the
// package does not know is matched by its status, as the API asks.
func TestEveryProblemCodeHasASentinel(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	list, _, _ := strings.Cut(doc.Components.Schemas["Problem"].Value.Properties["code"].Value.Description, ".")
	codes := strings.Split(list, ", ")
	if len(codes) < 14 {
		t.Fatalf("read %d codes from openapi.json: %q", len(codes), codes)
	}
	seen := map[error]string{}
	for _, code := range codes {
		s, ok := sentinelByCode[code]
		switch {
		case !ok:
			t.Errorf("%s has no sentinel", code)
			continue
		case seen[s] != "":
			t.Errorf("%s and %s share the sentinel %v", code, seen[s], s)
		}
		seen[s] = code
		if e := (&Error{Code: code, Status: 400}); !errors.Is(e, s) {
			t.Errorf("an *Error of %s does not match %v", code, s)
		}
	}
	if !errors.Is(&Error{Code: CodeIdempotencyKeyRequired, Status: 400}, ErrBadRequest) {
		t.Errorf("IDEMPOTENCY_KEY_REQUIRED does not match ErrBadRequest")
	}
	if e := (&Error{Code: "CONCURRENCY_LIMITED", Status: 429}); !errors.Is(e, ErrRateLimited) || errors.Is(e, ErrBadRequest) {
		t.Errorf("an unknown 429 code is not matched by its status")
	}
}

// TestAProblemMemberOfAnotherTypeIsIgnored: a problem member whose value
// has another type than its own is ignored (RFC 9457 3.1), and the others
// still count: a QUOTA_EXHAUSTED with one mistyped member is not retried.
func TestAProblemMemberOfAnotherTypeIsIgnored(t *testing.T) {
	for name, member := range map[string]map[string]any{
		"instance a number":     {"instance": 42},
		"errors a string":       {"errors": "none"},
		"detail a list":         {"detail": []string{"x"}},
		"status a string":       {"status": "429"},
		"an extension mistyped": {"policy": 7},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, mt := mockClient(t)
				var rec recorder
				members := map[string]any{"policy": "egress", "resetsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
				for k, v := range member {
					members[k] = v
				}
				mt.RegisterResponder("GET", "=~/v1/contacts/con_", rec.wrap(problemResponder(429, CodeQuotaExhausted, http.Header{"Retry-After": {"1"}}, members)))
				_, err := c.Contacts.Get(context.Background(), "con_01JBD8Y3K5M7Q2W9X4Z6T1V0NP")
				if rec.count() != 1 || !errors.Is(err, ErrQuotaExhausted) {
					t.Errorf("QUOTA_EXHAUSTED with %v: %d requests (want 1, not retried), err = %v", member, rec.count(), err)
				}
			})
		})
	}
}
