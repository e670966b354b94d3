package bodo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/bodo-app/bodo-go/internal/budget"
)

// Problem codes of the bodo API: the code member of a problem answer, and
// Error.Code. The list is not closed: a code not listed here is matched by
// its HTTP status (see Error.Is).
const (
	CodeRateLimited            = "RATE_LIMITED"
	CodeOverloaded             = "OVERLOADED"
	CodeQuotaExhausted         = "QUOTA_EXHAUSTED"
	CodeBadRequest             = "BAD_REQUEST"
	CodeIdempotencyKeyRequired = "IDEMPOTENCY_KEY_REQUIRED"
	CodeUnauthenticated        = "UNAUTHENTICATED"
	CodeNotFound               = "NOT_FOUND"
	CodeMethodNotAllowed       = "METHOD_NOT_ALLOWED"
	CodeInvalidState           = "INVALID_STATE"
	CodeIdempotencyKeyInUse    = "IDEMPOTENCY_KEY_IN_USE"
	CodePreconditionFailed     = "PRECONDITION_FAILED"
	CodeValidationFailed       = "VALIDATION_FAILED"
	CodeIdempotencyKeyReused   = "IDEMPOTENCY_KEY_REUSED"
	CodeInternal               = "INTERNAL"
)

// Sentinels for errors.Is, one for every problem code. An *Error matches
// the sentinel of its Code (and, for answers without a problem body, of its
// HTTP status where one fits); IDEMPOTENCY_KEY_REQUIRED, a bad request of
// its own kind, matches ErrBadRequest as well.
var (
	ErrRateLimited          = errors.New("bodo: rate limited")
	ErrOverloaded           = errors.New("bodo: server overloaded")
	ErrQuotaExhausted       = errors.New("bodo: quota exhausted")
	ErrNotFound             = errors.New("bodo: not found")
	ErrUnauthenticated      = errors.New("bodo: unauthenticated")
	ErrValidation           = errors.New("bodo: validation failed")
	ErrIdempotencyKeyReused = errors.New("bodo: idempotency key reused with another request")
	ErrIdempotencyKeyInUse  = errors.New("bodo: idempotency key in use")
	ErrInvalidState         = errors.New("bodo: invalid state")
	ErrPreconditionFailed   = errors.New("bodo: precondition failed")
	ErrBadRequest           = errors.New("bodo: bad request")
	// ErrIdempotencyKeyRequired is a money action sent without an
	// Idempotency-Key; the client refuses it locally (see
	// WithoutIdempotencyKey).
	ErrIdempotencyKeyRequired = errors.New("bodo: idempotency key required")
	ErrMethodNotAllowed       = errors.New("bodo: method not allowed")
	ErrInternal               = errors.New("bodo: internal server error")
	// ErrCannotFit is a call the client refused because it needs more of a
	// level than the level can ever hold (a batch of 11 deletes, say):
	// split it. It is no rate limit and never goes away by waiting.
	ErrCannotFit = errors.New("bodo: the call can never fit the key's limits")
	// ErrNotModified is a 304 to a request whose If-None-Match the caller
	// set; with WithCache the client serves those from its cache instead.
	ErrNotModified = errors.New("bodo: not modified")
)

var sentinelByCode = map[string]error{
	CodeRateLimited:            ErrRateLimited,
	CodeOverloaded:             ErrOverloaded,
	CodeQuotaExhausted:         ErrQuotaExhausted,
	CodeNotFound:               ErrNotFound,
	CodeUnauthenticated:        ErrUnauthenticated,
	CodeValidationFailed:       ErrValidation,
	CodeIdempotencyKeyReused:   ErrIdempotencyKeyReused,
	CodeIdempotencyKeyInUse:    ErrIdempotencyKeyInUse,
	CodeInvalidState:           ErrInvalidState,
	CodePreconditionFailed:     ErrPreconditionFailed,
	CodeBadRequest:             ErrBadRequest,
	CodeIdempotencyKeyRequired: ErrIdempotencyKeyRequired,
	CodeMethodNotAllowed:       ErrMethodNotAllowed,
	CodeInternal:               ErrInternal,
}

// alsoByCode is the sentinel a code matches besides its own.
var alsoByCode = map[string]error{
	CodeIdempotencyKeyRequired: ErrBadRequest,
}

