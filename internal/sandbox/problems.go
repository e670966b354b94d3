package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Problem codes of bodo-api.md.
const (
	codeRateLimited        = "RATE_LIMITED"
	codeOverloaded         = "OVERLOADED"
	codeQuotaExhausted     = "QUOTA_EXHAUSTED"
	codeBadRequest         = "BAD_REQUEST"
	codeIdemKeyRequired    = "IDEMPOTENCY_KEY_REQUIRED"
	codeUnauthenticated    = "UNAUTHENTICATED"
	codeNotFound           = "NOT_FOUND"
	codeMethodNotAllowed   = "METHOD_NOT_ALLOWED"
	codeInvalidState       = "INVALID_STATE"
	codeIdemKeyInUse       = "IDEMPOTENCY_KEY_IN_USE"
	codePreconditionFailed = "PRECONDITION_FAILED"
	codeValidationFailed   = "VALIDATION_FAILED"
	codeIdemKeyReused      = "IDEMPOTENCY_KEY_REUSED"
	codeInternal           = "INTERNAL"
)

const problemBase = "https://developers.bodo-app.com/problems/"

var problemTitles = map[string]string{
	codeRateLimited:        "Zu viele Anfragen",
	codeOverloaded:         "Dienst ausgelastet",
	codeQuotaExhausted:     "Kontingent verbraucht",
	codeBadRequest:         "Ungültige Anfrage",
	codeIdemKeyRequired:    "Idempotency-Key erforderlich",
	codeUnauthenticated:    "Nicht angemeldet",
	codeNotFound:           "Nicht gefunden",
	codeMethodNotAllowed:   "Methode nicht erlaubt",
	codeInvalidState:       "Ungültiger Zustand",
	codeIdemKeyInUse:       "Idempotency-Key in Bearbeitung",
	codePreconditionFailed: "Vorbedingung fehlgeschlagen",
	codeValidationFailed:   "Ungültige Felder",
	codeIdemKeyReused:      "Idempotency-Key wiederverwendet",
	codeInternal:           "Interner Fehler",
}

// problem is an RFC 9457 body with bodo's extension members.
type problem struct {
	Type         string       `json:"type"`
	Title        string       `json:"title"`
	Status       int          `json:"status"`
	Detail       string       `json:"detail,omitempty"`
	Instance     string       `json:"instance,omitempty"`
	Code         string       `json:"code"`
	RequestID    string       `json:"requestId"`
	RetryAfterMs *int64       `json:"retryAfterMs,omitempty"`
	Policy       string       `json:"policy,omitempty"`
	ResetsAt     string       `json:"resetsAt,omitempty"`
	Errors       []fieldError `json:"errors,omitempty"`
}

type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// answer is a complete response before it is written: handlers return it,
// the idempotency store keeps it, batches embed it.
type answer struct {
	status  int
	header  http.Header
	body    []byte
	code    string // problem code, "" for success
	records int    // records read, for the egress level
	writes  int    // writes committed
}

func newAnswer(status int) answer {
	return answer{status: status, header: http.Header{}}
}

func jsonAnswer(status int, v any) answer {
	a := newAnswer(status)
	a.header.Set("Content-Type", "application/json")
	a.body = marshal(v)
	return a
}

func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("null")
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func problemAnswer(p problem) answer {
	p.Type = problemBase + p.Code
	p.Title = problemTitles[p.Code]
	a := newAnswer(p.Status)
	a.header.Set("Content-Type", "application/problem+json")
	a.header.Set("Content-Language", "de")
	a.body = marshal(p)
	a.code = p.Code
	return a
}

// fail builds a problem for call c.
func (c *call) fail(status int, code, detail string) answer {
	return problemAnswer(problem{Status: status, Code: code, Detail: detail, Instance: c.path, RequestID: c.reqID})
}

func (c *call) badRequest(format string, args ...any) answer {
	return c.fail(http.StatusBadRequest, codeBadRequest, fmt.Sprintf(format, args...))
}

func (c *call) notFound() answer {
	return c.fail(http.StatusNotFound, codeNotFound, "Diese Ressource gibt es nicht.")
}

// methodNotAllowed answers a method that a known path does not take: 405
// with Allow.
func (c *call) methodNotAllowed(allow []string) answer {
	a := c.fail(http.StatusMethodNotAllowed, codeMethodNotAllowed, fmt.Sprintf("Dieser Pfad nimmt %s, nicht %s.", strings.Join(allow, ", "), c.method))
	a.header.Set("Allow", strings.Join(allow, ", "))
	return a
}

func (c *call) invalid(errs []fieldError) answer {
	return problemAnswer(problem{
		Status: http.StatusUnprocessableEntity, Code: codeValidationFailed,
		Detail: "Einige Felder sind ungültig.", Instance: c.path, RequestID: c.reqID, Errors: errs,
	})
}

// retryable adds Retry-After (whole seconds, at least 1) and retryAfterMs.
func retryable(p problem, wait time.Duration) answer {
	ms := ceilDiv(wait, time.Millisecond)
	p.RetryAfterMs = &ms
	a := problemAnswer(p)
	a.header.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(wait), 10))
	return a
}

func retryAfterSeconds(wait time.Duration) int64 {
	return max(ceilDiv(wait, time.Second), 1)
}

func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + unit - 1) / unit)
}
