package bodo

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// h2raw is a hand-written HTTP/2 server over loopback TLS (httptest's
// certificate, srv.Client() trusts it) that hands every complete request
// (its END_STREAM seen) to serve, numbered from 1 across connections, so
// that a test can answer with frames net/http's server never sends:
// RST_STREAM of any code, GOAWAY naming any last stream, a stalled window.
type h2raw struct {
	srv   *httptest.Server
	serve func(n int, c *h2conn, stream uint32)
	// settings is the payload of the server's first SETTINGS frame
	// (id, value pairs); window, when false, gives no flow-control window
	// back for the request bodies it reads.
	settings []byte
	noWindow bool

	mu    sync.Mutex
	n     int
	conns int
}

type h2conn struct {
	wmu sync.Mutex
	c   *tls.Conn
	r   *bufio.Reader
}

const (
	h2Data     = 0x0
	h2Headers  = 0x1
	h2RST      = 0x3
	h2Settings = 0x4
	h2Ping     = 0x6
	h2GoAway   = 0x7
	h2Window   = 0x8
	h2Cont     = 0x9

	h2EndStream  = 0x1
	h2Ack        = 0x1
	h2EndHeaders = 0x4

	h2NoError       = 0x0
	h2ProtocolError = 0x1
	h2InternalError = 0x2
	h2RefusedStream = 0x7
)

func newH2Raw(t *testing.T, serve func(n int, c *h2conn, stream uint32), conf ...func(*h2raw)) *h2raw {
	h := &h2raw{serve: serve}
	for _, f := range conf {
		f(h)
	}
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.EnableHTTP2 = true
	srv.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
		"h2": func(_ *http.Server, c *tls.Conn, _ http.Handler) { h.run(c) },
	}
	srv.StartTLS()
	h.srv = srv
	t.Cleanup(srv.Close)
	return h
}

// client is a client of h with WithMaxRetries(0), and the count of the
// attempts it let out.
func (h *h2raw) client(t *testing.T) (*Client, *atomic.Int32) {
	var attempts atomic.Int32
	c, _ := socketClient(t, h.srv.URL, WithHTTPClient(h.srv.Client()), WithMaxRetries(0),
		WithMiddleware(func(r *http.Request, next MiddlewareNext) (*http.Response, error) {
			attempts.Add(1)
			return next(r)
		}))
	return c, &attempts
}

func (h *h2raw) requests() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

func (h *h2raw) run(c *tls.Conn) {
	h.mu.Lock()
	h.conns++
	h.mu.Unlock()
	hc := &h2conn{c: c, r: bufio.NewReader(c)}
	preface := make([]byte, 24)
	if _, err := io.ReadFull(hc.r, preface); err != nil {
		return
	}
	hc.frame(h2Settings, 0, 0, h.settings)
	for {
		var hdr [9]byte
		if _, err := io.ReadFull(hc.r, hdr[:]); err != nil {
			return
		}
		length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags := hdr[3], hdr[4]
		stream := binary.BigEndian.Uint32(hdr[5:]) & 0x7fffffff
		payload := make([]byte, length)
		if _, err := io.ReadFull(hc.r, payload); err != nil {
			return
		}
		switch typ {
		case h2Settings:
			if flags&h2Ack == 0 {
				hc.frame(h2Settings, h2Ack, 0, nil)
			}
		case h2Ping:
			if flags&h2Ack == 0 {
				hc.frame(h2Ping, h2Ack, 0, payload)
			}
		case h2Headers, h2Data:
			if typ == h2Data && length > 0 && !h.noWindow { // give the window back
				var w [4]byte
				binary.BigEndian.PutUint32(w[:], uint32(length))
				hc.frame(h2Window, 0, 0, w[:])
				hc.frame(h2Window, 0, stream, w[:])
			}
			if flags&h2EndStream != 0 {
				h.mu.Lock()
				h.n++
				n := h.n
				h.mu.Unlock()
				go h.serve(n, hc, stream)
			}
		}
	}
}

func (hc *h2conn) frame(typ, flags byte, stream uint32, payload []byte) {
	hc.wmu.Lock()
	defer hc.wmu.Unlock()
	var hdr [9]byte
	hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	hdr[3], hdr[4] = typ, flags
	binary.BigEndian.PutUint32(hdr[5:], stream)
	_, _ = hc.c.Write(append(hdr[:], payload...))
}

// respond answers stream with status, the headers given (lower-case
// names, short values) and body.
func (hc *h2conn) respond(stream uint32, status string, header map[string]string, body []byte) {
	block := []byte{0x08, byte(len(status))} // :status, literal without indexing, indexed name 8
	block = append(block, status...)
	for k, v := range header {
		block = append(block, 0x00, byte(len(k)))
		block = append(block, k...)
		block = append(block, byte(len(v)))
		block = append(block, v...)
	}
	if len(body) == 0 {
		hc.frame(h2Headers, h2EndHeaders|h2EndStream, stream, block)
		return
	}
	hc.frame(h2Headers, h2EndHeaders, stream, block)
	hc.frame(h2Data, h2EndStream, stream, body)
}

func (hc *h2conn) reset(stream uint32, code uint32) {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], code)
	hc.frame(h2RST, 0, stream, p[:])
}

func (hc *h2conn) goAway(last uint32, code uint32) {
	var p [8]byte
	binary.BigEndian.PutUint32(p[:], last)
	binary.BigEndian.PutUint32(p[4:], code)
	hc.frame(h2GoAway, 0, 0, p[:])
}

// h2Invoice is a paid invoice, as h2raw answers a payment.
var h2Invoice = []byte(`{"id":"inv_1","contactId":"con_1","amount":100,"currency":"EUR","status":"paid","amountRefunded":0,"createdAt":"2026-11-30T10:00:00Z","updatedAt":"2026-11-30T10:00:00Z"}`)