var sentinelByStatus = map[int]error{
	http.StatusNotModified:         ErrNotModified,
	http.StatusTooManyRequests:     ErrRateLimited,
	http.StatusServiceUnavailable:  ErrOverloaded,
	http.StatusNotFound:            ErrNotFound,
	http.StatusMethodNotAllowed:    ErrMethodNotAllowed,
	http.StatusUnauthorized:        ErrUnauthenticated,
	http.StatusPreconditionFailed:  ErrPreconditionFailed,
	http.StatusBadRequest:          ErrBadRequest,
	http.StatusInternalServerError: ErrInternal,
}

// Error is every error the client returns, or is wrapped in it (by a
// *RetryError, an *OperationFailedError, or an error that adds
// ErrOutcomeUnknown or the context's error): errors.As(err, &e) with e a
// *bodo.Error holds for every error of every call, and of NewClient.
//
// Most are answers: every problem+json answer becomes an *Error; so does
// any other non-2xx answer, such as an HTML 502 from a proxy, with Code
// empty, and a 2xx whose body cannot be read. With Local set the client
// did not send the call. Where it refused because the server is known to
// refuse it, Status and Code are that refusal (429 for the budget's, 400
// IDEMPOTENCY_KEY_REQUIRED for a money action sent with
// WithoutIdempotencyKey); where a middleware, the context, a panicking
// store or logger, or bad input stopped it, Status is 0.
//
// Status is 0 when no answer came: the connection failed or the context
// ended (Unwrap returns the transport's error, a *url.Error, so errors.Is
// finds context.DeadlineExceeded, context.Canceled or the network error),
// or the client found bad input before sending anything: a bad option, a
// nil context, a batch it cannot read, a bad configuration in NewClient
// (Code CodeBadRequest, so errors.Is(err, ErrBadRequest)).
type Error struct {
	Operation string // operationId, e.g. "createContact"; empty for NewClient
	Status    int    // HTTP status; 0 when no answer came
	Code      string // problem code, e.g. CodeRateLimited; empty when the body was no problem
	Title     string // a short summary of the problem's kind, for people (German unless asked otherwise)
	Detail    string // what happened in this case, for people
	Type      string // a URI naming the kind of problem
	Instance  string // the request path the problem is about
	RequestID string // the answer's Request-Id; quote it when you ask for support
	// RetryAfter is how long the server asked to wait: retryAfterMs when the
	// problem has it, else the Retry-After header (up to 24 h); zero when
	// neither did. It says what the answer asked, while the client sits out
	// at most 5 minutes of a lockout and an hour of any other wait (see
	// WithMaxRetryWait).
	RetryAfter time.Duration
	Policy     string       // the level that refused, e.g. "key" or "lockout"
	ResetsAt   time.Time    // when an exhausted quota resets (QUOTA_EXHAUSTED)
	Fields     []FieldError // the invalid fields (VALIDATION_FAILED)
	// Local is true when the client refused the call without sending it.
	Local bool
	// hinted is true when the server gave a wait (Retry-After or
	// retryAfterMs), even one of zero.
	hinted    bool
	cause     error // why an answer could not be read
	permanent bool  // refused locally for good: ErrCannotFit
	sentinel  error // the sentinel errors.Is finds, when the client named the error itself

	Body     []byte         // the raw answer body, capped
	Request  *http.Request  // the request, with Authorization redacted
	Response *http.Response // the response; its Body is already read and closed
}

// Error says in one line what happened and what to do about it.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("bodo: ")
	if e.Operation != "" {
		b.WriteString(e.Operation + ": ")
	}
	if e.Local {
		b.WriteString("not sent: ")
	}
	head := true
	switch {
	case e.Status != 0:
		fmt.Fprintf(&b, "%d", e.Status)
		if e.Code != "" {
			b.WriteString(" " + e.Code)
		} else if t := http.StatusText(e.Status); t != "" {
			b.WriteString(" " + t)
		}
	case e.Code != "":
		b.WriteString(e.Code)
	default:
		head = false // no answer: the detail says what happened
	}
	if e.Policy != "" {
		fmt.Fprintf(&b, " (policy %s)", e.Policy)
	}
	text := e.Detail
	if text == "" {
		text = e.Title
	}
	if len(e.Fields) > 0 {
		text = strings.TrimRight(text, ".!") // the fields follow: "…ungültig; email: …"
	}
	if text != "" {
		if head {
			b.WriteString(": ")
		}
		b.WriteString(text)
	}
	for i, f := range e.Fields {
		sep := "; "
		if i > 0 {
			sep = ", "
		}
		fmt.Fprintf(&b, "%s%s: %s", sep, f.Field, f.Message)
	}
	if advice := e.advice(); advice != "" {
		b.WriteString(" — " + advice)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " [%s]", e.RequestID)
	}
	return oneLine(b.String())
}

