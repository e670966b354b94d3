package bodo

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/bodo-app/bodo-go/internal/budget"
)

// sendTrace tells, for one attempt, whether the request could have reached
// the server: whether the transport began (GetConn, which net/http's
// Transport reports for every request) and whether it wrote the request's
// headers (WroteHeaders). Before its headers are complete no server can act
// on a request, so a failure before then is a request not sent.
//
// It is the attempt's context as well: the context it was made from, with
// its ClientTrace under httptrace's key, so that one allocation and the
// hooks are all an attempt costs; one that may go over HTTP/2 (https), or
// that net/http resends for its key, adds a context gotConn can end.
type sendTrace struct {
	context.Context
	trace        httptrace.ClientTrace
	began, wrote atomic.Bool
	ticket       atomic.Pointer[budget.Ticket] // the attempt's admission while it is sent, asked again at its last moment (gotConn)
	hold         time.Duration                 // the longest server's wait the call sits out (MaxRetryWait)
	deferred     atomic.Bool                   // gotConn held the request back: a wait longer than hold was announced, or the call ended inside one
	cancel       context.CancelCauseFunc       // ends the attempt; set where gotConn may have to end it (https, keyed)
	keyed        bool                          // net/http resends the request on HTTP/1 only for its key (resentForItsKey)
	resent       atomic.Bool                   // gotConn held back net/http's resend of the written request
	resentH2     atomic.Bool                   // that resend followed a reset of its HTTP/2 stream or a GOAWAY, not an answer
	heldWait     time.Duration                 // the wait that deferred the request, and why (set before deferred)
	heldWhy      string
	answerWait   time.Duration              // how long after its headers the request's answer may take to begin; 0: no bound of sendTrace's
	byteWait     time.Duration              // how long a read of the answer's body may wait for a byte; 0: no bound (idleBody)
	idleTimer    *time.Timer                // ends the attempt once its answer's body went byteWait without a byte (idle)
	noAnswer     atomic.Pointer[time.Timer] // ends the attempt answerWait after its headers were written, unless stopped (answered)
}

// sendTrace returns the trace of the call's next attempt, made with ctx:
// the first is kept in the call, so that it allocates only its hooks; a
// trace is never used for two attempts, since the hooks of one may still
// run when the next is sent. Its ctx method is the context to send the
// attempt with; hooks of a trace already in ctx are still called.
func (cl *call) sendTrace(ctx context.Context, t *budget.Ticket, answerWait time.Duration) *sendTrace {
	st := &cl.firstTrace
	if cl.traced {
		st = new(sendTrace)
	}
	cl.traced = true
	st.Context, st.hold, st.cancel, st.keyed = ctx, cl.bc.MaxHold, nil, resentForItsKey(cl.req)
	if cl.req.URL.Scheme == "https" || st.keyed || answerWait > 0 {
		st.Context, st.cancel = context.WithCancelCause(ctx)
	}
	st.byteWait, st.idleTimer = answerWait, nil
	st.ticket.Store(t)
	st.trace.GetConn = st.getConn
	st.trace.GotConn = st.gotConn
	st.trace.WroteHeaders = st.wroteHeaders
	st.answerWait, st.trace.GotFirstResponseByte = 0, nil
	if st.cancel != nil && answerWait > 0 && len(cl.body) > 0 { // without a body net/http's own timeout starts with the headers
		st.answerWait = answerWait
		st.trace.GotFirstResponseByte = st.answered
	}
	return st
}

// resentForItsKey reports whether net/http resends r, after writing it,
// only because its Header map holds an idempotency key (see
// http.Transport): the methods it resends anyway are reads.
func resentForItsKey(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	_, key := r.Header["Idempotency-Key"]
	_, xkey := r.Header["X-Idempotency-Key"]
	return key || xkey
}

func (st *sendTrace) getConn(string) { st.began.Store(true) }

