package bodo

import (
	"net"
	"net/http"
	"time"

	"github.com/bodo-app/bodo-go/internal/budget"
)

// The timeouts of the *http.Client a Client made without WithHTTPClient
// uses: to dial, to finish the TLS handshake, and from the request's end to
// the answer's headers. There is no timeout on the whole exchange, so a long
// answer can still be read; a context deadline or WithAttemptTimeout bounds
// that. DefaultResponseHeaderTimeout is also how long a call that gets no
// answer in slow start (a key's first call) holds the key's other calls,
// whatever *http.Client sends it.
const (
	DefaultDialTimeout           = 10 * time.Second
	DefaultTLSHandshakeTimeout   = 10 * time.Second
	DefaultResponseHeaderTimeout = budget.SlowStartHold
)

// defaultHTTPClient is the *http.Client of a Client made without
// WithHTTPClient: http.DefaultTransport's settings (proxy from the
// environment, HTTP/2, idle connections) with the default timeouts.
func defaultHTTPClient() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if ok {
		t = t.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true, IdleConnTimeout: 90 * time.Second}
	}
	t.DialContext = (&net.Dialer{Timeout: DefaultDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = DefaultTLSHandshakeTimeout
	t.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	return &http.Client{Transport: t}
}
