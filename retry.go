package bodo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bodo-app/bodo-go/internal/budget"
)

// ErrOutcomeUnknown marks a write without an Idempotency-Key whose outcome
// the client cannot know: its connection failed after the request was
// sent, its context ended while it was out, or a 503 or 409 came back that
// is not the API's refusal. It did not retry; look for the effect before
// trying again.
var ErrOutcomeUnknown = errors.New("bodo: outcome unknown")

// The backoff schedule when the server gives no hint: 1, 2, 4, 8 s with full
// jitter, and at most maxHintlessRetries such retries per call, whatever
// MaxRetries says: five attempts, as bodo-api.md has a client give up
// without a hint (client-backoff-discipline step 2 bounds them; step 6: a
// pattern of refusals is no reason to raise the bound).
const (
	backoffBase        = time.Second
	backoffCap         = 8 * time.Second
	maxHintlessRetries = 4
)

// RetryEvent describes one retry, for WithOnRetry.
type RetryEvent struct {
	Operation string        // operationId
	Class     string        // x-bodo-class of the operation
	Attempt   int           // the attempt that failed, from 1
	Wait      time.Duration // how long the client waits before the next attempt
	// Err is why: an *Error for an answer, else the connection error.
	Err error
}

// RetryError is returned when a call's retries run out: the retries
// WithMaxRetries allows, or the 4 retries without a wait from the server
// that a call makes at most (see WithMaxRetries). It wraps the last
// attempt's *Error. With WithMaxRetries(0) a call returns that *Error
// itself.
type RetryError struct {
	Operation string // operationId, e.g. "createContact"
	Attempts  int    // attempts made, the first one included
	Err       error  // the last attempt's error, an *Error

	hintless bool // the bound on retries without a hint ended the call
}

func (e *RetryError) Error() string {
	if e.hintless {
		return fmt.Sprintf("bodo: %s: gave up after %d attempts: without a wait named by the server a call retries at most %d times, whatever WithMaxRetries says: %v",
			e.Operation, e.Attempts, maxHintlessRetries, e.Err)
	}
	return fmt.Sprintf("bodo: %s: gave up after %d attempts: %v", e.Operation, e.Attempts, e.Err)
}

// Unwrap returns the last attempt's error.
func (e *RetryError) Unwrap() error { return e.Err }

// maxDeferrals bounds how often one call is held back at its last moment
// and admitted anew (deferredError), should admission and that moment ever
// disagree.
const maxDeferrals = 3