// wroteHeaders notes that the request's headers are written, and starts
// the wait for its answer where the client bounds it: net/http's
// ResponseHeaderTimeout starts only once the body is written, which an
// HTTP/2 server that gives no flow-control window can put off for good.
func (st *sendTrace) wroteHeaders() {
	st.wrote.Store(true)
	if st.answerWait > 0 {
		timer := time.AfterFunc(st.answerWait, func() { st.cancel(errNoAnswer) })
		if old := st.noAnswer.Swap(timer); old != nil {
			old.Stop()
		}
	}
}

// answered stops the wait for the answer: it began, or the attempt ended.
func (st *sendTrace) answered() {
	if timer := st.noAnswer.Swap(nil); timer != nil {
		timer.Stop()
	}
}

// ownCause is err with the client's own reason in place of the
// context.Canceled net/http reports when the client, not the caller, ended
// the attempt's context (the wait for its answer, a hold-back).
func (st *sendTrace) ownCause(err error) error {
	if err == nil || st.cancel == nil {
		return err
	}
	var ue *url.Error
	if !errors.As(err, &ue) || !errors.Is(ue.Err, context.Canceled) {
		return err
	}
	switch cause := context.Cause(st.Context); cause {
	case errNoAnswer, errHeldBack, errBodyStalled:
		own := *ue
		own.Err = cause
		return &own
	}
	return err
}

// answerTimeout is errNoAnswer: a timeout, as net/http's
// ResponseHeaderTimeout is.
type answerTimeout struct{}

func (answerTimeout) Error() string {
	return "bodo: no answer within the response header timeout of the request's headers"
}
func (answerTimeout) Timeout() bool   { return true }
func (answerTimeout) Temporary() bool { return true }

// errNoAnswer is the cause that ends an attempt whose answer did not begin
// within the default client's ResponseHeaderTimeout of its headers.
var errNoAnswer error = answerTimeout{}

// gotConn is the last moment before the request is written, which the
// transport does not do before it returns: a wait the server announced
// since the attempt was admitted (an answer read meanwhile, perhaps on this
// very connection) is sat out here. One longer than the call sits out, or
// one the call's context ends inside, holds the request back (deferred):
// nothing is written, and the call is admitted anew or ends.
//
// A connection asked for after the headers were written is net/http's own
// resend: it sends a request without a body again by itself, unseen by the
// budget, when the reused connection it went on closes without an answer
// and the request is a read or carries an Idempotency-Key (see
// http.Transport), and on HTTP/2 after a stream reset (REFUSED_STREAM,
// PROTOCOL_ERROR) or a GOAWAY, up to 7 times with a backoff of its own.
// The first request may have been charged and the resend may be refused,
// so a keyed write's resend, and every HTTP/2 resend, is held back: the
// attempt ends, and the call's own retry sends the request again through
// the budget, with its key (WithMaxRetries(0) leaves it unanswered).
// net/http also resends a request whose headers it buffered but could not
// write; a keyed write held back then is retried as one that may have
// arrived, which its key makes safe. On HTTP/1 a read's resend goes, after
// the waits announced meanwhile, as it does for a server that closed an
// idle connection: it costs the read's points once more, which the next
// answer's RateLimit shows. So does a write without a key, which net/http
// resends only when nothing was written.
func (st *sendTrace) gotConn(info httptrace.GotConnInfo) {
	t := st.ticket.Load()
	if t == nil {
		return
	}
	if h2 := multiplexed(info.Conn); st.wrote.Load() && st.cancel != nil && (st.keyed || h2) {
		st.resentH2.Store(h2)
		st.resent.Store(true)
		st.cancel(errResendHeld) // stops the transport's next try, and this one on HTTP/2
		if !h2 {
			_ = info.Conn.Close() // and this one, before anything is written
		}
		return
	}
	// A wait sat out is looked at again when it ends: another may have
	// been announced meanwhile (two refusals read a moment apart). All the
	// time spent here, the waits for refusals being read too, counts
	// against hold.
	start := time.Now()
	for {
		d, why := t.Bound(st.Context)
		if d <= 0 {
			return
		}
		if st.Context.Err() != nil {
			st.holdBack(info.Conn)
			return
		}
		if d > st.hold-time.Since(start) {
			st.heldWait, st.heldWhy = d, why
			st.holdBack(info.Conn)
			return
		}
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-st.Context.Done():
		}
		timer.Stop()
	}
}

