package bodo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bodo-app/bodo-go/internal/budget"
)

// MiddlewareNext sends the request on: to the next middleware, or, after the
// last one, to the client's *http.Client. It sends an attempt at most once:
// called again, by the same middleware or another, at once or concurrently,
// it sends nothing and returns an error wrapping ErrResent. It is safe for
// concurrent use.
type MiddlewareNext = func(*http.Request) (*http.Response, error)

// Middleware wraps one attempt of a call: it gets the request and the next
// step, and returns the answer. AttemptFrom(req.Context()) tells which
// operation and which attempt it is.
//
// A middleware may return its own answer without calling next; the client
// then treats that answer as the server's. An error returned without calling
// next ends the call at once, with an *Error whose Unwrap returns it: it is
// not retried, and the budget counts the attempt as never sent. An error of
// next, passed on, is a failed attempt like any connection failure.
//
// The request's headers are shared by the attempts of the call: a middleware
// that changes them changes a copy (req.Clone). A middleware that wants to
// send a request again returns its error or answer and lets the client's
// retries decide: next sends one request per attempt, no more.
type Middleware = func(req *http.Request, next MiddlewareNext) (*http.Response, error)

// WithMiddleware wraps every attempt in mw, the first outermost. Given to
// NewClient it wraps the attempts of every call; given to a call, its
// middleware runs inside the client's, for that call only. A middleware
// sees every attempt, retries included, after the budget let it go, and
// sends each at most once, however often its middleware calls next. An
// attempt the budget does not let go reaches no middleware: WithOnWait
// hears of it.
func WithMiddleware(mw ...Middleware) ClientOrRequestOption {
	return eitherOption(func(s *callSettings) error {
		for _, m := range mw {
			if m == nil {
				return errors.New("WithMiddleware: nil middleware")
			}
		}
		s.middleware = append(slices.Clip(s.middleware), mw...)
		return nil
	})
}

// Attempt describes one attempt of a call, for a Middleware.
type Attempt struct {
	Operation    string // operationId, such as "listContacts"
	Method       string // HTTP method, upper case
	PathTemplate string // the operation's path template, such as "/v1/contacts/{id}"
	Class        string // x-bodo-class of the operation
	Cost         int    // points the call costs (a batch: the sum of its parts)
	// Number counts the call's attempts, from 1: Number-1 is the resend
	// count.
	Number int
	// RetryReason is why the previous attempt is retried, "" on the first:
	// the problem's code (RATE_LIMITED, OVERLOADED, IDEMPOTENCY_KEY_IN_USE),
	// the status of an answer without one ("503"), "no-answer" for a
	// connection failure or "cut-off" for a body that broke off.
	RetryReason string
	// Wait is how long this attempt waited for the budget before it was
	// sent, and HeldBy what held it last (see WaitEvent.Reason); HeldBy is
	// "" when it did not wait. CallWait is the wait of all the call's
	// attempts so far, this one's included.
	Wait     time.Duration
	HeldBy   string
	CallWait time.Duration
	// Client is the client making the call, for its Budget, while the
	// attempt is in the middleware; nil once it is through, so that a
	// request kept in an error or a response leads to no client.
	Client *Client
}

type attemptKey struct{}

// AttemptFrom returns the attempt a middleware's request belongs to, from
// the request's context; ok is false for a context of no attempt.
func AttemptFrom(ctx context.Context) (a Attempt, ok bool) {
	p, ok := ctx.Value(attemptKey{}).(*Attempt)
	if !ok {
		return Attempt{}, false
	}
	return *p, true
}

// ErrResent is the error of a MiddlewareNext called again for the same
// attempt: the request went out once already, or is going out, and is not
// sent twice.
var ErrResent = errors.New("bodo: middleware called next again; an attempt is sent once")

// errNoResponse is a middleware's (nil, nil).
var errNoResponse = errors.New("bodo: a middleware returned neither a response nor an error")

// middlewareError is an error a middleware returned without calling next.
type middlewareError struct{ err error }