// send runs the attempts of one call until one is answered with something
// that is not retried, the retries run out, or ctx ends. It returns the
// response of a 2xx or 304 answer with its body unread.
func (c *Client) send(ctx context.Context, cl *call) (*http.Response, []byte, error) {
	// An attempt that never finishes normally (a panicking RoundTripper or
	// callback) still frees its slot; finishing twice does nothing.
	var open *budget.Ticket
	leaving := false // open's attempt may have left
	defer func() {
		if open != nil {
			open.Unanswered(leaving, false)
		}
	}()
	hintless, deferrals := 0, 0
	lost := false  // an earlier attempt may have done the call, its answer lost
	var at Attempt // what a middleware learns of each attempt
	for attempt := 1; ; attempt++ {
		ticket, waited, err := c.admit(ctx, cl)
		if err == nil {
			open, leaving = ticket, false
		}
		if c.onWait != nil && !cl.settings.own && waited.Reason != "" && (waited.Wait > 0 || err != nil) {
			c.onWait(waited)
		}
		if err != nil {
			return nil, nil, err
		}
		at.Number, at.Wait, at.HeldBy = attempt, waited.Wait, ""
		at.CallWait += waited.Wait
		if waited.Wait > 0 {
			at.HeldBy = waited.Reason
		}
		leaving = true
		resp, body, err := c.attempt(ctx, cl, at, ticket)
		if d := heldTooLong(err, cl.settings.maxRetryWait); d != nil {
			ticket.Unanswered(false, false)
			e := heldError(cl, d.why, d.wait)
			e.Detail += fmt.Sprintf("; the wait, %v, announced as the request was about to be written, is longer than MaxRetryWait (%v), so the call was not sent", d.wait.Round(time.Millisecond), cl.settings.maxRetryWait)
			if c.onWait != nil && !cl.settings.own {
				c.onWait(WaitEvent{Operation: cl.op.ID, Class: string(cl.op.Class), Host: c.host, Reason: d.why, Err: e, ctx: ctx})
			}
			return nil, nil, e
		}
		if err != nil && deferrals < maxDeferrals && isDeferred(err) {
			ticket.Unanswered(false, false)
			deferrals++
			attempt-- // nothing was sent: admitted anew, the call meets the wait there
			continue
		}
		var (
			last error
			wait time.Duration
		)
		if mwErr, ok := err.(*middlewareError); ok { // attempt returns it as roundTrip does
			ticket.Unanswered(false, false)
			return nil, nil, middlewareFailed(cl, mwErr.err)
		}
		if cut := (*cutBody)(nil); errors.As(err, &cut) {
			at.RetryReason = "cut-off"
			ticket.Finish(answerOf(resp, nil))
			lost = true
			cutErr := invalidResponse(cl.op.ID, resp, body, cut.err)
			if ctx.Err() != nil || !retrySafe(cl, err) {
				return nil, nil, cutErr // a write without a key took effect: never repeat it
			}
			last = cutErr
			if hintless >= maxHintlessRetries {
				return nil, nil, &RetryError{Operation: cl.op.ID, Attempts: attempt, Err: last, hintless: true}
			}
			wait = backoff(hintless)
			hintless++
		} else if err != nil {
			// An attempt the caller's context ended is no refusal; one that
			// failed otherwise after it left may have been refused unseen.
			// A reset HTTP/2 stream got no answer, a refusal least of all.
			ticket.Unanswered(!notSent(err) && !streamReset(err), ctx.Err() != nil)
			lost = lost || !notSent(err)
			err = withCtx(ctx, err)
			if badCertificate(err) {
				return nil, nil, certificateRefused(cl, err)
			}
			if !retrySafe(cl, err) {
				return nil, nil, outcomeUnknown(cl, err)
			}
			if ctx.Err() != nil {
				return nil, nil, noAnswer(cl, err)
			}
			last = noAnswer(cl, err)
			at.RetryReason = "no-answer"
			if hintless >= maxHintlessRetries {
				return nil, nil, &RetryError{Operation: cl.op.ID, Attempts: attempt, Err: last, hintless: true}
			}
			wait = backoff(hintless)
			hintless++
		} else {
			if resp.StatusCode < 300 || resp.StatusCode == http.StatusNotModified {
				ticket.Finish(answerOf(resp, nil))
				if len(body) > maxSuccessBody {
					return nil, nil, invalidResponse(cl.op.ID, resp, nil, fmt.Errorf("the body exceeds %d bytes", maxSuccessBody))
				}
				return resp, body, nil
			}
			apiErr := newError(cl.op.ID, resp, time.Now())
			ticket.Finish(answerOf(resp, apiErr))
			if retryable(apiErr) && mayHaveReached(apiErr) && !retrySafe(cl, nil) {
				// Only a refusal says the write was not done.
				c.logRefusal(cl, apiErr, attempt, -1)
				return nil, nil, fmt.Errorf("bodo: %s: a %d that is not the API's refusal came back for a request without an Idempotency-Key, so it was not retried: %w: %w", cl.op.ID, apiErr.Status, ErrOutcomeUnknown, apiErr)
			}
			if lost && goneAlready(cl, apiErr) {
				return resp, nil, nil
			}
			if !retryable(apiErr) {
				c.logRefusal(cl, apiErr, attempt, -1)
				return nil, nil, apiErr
			}
			lost = lost || mayHaveReached(apiErr)
			var hinted bool
			wait, hinted = retryWait(apiErr, hintless)
			if !hinted {
				if hintless >= maxHintlessRetries {
					c.logRefusal(cl, apiErr, attempt, -1)
					return nil, nil, &RetryError{Operation: cl.op.ID, Attempts: attempt, Err: apiErr, hintless: true}
				}
				hintless++
			}
			if h := heldFor(apiErr); h > cl.settings.maxRetryWait || apiErr.RetryAfter > h {
				c.logRefusal(cl, apiErr, attempt, -1)
				return nil, nil, apiErr
			}
			last = apiErr
			at.RetryReason = answerReason(apiErr)
			if attempt <= cl.settings.maxRetries {
				c.logRefusal(cl, apiErr, attempt, wait)
			} else {
				c.logRefusal(cl, apiErr, attempt, -1)
			}
		}
		if attempt > cl.settings.maxRetries {
			if cl.settings.maxRetries == 0 {
				return nil, nil, last
			}
			return nil, nil, &RetryError{Operation: cl.op.ID, Attempts: attempt, Err: last}
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return nil, nil, fmt.Errorf("bodo: %s: the retry would wait %v, past the context deadline: %w: %w",
				cl.op.ID, wait.Round(time.Millisecond), last, context.DeadlineExceeded)
		}
		if c.onRetry != nil && !cl.settings.own {
			c.onRetry(RetryEvent{Operation: cl.op.ID, Class: string(cl.op.Class), Attempt: attempt, Wait: wait, Err: last})
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, nil, fmt.Errorf("bodo: %s: waiting to retry: %w: %w", cl.op.ID, last, err)
		}
	}
}