// holdBack keeps the attempt's request from being written: on HTTP/1 it
// closes conn, which carries nothing else; on HTTP/2, whose connection
// carries other calls, it ends the attempt's context, which net/http looks
// at before it writes a stream's headers.
func (st *sendTrace) holdBack(conn net.Conn) {
	st.deferred.Store(true)
	if multiplexed(conn) {
		if st.cancel != nil {
			st.cancel(errHeldBack)
		}
		return
	}
	_ = conn.Close()
}

// multiplexed reports whether conn carries HTTP/2, whose streams other
// calls share: a TLS connection, or one that wraps it and says its state
// as *tls.Conn does, that negotiated h2. HTTP/2 without TLS (h2c) it
// cannot tell.
func multiplexed(conn net.Conn) bool {
	tc, ok := conn.(interface{ ConnectionState() tls.ConnectionState })
	return ok && tc.ConnectionState().NegotiatedProtocol == "h2"
}

// errHeldBack is the cause that ends an attempt gotConn held back on an
// HTTP/2 connection.
var errHeldBack = errors.New("bodo: request held back at its last moment by a wait the server announced")

// errResendHeld is the cause that ends an attempt whose resend gotConn held
// back.
var errResendHeld = errors.New("bodo: net/http's resend of a written request held back")

// resendHeldError is an attempt written once whose connection closed
// without an answer, or whose HTTP/2 stream the server reset or cut off
// with a GOAWAY (h2), net/http's resend of it held back (gotConn). It wraps
// nothing: what the transport returns is the end of that resend.
type resendHeldError struct{ h2 bool }

func (e resendHeldError) Error() string {
	if e.h2 {
		return "the server reset the HTTP/2 stream, or sent a GOAWAY, after the request was written"
	}
	return "the connection closed without an answer after the request was written"
}

// streamReset reports whether err is an attempt whose HTTP/2 stream the
// server ended without an answer: no refusal the client did not read.
func streamReset(err error) bool {
	var e resendHeldError
	return errors.As(err, &e) && e.h2
}

// ErrHeldBack is what a middleware's next returns, as errors.Is tells, for
// an attempt the client held back at the last moment before its request
// was written: the server announced a wait meanwhile that the call does
// not sit out there (longer than what is left of its MaxRetryWait), or the
// call's context ended inside one. Nothing was sent, and the attempt does
// not count as one. A call whose wait is longer than its MaxRetryWait
// fails at once with a local *Error whose RetryAfter is the wait, as one
// that meets such a wait at admission does; one whose context ended ends;
// any other is admitted anew, where it meets the rest of the wait.
var ErrHeldBack = errors.New("bodo: held back before it was written")

// deferredError is an attempt held back at its last moment (ErrHeldBack),
// by a wait of wait for why (none when the call's context ended).
type deferredError struct {
	err  error
	wait time.Duration
	why  string
}

func (e *deferredError) Error() string        { return ErrHeldBack.Error() + ": " + e.err.Error() }
func (e *deferredError) Unwrap() error        { return e.err }
func (e *deferredError) Is(target error) bool { return target == ErrHeldBack }

func isDeferred(err error) bool {
	var d *deferredError
	return errors.As(err, &d)
}

// ctx returns the context that carries st's hooks.
func (st *sendTrace) ctx() context.Context {
	if traceKey == nil || httptrace.ContextClientTrace(st.Context) != nil {
		return httptrace.WithClientTrace(st.Context, &st.trace) // composes the hooks there
	}
	return st
}

// unsent reports whether the transport began the attempt and failed before
// it wrote the headers. A transport that reports nothing (a RoundTripper of
// its own) leaves it unknown, so false.
func (st *sendTrace) unsent() bool { return st.began.Load() && !st.wrote.Load() }