// oneLine is s with every control character (a line break of a server's
// detail, say) a space, so that an error is one line and forges no other
// line in a log.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

func (e *Error) advice() string {
	if e.permanent {
		return "split the call"
	}
	switch e.Code {
	case CodeRateLimited, CodeOverloaded, CodeIdempotencyKeyInUse:
		if e.RetryAfter > 0 {
			return fmt.Sprintf("retry after %v", e.RetryAfter)
		}
		return "retry later"
	case CodeQuotaExhausted:
		if !e.ResetsAt.IsZero() {
			return "do not retry before " + e.ResetsAt.UTC().Format(time.RFC3339)
		}
		return "do not retry before the quota resets"
	case CodeUnauthenticated:
		return "check the API key (WithAPIKey or BODO_API_KEY)"
	case CodeValidationFailed, CodeBadRequest, CodeIdempotencyKeyRequired:
		if e.Status == 0 {
			return "" // bad input: the detail says what to change
		}
		return "fix the request"
	case CodeIdempotencyKeyReused:
		return "use a new Idempotency-Key for a different request"
	case CodePreconditionFailed:
		return "fetch the resource again and retry with its new ETag"
	}
	if e.Code == "" && e.Status >= 500 {
		return "the server or a proxy failed; retry later"
	}
	if retryable(e) {
		if e.RetryAfter > 0 {
			return fmt.Sprintf("retry after %v", e.RetryAfter)
		}
		return "retry later"
	}
	return ""
}

// Is reports whether target is the sentinel of e's code (or, without a code
// or with one this package does not know, of e's status).
func (e *Error) Is(target error) bool {
	if e.permanent {
		return target == ErrCannotFit
	}
	if e.sentinel != nil {
		return target == e.sentinel
	}
	if s, ok := sentinelByCode[e.Code]; ok {
		also, has := alsoByCode[e.Code]
		return s == target || has && also == target
	}
	if e.Code == "" && isRedirect(e.Status) {
		return target == ErrRedirected
	}
	if s, ok := sentinelByStatus[e.Status]; ok {
		return s == target // the API's list of codes is not closed
	}
	return false
}

// Unwrap returns the error underneath: why no answer came (the
// transport's error, the context's), why an answer could not be read, or
// why an option was refused.
func (e *Error) Unwrap() error { return e.cause }

// noAnswer is an attempt of cl that got no answer because of err: the
// connection failed, or the context ended.
func noAnswer(cl *call, err error) *Error {
	return &Error{
		Operation: cl.op.ID,
		Title:     "No answer",
		Detail:    "no answer: " + err.Error(),
		Request:   redactedRequest(cl.req),
		cause:     err,
	}
}

// outcomeUnknown is a write without an Idempotency-Key that got no answer
// after it was sent: the client does not repeat it. It wraps
// ErrOutcomeUnknown and err.
func outcomeUnknown(cl *call, err error) *Error {
	e := noAnswer(cl, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err))
	e.Title = "Outcome unknown"
	e.Detail = "outcome unknown: the request was sent and it carries no Idempotency-Key, so it was not retried: " + err.Error()
	return e
}

// badInput is input the client refuses before it sends anything: detail
// says what is wrong and what to do; cause is the error underneath, if any.
// local is true for a call's input (the call was not sent), false for
// NewClient's.
func badInput(operation string, local bool, detail string, cause error) *Error {
	return &Error{Operation: operation, Code: CodeBadRequest, Title: "Bad input", Detail: detail, Local: local, cause: cause}
}

// Temporary reports whether the same call may succeed later without
// change: exactly the answers the client retries (every 429 and 503 but
// QUOTA_EXHAUSTED, whatever its code, and IDEMPOTENCY_KEY_IN_USE).
func (e *Error) Temporary() bool { return !e.permanent && retryable(e) }

// maxProblemBody caps how much of an error answer is read.
const maxProblemBody = 1 << 20

// problem is the wire form of a problem answer (parseProblem).
type problem struct {
	Type         string
	Title        string
	Status       int
	Detail       string
	Instance     string
	Code         string
	RequestID    string
	RetryAfterMs *json.Number
	Policy       string
	ResetsAt     string
	Errors       []FieldError
}

