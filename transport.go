package bodo

import (
	"net"
	"net/http"
	"time"

	"github.com/bodo-app/bodo-go/internal/budget"
)

// The timeouts of the *http.Client a Client made without WithHTTPClient
// uses, when http.DefaultTransport is an *http.Transport: to dial, to
// finish the TLS handshake, from the request's end to the answer's
// headers (for an https request with a body from its headers, so that an
// HTTP/2 server that lets no body through cannot put it off) and for each
// read of the answer's body, which waits for a byte (of a chunked body,
// for at most 1 KiB): DefaultResponseHeaderTimeout both; an attempt whose
// body stalls so ends as one cut off, also while a middleware reads it.
// On an HTTP/2 connection, from the last frame read to a ping and from the
// ping to its answer, after which the connection is closed. Each applies where
// http.DefaultTransport sets none: its own dialer (30 s, as
// DefaultDialTimeout) and TLS handshake timeout (10 s) stay, and so do
// any a program set there. There is no timeout on the whole exchange, so
// a long answer can still be read; a context deadline or
// WithAttemptTimeout bounds that. An http.DefaultTransport that is no
// *http.Transport (a mock, a tracing wrapper) is used as it is, with the
// timeouts it has. DefaultResponseHeaderTimeout is also how long calls that
// get no answer in slow start (a key's first call) hold the key's other
// calls, whatever *http.Client sends them: then slow start ends, and calls
// go up to the adaptive cap, never more than the parallel quota (6).
const (
	DefaultDialTimeout           = 30 * time.Second
	DefaultTLSHandshakeTimeout   = 10 * time.Second
	DefaultResponseHeaderTimeout = budget.SlowStartHold
	DefaultHTTP2PingTimeout      = 15 * time.Second
)

// defaultHTTPClient is the *http.Client of a Client made without
// WithHTTPClient: http.DefaultTransport, as it is when it is no
// *http.Transport, else a clone of it with the default timeouts where it
// has none.
func defaultHTTPClient() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return &http.Client{Transport: http.DefaultTransport}
	}
	t = t.Clone()
	if t.DialContext == nil && t.Dial == nil { // a Dial set there is kept as well
		t.DialContext = (&net.Dialer{Timeout: DefaultDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	if t.TLSHandshakeTimeout == 0 {
		t.TLSHandshakeTimeout = DefaultTLSHandshakeTimeout
	}
	if t.ResponseHeaderTimeout == 0 {
		t.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	if t.HTTP2 == nil {
		// An HTTP/2 connection that goes silent stays in the pool, every
		// later call multiplexed onto it, until a ping finds it dead.
		t.HTTP2 = &http.HTTP2Config{SendPingTimeout: DefaultHTTP2PingTimeout, PingTimeout: DefaultHTTP2PingTimeout}
	}
	return &http.Client{Transport: t}
}
