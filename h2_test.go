package bodo

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAnHTTP2ResendOfAKeyedPaymentPassesTheBudget: the HTTP/2 twin of
// TestNoResendPassesTheBudget. The server resets the payment's stream with
// PROTOCOL_ERROR after it took it (nothing says it was not done), and
// net/http's HTTP/2 transport would resend the request, which has no body,
// by itself: the resend is held back, so every request passes the budget,
// and WithMaxRetries(0) leaves the payment unanswered.
func TestAnHTTP2ResendOfAKeyedPaymentPassesTheBudget(t *testing.T) {
	h := newH2Raw(t, func(n int, c *h2conn, stream uint32) {
		if n == 1 {
			c.reset(stream, h2ProtocolError)
			return
		}
		c.respond(stream, "200", map[string]string{"content-type": "application/json"}, h2Invoice)
	})
	c, attempts := h.client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := c.Invoices.Pay(ctx, "inv_1")
	if reqs := h.requests(); int(attempts.Load()) != reqs {
		t.Errorf("the server read %d payments, the budget let %d attempts out (err %v); every request should pass the budget", reqs, attempts.Load(), err)
	}
	if err == nil {
		t.Errorf("WithMaxRetries(0): the payment whose stream was reset succeeded, so it was sent again")
	}
}

// TestAnHTTP2UnprocessedWriteIsNotOutcomeUnknown: HTTP/2 says for sure
// that a stream was not processed with RST_STREAM(REFUSED_STREAM) ("closed
// prior to any processing", RFC 9113 8.7) and with a GOAWAY whose last
// stream id is below it: a write without an Idempotency-Key refused so was
// not done, and is sent again.
func TestAnHTTP2UnprocessedWriteIsNotOutcomeUnknown(t *testing.T) {
	contact, _ := json.Marshal(sampleContact)
	for _, tc := range []struct {
		name   string
		refuse func(c *h2conn, stream uint32)
	}{
		{"REFUSED_STREAM", func(c *h2conn, stream uint32) { c.reset(stream, h2RefusedStream) }},
		{"GOAWAY below the stream", func(c *h2conn, stream uint32) { c.goAway(stream-1, h2NoError) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newH2Raw(t, func(n int, c *h2conn, stream uint32) {
				if n == 1 {
					tc.refuse(c, stream)
					return
				}
				c.respond(stream, "201", map[string]string{"content-type": "application/json"}, contact)
			})
			c, _ := socketClient(t, h.srv.URL, WithHTTPClient(h.srv.Client()))
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"}, WithoutIdempotencyKey())
			if errors.Is(err, ErrOutcomeUnknown) {
				t.Errorf("a write HTTP/2 refused unprocessed: %v; want it known as not done (and retried)", err)
			} else if err != nil {
				t.Errorf("create: %v", err)
			}
		})
	}
}

// blackholeProxy forwards TCP to target; kill makes every connection open
// at that moment silent both ways (a NAT entry or a peer gone without a
// RST), while new connections still go through.
type blackholeProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []*atomic.Bool
	dialed atomic.Int32
}

func newBlackholeProxy(t *testing.T, target string) *blackholeProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &blackholeProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.dialed.Add(1)
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			dead := new(atomic.Bool)
			p.mu.Lock()
			p.conns = append(p.conns, dead)
			p.mu.Unlock()
			t.Cleanup(func() { c.Close(); u.Close() })
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 && !dead.Load() {
						if _, werr := dst.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}
			go pipe(u, c)
			go pipe(c, u)
		}
	}()
	return p
}

func (p *blackholeProxy) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.conns {
		d.Store(true)
	}
}

// TestASilentConnectionIsLeft: the connection to the API goes silent (no
// FIN, no RST). Over HTTP/1 the attempt that times out closes its
// connection and the retry dials a new one. Over HTTP/2 the timed-out
// stream is only reset, and the connection would stay in the pool, every
// retry multiplexed onto it again: the default client's ping
// (DefaultHTTP2PingTimeout, here scaled to 100 ms) finds it dead, and the
// retry goes on a new one.
func TestASilentConnectionIsLeft(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			contact, _ := json.Marshal(sampleContact)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(contact)
			}))
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			t.Cleanup(srv.Close)
			p := newBlackholeProxy(t, srv.Listener.Addr().String())
			tr := defaultHTTPClient().Transport.(*http.Transport)
			if tr.HTTP2 == nil || tr.HTTP2.SendPingTimeout != DefaultHTTP2PingTimeout || tr.HTTP2.PingTimeout != DefaultHTTP2PingTimeout {
				t.Fatalf("the default client's HTTP/2 config: %+v", tr.HTTP2)
			}
			tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
			tr.ResponseHeaderTimeout = 200 * time.Millisecond
			tr.HTTP2.SendPingTimeout, tr.HTTP2.PingTimeout = 100*time.Millisecond, 100*time.Millisecond
			t.Cleanup(tr.CloseIdleConnections)
			c, _ := socketClient(t, "https://"+p.ln.Addr().String(), WithHTTPClient(&http.Client{Transport: tr}))
			ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
			defer cancel()
			var first *http.Response
			if _, err := c.Contacts.Get(ctx, hostileContactID, WithResponseInto(&first)); err != nil {
				t.Fatal(err)
			}
			if (first.ProtoMajor == 2) != h2 {
				t.Fatalf("went over %s", first.Proto)
			}
			p.kill()
			if _, err := c.Contacts.Get(ctx, hostileContactID); err != nil {
				t.Errorf("after the connection went silent (%d connections dialed): %v", p.dialed.Load(), err)
			}
		})
	}
}

