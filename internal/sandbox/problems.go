package sandbox

import (
	"bytes"
	"encoding/json"
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

var problemTitles = map[string]msg{
	codeRateLimited:        {"Zu viele Anfragen", "Too many requests"},
	codeOverloaded:         {"Dienst ausgelastet", "Service overloaded"},
	codeQuotaExhausted:     {"Kontingent verbraucht", "Quota exhausted"},
	codeBadRequest:         {"Ungültige Anfrage", "Bad request"},
	codeIdemKeyRequired:    {"Idempotency-Key erforderlich", "Idempotency-Key required"},
	codeUnauthenticated:    {"Nicht angemeldet", "Not authenticated"},
	codeNotFound:           {"Nicht gefunden", "Not found"},
	codeMethodNotAllowed:   {"Methode nicht erlaubt", "Method not allowed"},
	codeInvalidState:       {"Ungültiger Zustand", "Invalid state"},
	codeIdemKeyInUse:       {"Idempotency-Key in Bearbeitung", "Idempotency-Key in use"},
	codePreconditionFailed: {"Vorbedingung fehlgeschlagen", "Precondition failed"},
	codeValidationFailed:   {"Ungültige Felder", "Invalid fields"},
	codeIdemKeyReused:      {"Idempotency-Key wiederverwendet", "Idempotency-Key reused"},
	codeInternal:           {"Interner Fehler", "Internal error"},
}

// msgKeyRequired is the detail of IDEMPOTENCY_KEY_REQUIRED.
var msgKeyRequired = msg{"Geld-Aktionen brauchen einen Idempotency-Key.", "Money actions need an Idempotency-Key."}

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
	lang         lang         // of Title, Detail and the Errors' messages
}

// fieldError is one invalid field; Message is m with args in the answer's
// language, filled in by call.invalid.
type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
	m       msg
	args    []any
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
	p.Title = problemTitles[p.Code].in(p.lang)
	a := newAnswer(p.Status)
	a.header.Set("Content-Type", "application/problem+json")
	a.header.Set("Content-Language", p.lang.tag())
	a.body = marshal(p)
	a.code = p.Code
	return a
}

// fail builds a problem for call c, its detail m with args in c's
// language.
func (c *call) fail(status int, code string, m msg, args ...any) answer {
	return problemAnswer(c.problem(status, code, m, args...))
}

// problem is the problem of call c, for the callers that add members.
func (c *call) problem(status int, code string, m msg, args ...any) problem {
	return problem{Status: status, Code: code, Detail: m.in(c.lang, args...), Instance: c.path, RequestID: c.reqID, lang: c.lang}
}

func (c *call) badRequest(m msg, args ...any) answer {
	return c.fail(http.StatusBadRequest, codeBadRequest, m, args...)
}

func (c *call) notFound() answer {
	return c.fail(http.StatusNotFound, codeNotFound, msg{"Diese Ressource gibt es nicht.", "This resource does not exist."})
}

// methodNotAllowed answers a method that a known path does not take: 405
// with Allow.
func (c *call) methodNotAllowed(allow []string) answer {
	a := c.fail(http.StatusMethodNotAllowed, codeMethodNotAllowed,
		msg{"Dieser Pfad nimmt %s, nicht %s.", "This path takes %s, not %s."}, strings.Join(allow, ", "), c.method)
	a.header.Set("Allow", strings.Join(allow, ", "))
	return a
}

// invalid answers 422 VALIDATION_FAILED with errs. Its detail ends without
// a full stop: clients print it followed by the list of fields.
func (c *call) invalid(errs []fieldError) answer {
	for i := range errs {
		errs[i].Message = errs[i].m.in(c.lang, errs[i].args...)
	}
	detail := msg{"%d Felder sind ungültig", "%d fields are invalid"}
	if len(errs) == 1 {
		detail = msg{"%d Feld ist ungültig", "%d field is invalid"}
	}
	p := c.problem(http.StatusUnprocessableEntity, codeValidationFailed, detail, len(errs))
	p.Errors = errs
	return problemAnswer(p)
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