// Value returns st's ClientTrace under httptrace's key, and what the
// context it was made from holds under any other.
func (st *sendTrace) Value(key any) any {
	if key == traceKey {
		return &st.trace
	}
	return st.Context.Value(key)
}

// traceKey is the key under which httptrace keeps a ClientTrace in a
// context, learned from httptrace.WithClientTrace as it looks for one; nil
// when httptrace does not then find a trace kept under it, and a sendTrace
// adds its trace by httptrace.WithClientTrace instead.
var traceKey = probeTraceKey()

func probeTraceKey() any {
	p := &keyProbe{Context: context.Background()}
	httptrace.WithClientTrace(p, &httptrace.ClientTrace{})
	p.trace = &httptrace.ClientTrace{}
	if p.key == nil || httptrace.ContextClientTrace(p) != p.trace {
		return nil
	}
	return p.key
}

// keyProbe is a context that notes the first key it is asked for, and then
// answers it with trace.
type keyProbe struct {
	context.Context
	key   any
	trace *httptrace.ClientTrace
}

func (p *keyProbe) Value(key any) any {
	if p.key == nil {
		p.key = key
	}
	if key == p.key && p.trace != nil {
		return p.trace
	}
	return nil
}

// notSentError is the error of an attempt that failed before its request
// was written: the server cannot have seen it.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// badCertificate reports whether err is the server's certificate failing
// verification: the TLS handshake ended before anything was sent, and
// trying again will not change the certificate.
func badCertificate(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

// certificateRefused is the error of an attempt whose TLS handshake refused
// the server's certificate: not sent, and not retried, since no retry
// changes the certificate.
func certificateRefused(cl *call, err error) *Error {
	e := noAnswer(cl, err)
	e.Title = "Certificate refused"
	e.Detail = "not sent: the TLS handshake refused the server's certificate: " + err.Error()
	return e
}

// errBodyStalled is the cause that ends an attempt whose answer's body
// sent no byte for the default client's answer wait (idleBody).
var errBodyStalled error = bodyTimeout{}

// bodyTimeout is errBodyStalled: a timeout, as net/http's own are.
type bodyTimeout struct{}

func (bodyTimeout) Error() string {
	return "bodo: no byte of the answer's body within the response header timeout"
}
func (bodyTimeout) Timeout() bool   { return true }
func (bodyTimeout) Temporary() bool { return true }

// idleBody is an answer's body whose reads end the attempt (errBodyStalled)
// once one has waited byteWait for a byte: net/http bounds the wait for an
// answer's headers, nothing the wait for its body, and a call whose body
// never ends holds its slot in flight, and the calls behind it, for good.
// A read asks for at most maxIdleRead bytes: net/http's reader of a chunked
// body returns only once it filled what it was asked for, so a big read of
// a slow, steady body would wait long with bytes arriving all along.
type idleBody struct {
	io.ReadCloser
	timer *time.Timer
	wait  time.Duration
}

// maxIdleRead is the most an idleBody read asks for.
const maxIdleRead = 1 << 10

// idle returns body bounded by the trace's byteWait, from the middleware's
// first sight of it (a middleware may read it) until stopIdle; body itself
// when there is no bound.
func (st *sendTrace) idle(body io.ReadCloser) io.ReadCloser {
	if st.byteWait <= 0 || st.cancel == nil || body == nil || body == http.NoBody {
		return body
	}
	b := &idleBody{ReadCloser: body, wait: st.byteWait}
	b.timer = time.AfterFunc(st.byteWait, func() { st.cancel(errBodyStalled) })
	st.idleTimer = b.timer
	return b
}

// stopIdle ends the bound of idle once the attempt is done with its body.
func (st *sendTrace) stopIdle() {
	if st.idleTimer != nil {
		st.idleTimer.Stop()
	}
}

func (b *idleBody) Read(p []byte) (int, error) {
	if len(p) > maxIdleRead {
		p = p[:maxIdleRead]
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.timer.Reset(b.wait)
	}
	return n, err
}