// TestAStalledHTTP2WindowEndsAtTheHeaderTimeout (no unbounded wait): a
// Client made without WithHTTPClient gives up on an answer's headers after
// DefaultResponseHeaderTimeout. Over HTTP/2 a server that grants no
// flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0, never a
// WINDOW_UPDATE) stalls every request with a body after its HEADERS, and
// net/http starts its response-header timer only once the body is written:
// the client's own, from the headers, ends it. The client here is the
// default one's transport with the loopback CA and a 300 ms header timeout
// standing in for the 30 s. The error says a timeout, as net/http's own
// does, not context.Canceled: the caller's context is live.
func TestAStalledHTTP2WindowEndsAtTheHeaderTimeout(t *testing.T) {
	const headerTimeout = 300 * time.Millisecond
	h := newH2Raw(t, func(n int, c *h2conn, stream uint32) {}, func(h *h2raw) {
		h.settings = []byte{0, 0x4, 0, 0, 0, 0} // SETTINGS_INITIAL_WINDOW_SIZE = 0
		h.noWindow = true
	})
	if c, err := NewClient(WithAPIKey(testKey)); err != nil || c.answerWait != DefaultResponseHeaderTimeout {
		t.Fatalf("the default client bounds the wait for an answer by %v (%v), want %v", c.answerWait, err, DefaultResponseHeaderTimeout)
	}
	tr := defaultHTTPClient().Transport.(*http.Transport)
	tr.TLSClientConfig = h.srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tr.ResponseHeaderTimeout = headerTimeout
	t.Cleanup(tr.CloseIdleConnections)
	c, _ := socketClient(t, h.srv.URL, WithHTTPClient(&http.Client{Transport: tr}), WithMaxRetries(0))
	c.answerWait = headerTimeout // as NewClient sets it for its default client
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	defer cancel()

	start := time.Now()
	_, err := c.Contacts.Get(ctx, hostileContactID)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a GET the server never answers took %v (%v)", d, err)
	}
	start = time.Now()
	_, err = c.Contacts.Create(ctx, ContactCreate{Name: "Ada", Tags: []string{strings.Repeat("t", 70_000)}}) // past a window of 65535 too
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a create whose body the server's window never lets out ended after %v, at the caller's deadline (%v); the header timeout is %v", d.Round(time.Millisecond), err, headerTimeout)
	}
	var ne net.Error
	if errors.Is(err, context.Canceled) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("a create unanswered past the header timeout, its caller's context live: %v; want a timeout, not context.Canceled", err)
	}
}

// TestRefusedStreamsAreNeitherResentNorRefusals: a server (a proxy
// shedding load) answers every HTTP/2 stream with RST_STREAM
// (REFUSED_STREAM), which net/http's HTTP/2 transport would resend up to 7
// times with a backoff of its own, and which RFC 9113 8.7 says was closed
// before any processing: none was a 429 the client did not read. Thirty
// gets in a row with WithMaxRetries(0) each send one request, as many as
// the budget let out, and the refusal guard (25 in a minute) holds none.
func TestRefusedStreamsAreNeitherResentNorRefusals(t *testing.T) {
	h := newH2Raw(t, func(n int, c *h2conn, stream uint32) { c.reset(stream, h2RefusedStream) })
	c, attempts := h.client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for i := range 30 {
		_, err := c.Contacts.Get(ctx, hostileContactID)
		if e := (*Error)(nil); errors.As(err, &e) && e.Local {
			t.Fatalf("get %d: %v (the server read %d requests)", i+1, err, h.requests())
		}
	}
	if n, a := h.requests(), attempts.Load(); n != 30 || a != 30 {
		t.Errorf("the server read %d requests of 30 gets, the budget let %d attempts out", n, a)
	}
}