// goneAlready reports whether e, the answer to a retry of a DELETE, says
// that the resource is gone: a 404. After an attempt whose answer was lost,
// that is what the caller asked for, most likely done by that attempt.
func goneAlready(cl *call, e *Error) bool {
	return cl.op.Method == http.MethodDelete && e.Status == http.StatusNotFound
}

// mayHaveReached reports whether e, a retryable answer, leaves open that
// the API did the call. A 429 is a refusal, an edge limiter's included,
// which refuses before forwarding anything, and so is the API's OVERLOADED
// or RATE_LIMITED. Anything else (a 503 of a proxy, whatever code a JSON
// body of it carries; IDEMPOTENCY_KEY_IN_USE, the same request still
// running) may follow a request that was forwarded and its answer lost.
func mayHaveReached(e *Error) bool {
	return e.Status != http.StatusTooManyRequests && e.Code != CodeOverloaded && e.Code != CodeRateLimited
}

// attempt sends one attempt of the call through the call's middleware (at
// says which attempt it is), bounded by the attempt timeout,
// and reads the body of a 2xx or 304 answer (up to maxSuccessBody+1 bytes):
// a body cut off by a reset or a timeout is a failed attempt like a failed
// connection. Other answers come back with their body unread.
func (c *Client) attempt(ctx context.Context, cl *call, at Attempt, t *budget.Ticket) (*http.Response, []byte, error) {
	if d := cl.settings.attemptTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	trace := cl.sendTrace(ctx, t, c.answerWait)
	if trace.cancel != nil {
		defer trace.cancel(nil)
		defer trace.answered()
	}
	resp, err := c.roundTrip(cl, cl.newAttempt(trace.ctx()), at, t, trace)
	defer trace.stopIdle()
	trace.ticket.Store(nil) // the request's context holds the trace, and an error may hold the request
	if err == nil {
		err = interim(resp)
	}
	if err != nil {
		switch {
		case trace.resent.Load():
			err = resendHeldError{h2: trace.resentH2.Load()}
		case trace.deferred.Load() && !isDeferred(err):
			err = &deferredError{err: err, wait: trace.heldWait, why: trace.heldWhy}
		case trace.unsent() || h2Unprocessed(err):
			err = &notSentError{err}
		}
		return nil, nil, err
	}
	body := resp.Body
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotModified {
		// The caller reads the problem before the deferred cancel: keep
		// the body readable by reading it now, capped.
		// What came of the body, if it broke off: the status and headers
		// (Retry-After) still say what the server decided.
		problem, _ := io.ReadAll(io.LimitReader(body, maxProblemBody))
		drainAndClose(body)
		resp.Body = io.NopCloser(bytes.NewReader(problem))
		return resp, nil, nil
	}
	read, err := io.ReadAll(io.LimitReader(body, maxSuccessBody+1))
	drainAndClose(body)
	resp.Body = http.NoBody // the body is returned apart
	if err != nil {
		if context.Cause(trace.Context) == errBodyStalled {
			err = errBodyStalled
		}
		return resp, read, &cutBody{err: err}
	}
	return resp, read, nil
}