func (e *middlewareError) Error() string { return "middleware: " + e.err.Error() }
func (e *middlewareError) Unwrap() error { return e.err }

// roundTrip sends req, the attempt of ticket t traced by st, through the
// call's middleware to the client's *http.Client; a refusal it gets is
// marked as being read (reading), and an attempt held back at its last
// moment is told by ErrHeldBack, before any middleware sees them. It
// returns a *middlewareError when a middleware failed without calling next.
func (c *Client) roundTrip(cl *call, req *http.Request, a Attempt, t *budget.Ticket, st *sendTrace) (*http.Response, error) {
	if len(cl.settings.middleware) == 0 {
		return c.doHTTP(req, t, st)
	}
	return c.throughMiddleware(cl, req, a, t, st)
}

// doHTTP sends req with the client's *http.Client: the innermost step of the
// middleware chain.
func (c *Client) doHTTP(req *http.Request, t *budget.Ticket, st *sendTrace) (*http.Response, error) {
	resp, err := c.httpClient.Do(req)
	if err == nil {
		if err = interim(resp); err != nil { // a middleware never sees a connection handed over
			resp = nil
		} else {
			resp.Body = st.idle(resp.Body)
		}
	}
	err = st.ownCause(err)
	if err != nil && st.deferred.Load() {
		return nil, &deferredError{err: err, wait: st.heldWait, why: st.heldWhy}
	}
	reading(resp, err, t)
	return resp, err
}

// reading marks t's refusal as being read: its body may ask for a wait
// that its headers do not say, and until the answer is read, requests
// about to be written wait for it (the one that gets this connection when
// the body is read too). Only a body that may be the API's problem does:
// the wait of any other answer (a proxy's page) binds only its own call.
func reading(resp *http.Response, err error, t *budget.Ticket) {
	if err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && mayBeProblem(resp.Header.Get("Content-Type")) {
		wait, _ := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		t.Reading(wait)
	}
}

// throughMiddleware is roundTrip with middleware, apart so that a call
// without any allocates nothing for it.
func (c *Client) throughMiddleware(cl *call, req *http.Request, a Attempt, t *budget.Ticket, st *sendTrace) (*http.Response, error) {
	mw := cl.settings.middleware
	a.Operation, a.Method, a.PathTemplate, a.Class = cl.op.ID, req.Method, cl.op.Path, string(cl.op.Class)
	a.Cost, a.Client = int(cl.bc.Cost), c
	req = req.WithContext(context.WithValue(req.Context(), attemptKey{}, &a))
	var sent atomic.Bool
	var step func(i int) MiddlewareNext
	step = func(i int) MiddlewareNext {
		if i == len(mw) {
			return func(r *http.Request) (*http.Response, error) {
				if sent.Swap(true) {
					return nil, fmt.Errorf("bodo: %s attempt %d: %w", a.Operation, a.Number, ErrResent)
				}
				return c.doHTTP(r, t, st)
			}
		}
		return func(r *http.Request) (*http.Response, error) { return mw[i](r, step(i+1)) }
	}
	resp, err := step(0)(req)
	a.Client = nil // the request stays in errors and responses: no way to the key from there
	switch {
	case err != nil && resp != nil && resp.Body != nil:
		_ = resp.Body.Close()
		resp = nil
	case err == nil && resp == nil:
		err = errNoResponse
	case err == nil && resp.Body == nil:
		resp.Body = http.NoBody
	}
	if err != nil && !sent.Load() {
		return nil, &middlewareError{err: err}
	}
	return resp, err
}

// answerReason names an answer that is retried, for Attempt.RetryReason:
// its problem's code, else its status.
func answerReason(e *Error) string {
	if e.Code != "" {
		return e.Code
	}
	return strconv.Itoa(e.Status)
}

// middlewareFailed is the *Error of a call a middleware ended.
func middlewareFailed(cl *call, err error) *Error {
	return &Error{Operation: cl.op.ID, Title: "Middleware failed", Detail: err.Error(), Local: true, Request: redactedRequest(cl.req), cause: err}
}