// newError reads (capped) and closes resp's body and builds the *Error of a
// non-2xx answer. now is the reference for an HTTP-date Retry-After.
func newError(operation string, resp *http.Response, now time.Time) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBody))
	drainAndClose(resp.Body)
	e := &Error{
		Operation: operation,
		Status:    resp.StatusCode,
		RequestID: resp.Header.Get("Request-Id"),
		Body:      body,
		Request:   redactedRequest(resp.Request),
		Response:  resp,
	}
	resp.Request = e.Request
	retryAfter, hasRetryAfter := parseRetryAfter(resp.Header.Get("Retry-After"), now)
	if hasRetryAfter {
		e.RetryAfter, e.hinted = retryAfter, true
	}
	if p, ok := parseProblem(resp.Header.Get("Content-Type"), body); ok {
		e.Code, e.Title, e.Detail, e.Type, e.Instance = p.Code, p.Title, p.Detail, p.Type, p.Instance
		e.Policy, e.Fields = p.Policy, p.Errors
		if p.RequestID != "" {
			e.RequestID = p.RequestID
		}
		if ms, ok := retryAfterMs(p.RetryAfterMs); ok {
			e.RetryAfter, e.hinted = ms, true
		}
		if t, err := time.Parse(time.RFC3339, p.ResetsAt); err == nil {
			e.ResetsAt = t
		}
	}
	if e.Title == "" {
		e.Title = http.StatusText(resp.StatusCode)
	}
	if isRedirect(resp.StatusCode) {
		e.Detail = redirectDetail(resp)
	}
	return e
}

// parseProblem decodes a problem+json (or plain JSON) body that has at least
// a code or a type. Anything else is no problem. A member of another type
// than its own is ignored, as RFC 9457 asks, and the others still count.
func parseProblem(contentType string, body []byte) (problem, bool) {
	var p problem
	if !mayBeProblem(contentType) {
		return p, false
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		return p, false
	}
	member(members, "type", &p.Type)
	member(members, "title", &p.Title)
	member(members, "status", &p.Status)
	member(members, "detail", &p.Detail)
	member(members, "instance", &p.Instance)
	member(members, "code", &p.Code)
	member(members, "requestId", &p.RequestID)
	member(members, "retryAfterMs", &p.RetryAfterMs)
	member(members, "policy", &p.Policy)
	member(members, "resetsAt", &p.ResetsAt)
	member(members, "errors", &p.Errors)
	if p.Code == "" && p.Type == "" {
		return problem{}, false
	}
	if len(p.Policy) > budget.MaxNameBytes {
		p.Policy = "" // no level's name: a refusal of the key
	}
	return p, true
}

// mayBeProblem reports whether an answer of contentType may carry the
// API's problem: JSON, as application/problem+json or application/json.
func mayBeProblem(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "application/problem+json" || mt == "application/json"
}

// member sets *dst to the problem's member name, when it has one of dst's
// type.
func member[T any](members map[string]json.RawMessage, name string, dst *T) {
	raw, ok := members[name]
	if !ok {
		return
	}
	var v T
	if json.Unmarshal(raw, &v) == nil {
		*dst = v
	}
}

// maxHint bounds any wait the server can ask for, so that no arithmetic on it
// overflows; a hint this long is refused by every sane MaxRetryWait anyway.
const maxHint = 24 * time.Hour

// retryAfterMs turns the retryAfterMs member into a duration: any JSON
// number of milliseconds, a fraction rounded up to the next nanosecond, one
// past maxHint (however large) maxHint, as parseRetryAfter caps a header. A
// missing or negative value is no hint.
func retryAfterMs(n *json.Number) (time.Duration, bool) {
	if n == nil {
		return 0, false
	}
	ms, err := strconv.ParseFloat(n.String(), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsNaN(ms) || ms < 0 {
		return 0, false
	}
	if ms > float64(maxHint.Milliseconds()) {
		return maxHint, true
	}
	return time.Duration(math.Ceil(ms * float64(time.Millisecond))), true
}

// redactedRequest returns a shallow copy of r whose Authorization header is
// masked, so an *Error never carries the API key.
func redactedRequest(r *http.Request) *http.Request {
	if r == nil {
		return nil
	}
	c := *r
	c.Header = r.Header.Clone()
	if c.Header.Get("Authorization") != "" {
		c.Header.Set("Authorization", "Bearer [REDACTED]")
	}
	c.Body, c.GetBody = nil, nil
	c.Response = nil // a redirect's answer, whose request holds the key
	return &c
}

// drainAndClose reads what is left of a body, up to a bound, so the
// connection can be reused, and closes it.
func drainAndClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	_ = body.Close()
}