// h2Unprocessed reports whether err is net/http's HTTP/2 transport giving
// up on a request with a body that the server said it did not process:
// RST_STREAM(REFUSED_STREAM), or a GOAWAY whose last stream is below the
// request's (RFC 9113 8.7). net/http wraps neither cause, so its text is
// matched, whole and from its start; text of another form (a later Go) is
// an attempt that may have arrived, which errs on the safe side.
func h2Unprocessed(err error) bool {
	var ue *url.Error
	if !errors.As(err, &ue) || ue.Err == nil {
		return false
	}
	s, ok := strings.CutPrefix(ue.Err.Error(), "http2: Transport: cannot retry err [")
	if !ok {
		return false
	}
	cause, _, ok := strings.Cut(s, "] after Request.Body was written")
	if !ok {
		return false
	}
	if cause == "http2: Transport received Server's graceful shutdown GOAWAY" {
		return true
	}
	id, ok := strings.CutPrefix(cause, "stream error: stream ID ")
	if !ok {
		return false
	}
	id, ok = strings.CutSuffix(id, "; REFUSED_STREAM; received from peer")
	_, convErr := strconv.ParseUint(id, 10, 32)
	return ok && convErr == nil
}

// heldTooLong returns err's hold-back when the wait that caused it is
// longer than maxWait: the call meets no wait that long, wherever it was
// announced.
func heldTooLong(err error, maxWait time.Duration) *deferredError {
	if err == nil {
		return nil
	}
	var d *deferredError
	if errors.As(err, &d) && d.wait > maxWait {
		return d
	}
	return nil
}

// cutBody is a 2xx or 304 answer whose body broke off: the server did the
// call, its answer is lost.
type cutBody struct{ err error }

// interimAnswer is a 1xx status as the answer to a call: 101 Switching
// Protocols hands the connection over instead of an answer. The connection
// is closed unread, and whether the call took effect is not known, as when
// a connection fails after the request left.
type interimAnswer struct{ status int }

func (e *interimAnswer) Error() string {
	return fmt.Sprintf("the server answered %d, which is no final answer", e.status)
}

// interim closes resp's body and returns an *interimAnswer when resp is a
// 1xx answer.
func interim(resp *http.Response) error {
	if resp.StatusCode >= 200 {
		return nil
	}
	if resp.Body != nil {
		_ = resp.Body.Close()
	}
	return &interimAnswer{resp.StatusCode}
}

func (e *cutBody) Error() string { return "the body broke off: " + e.err.Error() }
func (e *cutBody) Unwrap() error { return e.err }

// retryable reports whether an answer may be retried: every 429 and 503
// (RATE_LIMITED, OVERLOADED, a code the client does not know, or no problem
// body at all) but QUOTA_EXHAUSTED, and IDEMPOTENCY_KEY_IN_USE.
func retryable(e *Error) bool {
	switch {
	case e.Code == CodeQuotaExhausted:
		return false
	case e.Code == CodeIdempotencyKeyInUse:
		return true
	}
	return e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable
}

// overloadLike reports whether e asks for the spacing of OVERLOADED: it is
// one, or a 503 that is not RATE_LIMITED.
func overloadLike(e *Error) bool {
	return e.Code == CodeOverloaded || e.Status == http.StatusServiceUnavailable && e.Code != CodeRateLimited
}

// retrySafe reports whether a failed attempt may be sent again: when the
// request never left (the dial failed), when the operation is idempotent, or
// when it carries an Idempotency-Key.
func retrySafe(cl *call, err error) bool {
	if err != nil && notSent(err) || cl.op.Idempotent {
		return true
	}
	return cl.req.Header.Get("Idempotency-Key") != ""
}

