package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Transport returns an http.RoundTripper that serves requests by calling
// the server in-process (see HandlerTransport).
func (s *Server) Transport() http.RoundTripper { return HandlerTransport(s) }

// HandlerTransport returns an http.RoundTripper that serves requests by
// calling h in-process: no sockets, so it works inside a synctest bubble.
// It reads and closes the request body, returns the context's error when
// the request is cancelled before the answer (the handler goes on, like a
// real server), and turns a dropped connection into an error wrapping
// io.ErrUnexpectedEOF. Like net/http's Transport it tells a ClientTrace in
// the request's context of GetConn, GotConn (with a connection of its own,
// one per request) and WroteHeaders; a request whose connection GotConn
// closed, or whose context ended by then, is not served.
func HandlerTransport(h http.Handler) http.RoundTripper { return &transport{h: h} }

type transport struct{ h http.Handler }

// errDropped is what a client sees when the handler drops the connection.
var errDropped = fmt.Errorf("sandbox: connection closed before an answer: %w", io.ErrUnexpectedEOF)

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("sandbox: reading the request body: %w", err)
		}
	}
	if req.URL == nil {
		return nil, errors.New("sandbox: request has no URL")
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := lastMoment(req); err != nil {
		return nil, err
	}

	sreq := req.Clone(ctx)
	sreq.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	sreq.RequestURI = req.URL.RequestURI()
	if sreq.Host == "" {
		sreq.Host = req.URL.Host
	}
	sreq.Proto, sreq.ProtoMajor, sreq.ProtoMinor = "HTTP/1.1", 1, 1
	sreq.RemoteAddr = "192.0.2.1:49152"
	sreq.Body = io.NopCloser(bytes.NewReader(body))
	sreq.ContentLength = int64(len(body))
	sreq.GetBody = nil

	rec := &recorder{header: http.Header{}}
	done := make(chan error, 1)
	go func() { done <- serveRecovered(t.h, rec, sreq) }()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
		return rec.response(req), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// errClosedBeforeWrite is what a client sees when its own GotConn hook
// closed the connection before the request was written.
var errClosedBeforeWrite = errors.New("sandbox: connection closed before the request was written")

// lastMoment plays the transport's hooks up to writing the headers of req:
// GetConn, GotConn with a connection of req's own, then WroteHeaders once
// neither that connection was closed nor req's context ended.
func lastMoment(req *http.Request) error {
	trace := httptrace.ContextClientTrace(req.Context())
	if trace == nil {
		return nil
	}
	if trace.GetConn != nil {
		trace.GetConn(req.URL.Host)
	}
	if trace.GotConn != nil {
		conn := new(traceConn)
		trace.GotConn(httptrace.GotConnInfo{Conn: conn})
		if conn.closed.Load() {
			return errClosedBeforeWrite
		}
	}
	if err := req.Context().Err(); err != nil {
		return err
	}
	if trace.WroteHeaders != nil {
		trace.WroteHeaders()
	}
	return nil
}

// traceConn is the connection GotConn gets: nothing goes over it, and it
// notes a Close.
type traceConn struct{ closed atomic.Bool }

// traceAddr is both ends of a traceConn.
var traceAddr = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 49152}

func (c *traceConn) Read([]byte) (int, error)         { return 0, net.ErrClosed }
func (c *traceConn) Write([]byte) (int, error)        { return 0, net.ErrClosed }
func (c *traceConn) Close() error                     { c.closed.Store(true); return nil }
func (c *traceConn) LocalAddr() net.Addr              { return traceAddr }
func (c *traceConn) RemoteAddr() net.Addr             { return traceAddr }
func (c *traceConn) SetDeadline(time.Time) error      { return nil }
func (c *traceConn) SetReadDeadline(time.Time) error  { return nil }
func (c *traceConn) SetWriteDeadline(time.Time) error { return nil }

func serveRecovered(h http.Handler, w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				err = errDropped
				return
			}
			err = fmt.Errorf("sandbox: handler panicked (%v): %w", p, io.ErrUnexpectedEOF)
		}
	}()
	h.ServeHTTP(w, r)
	return nil
}

// recorder is the handler's side of the in-process connection.
type recorder struct {
	header  http.Header
	status  int
	snap    http.Header
	body    bytes.Buffer
	written bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.written {
		return
	}
	r.written = true
	r.status = code
	r.snap = r.header.Clone()
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

func (r *recorder) response(req *http.Request) *http.Response {
	r.WriteHeader(http.StatusOK)
	h := r.snap
	if h.Get("Date") == "" {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	resp := &http.Response{
		Status:     strconv.Itoa(r.status) + " " + http.StatusText(r.status),
		StatusCode: r.status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  h,
		Request: req,
	}
	noBody := r.status == http.StatusNoContent || r.status == http.StatusNotModified ||
		r.status < 200 || req.Method == http.MethodHead
	if noBody {
		resp.Body = http.NoBody
		if req.Method != http.MethodHead {
			h.Del("Content-Length")
		}
		return resp
	}
	b := bytes.Clone(r.body.Bytes())
	h.Set("Content-Length", strconv.Itoa(len(b)))
	resp.ContentLength = int64(len(b))
	resp.Body = &body{r: bytes.NewReader(b)}
	return resp
}

// body is a response body that, like a network one, refuses reads after
// Close.
type body struct {
	mu     sync.Mutex
	r      *bytes.Reader
	closed bool
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errors.New("http: read on closed response body")
	}
	return b.r.Read(p)
}

func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}