// notSent reports whether err says the request never left: the attempt
// failed before its headers were written (a dial, a TLS handshake), was
// held back at its last moment, or the connection was never made.
func notSent(err error) bool {
	var op *net.OpError
	var unsent *notSentError
	if errors.As(err, &unsent) || isDeferred(err) || errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// heldFor is how much of e's RetryAfter the budget holds the key for:
// budget.MaxLockout for a lockout, budget.MaxServerWait for any other
// wait. A call whose answer asks for longer is not retried: it would go
// before the server's wait.
func heldFor(e *Error) time.Duration {
	if e.Code != "" && e.Policy == budget.Lockout {
		return min(e.RetryAfter, budget.MaxLockout)
	}
	return min(e.RetryAfter, budget.MaxServerWait)
}

// retryWait returns how long to wait before retrying after e, and whether
// the server gave the hint: retryAfterMs or Retry-After (heldFor) plus
// jitter (never sooner than asked, up to its bound), OVERLOADED with at least a second of random spacing
// on top; without a hint the doubling backoff after hintless such retries.
func retryWait(e *Error, hintless int) (time.Duration, bool) {
	hinted := e.hinted
	var wait time.Duration
	if hinted {
		h := heldFor(e)
		wait = h + jitter(h)
	} else {
		wait = backoff(hintless)
	}
	if overloadLike(e) {
		wait += overloadSpacing()
	}
	return wait, hinted
}

// jitterBound is the most jitter laid on a hint h: a tenth of it, at least
// 100 ms and at most 2 s.
func jitterBound(h time.Duration) time.Duration {
	return min(max(h/10, 100*time.Millisecond), 2*time.Second)
}

func jitter(h time.Duration) time.Duration {
	return rand.N(jitterBound(h) + 1)
}

// overloadSpacing is the random spacing after OVERLOADED: 1 to 3 s.
func overloadSpacing() time.Duration {
	return time.Second + rand.N(2*time.Second+1)
}

// backoff is the wait before hintless retry n (from 0): full jitter over
// 1, 2, 4, 8 s.
func backoff(n int) time.Duration {
	ceiling := backoffCap
	if n < 4 {
		ceiling = min(backoffBase<<n, backoffCap)
	}
	return rand.N(ceiling + 1)
}

// parseRetryAfter parses a Retry-After value relative to now: delay-seconds
// or an HTTP-date in any of the three forms of RFC 9110 §5.6.7. A date in the
// past is a wait of 0. A malformed or negative value is no hint; a huge one
// is capped at maxHint.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		for i := 0; i < len(v); i++ {
			if v[i] < '0' || v[i] > '9' {
				return 0, false
			}
		}
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(maxHint/time.Second) {
			return maxHint, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	switch {
	case d < 0:
		return 0, true
	case d > maxHint:
		return maxHint, true
	}
	return d, true
}

// ctxErr is why ctx ended: ctx.Err(), and its cause as well when that is
// another error (context.WithTimeoutCause), so that errors.Is finds both.
func ctxErr(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}

// withCtx is err, the error of an attempt that got no answer, with why ctx
// ended when it did and err does not say so already, so that errors.Is
// finds the context's error (and its cause) as well as the transport's.
func withCtx(ctx context.Context, err error) error {
	if ctx.Err() == nil || errors.Is(err, ctx.Err()) && context.Cause(ctx) == ctx.Err() {
		return err
	}
	return fmt.Errorf("%w: %w", ctxErr(ctx), err)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	}
}

// logRefusal logs a 429 or 503 answer with the server's wait (retry_after)
// when it named one: wait is the client's wait before the retry, or
// negative when the call gives up.
func (c *Client) logRefusal(cl *call, e *Error, attempt int, wait time.Duration) {
	if e.Status != http.StatusTooManyRequests && e.Status != http.StatusServiceUnavailable {
		return
	}
	attrs := []slog.Attr{
		slog.String("host", c.host),
		slog.String("operation", cl.op.ID),
		slog.String("class", string(cl.op.Class)),
		slog.Int("status", e.Status),
		slog.String("code", logValue(e.Code)),
		slog.String("policy", e.Policy),
		slog.Int("attempt", attempt),
		slog.String("request_id", logValue(e.RequestID)),
	}
	if e.RetryAfter > 0 {
		attrs = append(attrs, slog.Duration("retry_after", e.RetryAfter))
	}
	msg := "bodo: refused, giving up"
	if wait >= 0 {
		msg = "bodo: refused, retrying"
		attrs = append(attrs, slog.Duration("wait", wait))
	}
	c.logger.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
}

// maxLogValue bounds a value the server chose (a problem's code, a request
// id) in a log line, so that no answer chooses how much is logged.
const maxLogValue = 256

// logValue is v cut to maxLogValue bytes, whole characters, marked "…" when
// cut.
func logValue(v string) string {
	if len(v) <= maxLogValue {
		return v
	}
	return strings.ToValidUTF8(v[:maxLogValue], "") + "…"
}
