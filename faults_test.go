package bodo

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/budget"
	"github.com/bodo-app/bodo-go/internal/sandbox"
	"github.com/jarcoal/httpmock"
)

// The fault tests drive the client through broken servers and check, in
// every case: no panic, no goroutine left behind (checkNoLeaks), no wait
// past the context's deadline, no write done twice, and an error that
// errors.Is/As finds the right thing in. Faults that need a real socket run
// on loopback with short deadlines; the rest run on virtual time.

// ---------------------------------------------------------------------------
// Leak check

// goroutineStacks returns every goroutine's stack by id.
func goroutineStacks() map[int]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[int]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		var id int
		if _, err := fmt.Sscanf(g, "goroutine %d ", &id); err == nil {
			out[id] = g
		}
	}
	return out
}

func currentGoroutineID() int {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	var id int
	_, _ = fmt.Sscanf(string(buf), "goroutine %d ", &id)
	return id
}

// leakSuspect reports whether a goroutine's stack is one a call could leave
// behind: in net/http, the net package, the client or the sandbox.
func leakSuspect(stack string) bool {
	for _, s := range []string{"net/http.", "net.(*", "internal/poll.", "github.com/bodo-app/bodo-go"} {
		if strings.Contains(stack, s) {
			return true
		}
	}
	return false
}

// checkNoLeaks fails t when, after the test and its cleanups registered
// later (which run first: close servers, close the transports' idle
// connections), a goroutine that did not exist before is still in net/http,
// net or bodo code. It allows up to 3 s for shutdown.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	before := goroutineStacks()
	n0 := runtime.NumGoroutine()
	t.Cleanup(func() {
		self := currentGoroutineID()
		var leaked []string
		var waitedFor string
		start := time.Now()
		deadline := start.Add(3 * time.Second)
		for {
			leaked = leaked[:0]
			for id, st := range goroutineStacks() {
				if _, old := before[id]; old || id == self {
					continue
				}
				if leakSuspect(st) {
					leaked = append(leaked, st)
				}
			}
			if len(leaked) == 0 || time.Now().After(deadline) {
				break
			}
			if waitedFor == "" {
				waitedFor = leaked[0]
			}
			time.Sleep(10 * time.Millisecond)
		}
		if el := time.Since(start); el > 500*time.Millisecond && len(leaked) == 0 {
			t.Logf("leak check: waited %v for goroutines to end, first:\n%s", el, waitedFor)
		}
		if len(leaked) > 0 {
			t.Errorf("%d goroutines left behind (NumGoroutine %d before, %d now):\n\n%s",
				len(leaked), n0, runtime.NumGoroutine(), strings.Join(leaked, "\n\n"))
		}
	})
}

// ---------------------------------------------------------------------------
// Clients on real sockets

var faultKeySeq atomic.Int64

// socketClient makes a client for a loopback server with a transport of its
// own, whose idle connections are closed when the test ends, and a key of
// its own, so that no two tests share a budget even when a port is reused.
// It returns the client and the key.
func socketClient(t *testing.T, baseURL string, opts ...Option) (*Client, string) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	key := fmt.Sprintf("bodo_test_fault%024d", faultKeySeq.Add(1))
	base := []Option{WithAPIKey(key), WithBaseURL(baseURL), WithHTTPClient(&http.Client{Transport: tr}), WithLogger(quiet)}
	c, err := NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	// Each fault key is a principal and org of its own, said up front: a
	// key of an earlier test on a reused port would otherwise make the
	// client ask GET /v1/me between the answers a test scripts.
	c.state.SetIdentity("prn_"+key, "org_"+key)
	return c, key
}

// rawServer is a TCP server on 127.0.0.1:0 that reads each request (headers
// and body) and hands the connection to serve, which plays the fault. It
// closes the connection after serve unless serve returns true (keep it for
// the next request).
type rawServer struct {
	url  string
	ln   net.Listener
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	conns    []net.Conn
	accepted int
	requests []*http.Request // in arrival order; bodies read into bodies
	bodies   [][]byte
}

func newRawServer(t *testing.T, serve func(s *rawServer, n int, c *net.TCPConn, req *http.Request) (keep bool)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{url: "http://" + ln.Addr().String(), ln: ln, stop: make(chan struct{})}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.accepted++
			s.mu.Unlock()
			s.wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body, _ := io.ReadAll(req.Body)
					s.mu.Lock()
					s.requests = append(s.requests, req)
					s.bodies = append(s.bodies, body)
					n := len(s.requests)
					s.mu.Unlock()
					if !serve(s, n, c.(*net.TCPConn), req) {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		close(s.stop)
		_ = ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// pause waits d or until the server stops; false when it stopped.
func (s *rawServer) pause(d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-s.stop:
		return false
	}
}

func (s *rawServer) counts() (conns, requests int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted, len(s.requests)
}

// idempotencyKeys returns the Idempotency-Key of every request so far.
func (s *rawServer) idempotencyKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for _, r := range s.requests {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
	}
	return keys
}

// reset closes c with an RST instead of a FIN.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

const meJSON = `{"keyId":"key_01JBD8Y3K5M7Q2W9X4Z6T1V0NP","principal":{"id":"prn_01JBD8Y3K5M7Q2W9X4Z6T1V0NP","type":"user","name":"Ada"},"organization":{"id":"org_01JBD8Y3K5M7Q2W9X4Z6T1V0NP","name":"Engines"}}`

// slack is how long after a deadline a call may take to return.
const slack = 300 * time.Millisecond

// within fails t when the call took longer than limit plus slack.
func within(t *testing.T, start time.Time, limit time.Duration) {
	t.Helper()
	if el := time.Since(start); el > limit+slack {
		t.Errorf("the call took %v, more than %v (+%v)", el, limit, slack)
	}
}

// ---------------------------------------------------------------------------
// Faults on real sockets

// TestFaultsOverSockets runs the faults that need a real TCP connection,
// in parallel, under one leak check.
func TestFaultsOverSockets(t *testing.T) {
	checkNoLeaks(t)

	// Headers and part of a JSON body, then an RST, on every attempt. The
	// body breaking off fails the attempt, so a read is retried; when the
	// retries run out the *RetryError holds an *Error with the answer's
	// status and the part that came, and unwraps to the reset. (A single
	// reset followed by a good answer: TestFaultResetMidBodyOfAReadIsRetried.)
	resetMidBody := func(status int, body string) func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
		return func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
			fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", status, http.StatusText(status), len(body)+100, body)
			s.pause(20 * time.Millisecond)
			reset(c)
			return false
		}
	}
	t.Run("reset mid-body", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, resetMidBody(200, meJSON[:40]))
		c, _ := socketClient(t, srv.url, WithMaxRetries(1))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Me(ctx)
		within(t, start, 3*time.Second)
		var re *RetryError
		var e *Error
		if !errors.As(err, &re) || re.Attempts != 2 || !errors.As(err, &e) || e.Status != 200 || !strings.Contains(err.Error(), "could not be read") {
			t.Fatalf("err = %v", err)
		}
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%v does not unwrap to the reset", err)
		}
		if string(e.Body) != meJSON[:40] {
			t.Errorf("Body = %q, want the part that came", e.Body)
		}
		if _, reqs := srv.counts(); reqs != 2 {
			t.Errorf("%d requests, want 2", reqs)
		}
	})
	t.Run("reset mid-body of a keyed create", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, resetMidBody(201, `{"id":"con_01JBD8Y3K5M7`))
		c, _ := socketClient(t, srv.url, WithMaxRetries(1))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"})
		var e *Error
		if !errors.As(err, &e) || e.Status != 201 || errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("err = %v", err)
		}
		keys := srv.idempotencyKeys()
		if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
			t.Errorf("Idempotency-Keys %q: want the same one on both attempts", keys)
		}
	})

	// 101 Switching Protocols hands the connection over instead of an
	// answer: no attempt reads it, so the server keeping it open holds no
	// call. A read is retried; a write without a key is not, since the
	// request left and no answer says what came of it.
	switching := func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
		fmt.Fprint(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: bodo\r\nConnection: Upgrade\r\n\r\n")
		s.pause(10 * time.Second)
		return false
	}
	t.Run("101 to a read", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, switching)
		c, _ := socketClient(t, srv.url, WithMaxRetries(1))
		start := time.Now()
		_, err := c.Me(context.Background())
		within(t, start, 2*time.Second)
		var re *RetryError
		if !errors.As(err, &re) || re.Attempts != 2 || !errors.As(err, new(*interimAnswer)) || !strings.Contains(err.Error(), "101") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("101 to a write without a key", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, switching)
		c, _ := socketClient(t, srv.url)
		start := time.Now()
		_, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}, WithoutIdempotencyKey())
		within(t, start, time.Second)
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.As(err, new(*interimAnswer)) {
			t.Fatalf("err = %v", err)
		}
		if _, reqs := srv.counts(); reqs != 1 {
			t.Errorf("%d requests, want 1", reqs)
		}
	})

	// A body that breaks off in other ways: FIN before Content-Length,
	// malformed chunked encoding, a gzip body that is not gzip (Go's
	// transport asked for gzip and unpacks it). Each fails the attempt, so
	// a read is retried, and the error unwraps to the cause.
	for _, tc := range []struct {
		name  string
		serve func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool
		cause func(error) bool
	}{
		{"FIN mid-body", func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(meJSON), meJSON[:40])
			return false
		}, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"malformed chunked body", func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")
			return false
		}, func(err error) bool { return strings.Contains(err.Error(), "chunk") }},
		{"corrupt gzip body", func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s", len(meJSON), meJSON)
			return true
		}, func(err error) bool { return strings.Contains(err.Error(), "gzip") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newRawServer(t, tc.serve)
			c, _ := socketClient(t, srv.url, WithMaxRetries(1))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err := c.Me(ctx)
			var re *RetryError
			var e *Error
			if !errors.As(err, &re) || re.Attempts != 2 || !errors.As(err, &e) || e.Status != 200 || !tc.cause(err) {
				t.Fatalf("err = %v", err)
			}
			if _, reqs := srv.counts(); reqs != 2 {
				t.Errorf("%d requests, want 2", reqs)
			}
		})
	}

	// Nothing listens: the request never left, so even an unkeyed write
	// is retried; the error unwraps to ECONNREFUSED.
	t.Run("connection refused, unkeyed create", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		c, _ := socketClient(t, "http://"+addr, WithMaxRetries(1))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err = c.Contacts.Create(ctx, ContactCreate{Name: "Ada"}, WithoutIdempotencyKey())
		var re *RetryError
		if !errors.As(err, &re) || re.Attempts != 2 || !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("err = %v", err)
		}
	})

	// A redirect loop: the client follows no redirect, so each call is one
	// request and fails with the 307 (ErrRedirected), a write included.
	t.Run("redirect loop", func(t *testing.T) {
		t.Parallel()
		var hits atomic.Int32
		loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			http.Redirect(w, r, r.URL.Path, http.StatusTemporaryRedirect)
		}))
		t.Cleanup(loop.Close)
		c, _ := socketClient(t, loop.URL, WithMaxRetries(1))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := c.Me(ctx)
		if !errors.Is(err, ErrRedirected) || hits.Load() != 1 {
			t.Fatalf("%d requests: err = %v", hits.Load(), err)
		}
		hits.Store(0)
		_, err = c.Contacts.Create(ctx, ContactCreate{Name: "Ada"}, WithoutIdempotencyKey())
		if !errors.Is(err, ErrRedirected) || errors.Is(err, ErrOutcomeUnknown) || hits.Load() != 1 {
			t.Fatalf("unkeyed create: %d requests: err = %v", hits.Load(), err)
		}
	})

	// The same for an unkeyed write: the 201 came, so the write is known
	// to have happened; the error says its body was lost, keeps the status
	// and unwraps to the reset, and the write is not repeated.
	t.Run("reset mid-body of an unkeyed create", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
			fmt.Fprint(c, "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 300\r\n\r\n{\"id\":\"con_01JBD8Y3K5M7")
			s.pause(20 * time.Millisecond)
			reset(c)
			return false
		})
		c, _ := socketClient(t, srv.url)
		_, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}, WithoutIdempotencyKey())
		var e *Error
		if !errors.As(err, &e) || e.Status != 201 || errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("err = %v", err)
		}
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%v does not unwrap to the reset", err)
		}
		if _, reqs := srv.counts(); reqs != 1 {
			t.Errorf("%d requests: the write was repeated", reqs)
		}
	})

	// A 429 whose problem body is cut by an RST: what came is no problem,
	// so it is a 429 without a problem body, retried after its
	// Retry-After.
	t.Run("reset mid-body of a 429", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
			if n == 1 {
				fmt.Fprint(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/problem+json\r\nRetry-After: 0\r\nContent-Length: 400\r\n\r\n{\"code\":\"RATE_LIM")
				s.pause(20 * time.Millisecond)
				reset(c)
				return false
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(meJSON), meJSON)
			return true
		})
		c, _ := socketClient(t, srv.url)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := c.Me(ctx); err != nil {
			t.Fatal(err)
		}
		if _, reqs := srv.counts(); reqs != 2 {
			t.Errorf("%d requests, want 2", reqs)
		}
	})

	// Half the status line and headers, then an RST: no answer, so a read
	// is retried (and fails again), a keyed write is retried with its key,
	// an unkeyed write is not retried and says its outcome is unknown.
	halfHeaders := func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: appl")
		reset(c)
		return false
	}
	t.Run("half-written headers, read", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, halfHeaders)
		err := meWithin(t, srv, 3*time.Second, WithMaxRetries(1))
		var re *RetryError
		if !errors.As(err, &re) || re.Attempts != 2 {
			t.Fatalf("err = %v", err)
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%v wraps neither io.ErrUnexpectedEOF nor ECONNRESET", err)
		}
		if conns, reqs := srv.counts(); reqs != 2 || conns != 2 {
			t.Errorf("%d requests on %d connections, want 2 on 2", reqs, conns)
		}
	})
	t.Run("half-written headers, keyed create", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, halfHeaders)
		c, _ := socketClient(t, srv.url, WithMaxRetries(1))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"})
		var re *RetryError
		if !errors.As(err, &re) || re.Attempts != 2 || errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("err = %v", err)
		}
		keys := srv.idempotencyKeys()
		if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
			t.Errorf("Idempotency-Keys %q: want the same one on both attempts", keys)
		}
	})
	t.Run("half-written headers, unkeyed create", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, halfHeaders)
		c, _ := socketClient(t, srv.url)
		_, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}, WithoutIdempotencyKey())
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("err = %v", err)
		}
		if _, reqs := srv.counts(); reqs != 1 {
			t.Errorf("%d requests: an unkeyed write was repeated", reqs)
		}
	})

	// A server that reads the request and never answers. Each attempt is
	// cut by the attempt timeout and retried; the context's deadline ends
	// the call.
	never := func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
		_, _ = io.Copy(io.Discard, c) // until the client gives up
		return false
	}
	t.Run("never answers, read", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, never)
		err := meWithin(t, srv, 1500*time.Millisecond, WithAttemptTimeout(100*time.Millisecond))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		// The first attempt times out at 100 ms and the first backoff is
		// at most 1 s, so the second attempt always starts in time.
		if conns, reqs := srv.counts(); reqs < 2 || reqs > 1+DefaultMaxRetries || conns != reqs {
			t.Errorf("%d requests on %d connections, want 2 or 3 on as many", reqs, conns)
		}
	})
	t.Run("never answers, keyed create", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, never)
		c, _ := socketClient(t, srv.url, WithAttemptTimeout(100*time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		_, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"})
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("err = %v", err)
		}
		keys := srv.idempotencyKeys()
		if len(keys) < 2 {
			t.Fatalf("%d attempts, want a retry", len(keys))
		}
		for _, k := range keys {
			if k == "" || k != keys[0] {
				t.Errorf("Idempotency-Keys %q: want one key on every attempt", keys)
			}
		}
	})
	t.Run("never answers, unkeyed create", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, never)
		c, _ := socketClient(t, srv.url, WithAttemptTimeout(100*time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"}, WithoutIdempotencyKey())
		within(t, start, time.Second)
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if _, reqs := srv.counts(); reqs != 1 {
			t.Errorf("%d requests: an unkeyed write was repeated", reqs)
		}
	})
	t.Run("never answers, no attempt timeout", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, never)
		err := meWithin(t, srv, 300*time.Millisecond)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
	})

	// A proxy's HTML 500: an *Error with the status and the raw body,
	// ErrInternal, not retried.
	t.Run("500 with an HTML body", func(t *testing.T) {
		t.Parallel()
		const page = "<html><head><title>500 Internal Server Error</title></head>\n<body><h1>Internal Server Error</h1></body></html>\n"
		var hits atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(500)
			_, _ = io.WriteString(w, page)
		}))
		t.Cleanup(srv.Close)
		c, _ := socketClient(t, srv.URL)
		_, err := c.Me(context.Background())
		var e *Error
		if !errors.As(err, &e) || e.Status != 500 || e.Code != "" || string(e.Body) != page || !errors.Is(err, ErrInternal) {
			t.Fatalf("err = %v", err)
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "retry later") {
			t.Errorf("Error() = %q: want one line that says what to do", msg)
		}
		if hits.Load() != 1 {
			t.Errorf("%d requests: a 500 was retried", hits.Load())
		}
	})

	// A 100 MB problem body: read up to 1 MiB (plus at most 64 KiB
	// drained), then the connection is dropped.
	t.Run("100 MB problem body", func(t *testing.T) {
		t.Parallel()
		const size = 100 << 20
		var written atomic.Int64
		srv := newRawServer(t, func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
			fmt.Fprintf(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/problem+json\r\nContent-Length: %d\r\n\r\n", size)
			chunk := []byte(`{"code":"INTERNAL","detail":"` + strings.Repeat("x", 32<<10-29))
			for sent := 0; sent < size; {
				k, err := c.Write(chunk[:min(len(chunk), size-sent)])
				written.Add(int64(k))
				sent += k
				if err != nil {
					return false
				}
				chunk = []byte(strings.Repeat("x", 32<<10))
			}
			return false
		})
		var read atomic.Int64
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		counting := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := tr.RoundTrip(r)
			if err == nil {
				resp.Body = &countingBody{ReadCloser: resp.Body, n: &read}
			}
			return resp, err
		})
		c, _ := socketClient(t, srv.url, WithHTTPClient(&http.Client{Transport: counting}))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.Me(ctx)
		var e *Error
		if !errors.As(err, &e) || e.Status != 500 || len(e.Body) != maxProblemBody || !errors.Is(err, ErrInternal) {
			t.Fatalf("err = %v (body %d bytes)", err, len(e.Body))
		}
		if r := read.Load(); r > maxProblemBody+64<<10 {
			t.Errorf("the client read %d bytes of the body, more than 1 MiB + 64 KiB", r)
		}
		// What the server got out is what the client read plus what the
		// socket buffers held when it hung up.
		time.Sleep(50 * time.Millisecond)
		if w := written.Load(); w >= size/2 {
			t.Errorf("the server wrote %d of %d bytes: the client read it all", w, size)
		}
		t.Logf("client read %d bytes; server wrote %d of %d", read.Load(), written.Load(), size)
	})

	// A body that trickles in a few bytes a second: the context's deadline
	// ends the call in time; the attempt timeout ends each attempt, and a
	// read is retried. Either way the error unwraps to
	// context.DeadlineExceeded.
	trickle := func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(meJSON))
		for i := range len(meJSON) {
			if _, err := c.Write([]byte{meJSON[i]}); err != nil || !s.pause(250*time.Millisecond) {
				return false
			}
		}
		return false
	}
	t.Run("slow trickle body, ctx deadline", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, trickle)
		err := meWithin(t, srv, 600*time.Millisecond)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("slow trickle body, attempt timeout", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, trickle)
		c, _ := socketClient(t, srv.url, WithAttemptTimeout(300*time.Millisecond), WithMaxRetries(1))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Me(ctx)
		// Two attempts of 300 ms and a backoff of at most 1 s.
		within(t, start, 1600*time.Millisecond)
		var re *RetryError
		if !errors.As(err, &re) || re.Attempts != 2 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if _, reqs := srv.counts(); reqs != 2 {
			t.Errorf("%d requests, want 2", reqs)
		}
	})
	// Headers that trickle in: the attempt timeout cuts the attempt before
	// any answer, so a read is retried.
	t.Run("slow trickle headers, attempt timeout", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
			for _, b := range []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n") {
				if _, err := c.Write([]byte{b}); err != nil || !s.pause(50*time.Millisecond) {
					return false
				}
			}
			return false
		})
		c, _ := socketClient(t, srv.url, WithAttemptTimeout(200*time.Millisecond), WithMaxRetries(1))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Me(ctx)
		within(t, start, 1400*time.Millisecond)
		var re *RetryError
		if !errors.As(err, &re) || re.Attempts != 2 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if _, reqs := srv.counts(); reqs != 2 {
			t.Errorf("%d requests, want 2", reqs)
		}
	})

	// The server answers on a keep-alive connection, then closes it when
	// the next request arrives on it, without a byte of answer. Go's
	// transport itself sends a GET or a keyed POST again on a new
	// connection (the server sees one request more than the client made
	// attempts); an unkeyed POST it does not, and the client reports its
	// outcome as unknown.
	closeOnReuse := func(body string, status int) func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
		return func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
			if n == 2 {
				_ = c.Close()
				return false
			}
			fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", status, http.StatusText(status), len(body), body)
			return true
		}
	}
	contactJSON := `{"id":"con_01JBD8Y3K5M7Q2W9X4Z6T1V0NP","name":"Ada","email":null,"phone":null,"company":null,"tags":[],"createdAt":"2026-11-30T10:00:00Z","updatedAt":"2026-11-30T10:00:00Z"}`
	t.Run("keep-alive closed on reuse, read", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, closeOnReuse(meJSON, 200))
		var attempts atomic.Int32
		c, _ := socketClient(t, srv.url, WithOnRetry(func(RetryEvent) { attempts.Add(1) }))
		for range 2 {
			if _, err := c.Me(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if conns, reqs := srv.counts(); reqs != 3 || conns != 2 || attempts.Load() != 0 {
			t.Errorf("%d requests on %d connections, %d client retries; want 3 on 2 and none (the transport retried)", reqs, conns, attempts.Load())
		}
	})
	t.Run("keep-alive closed on reuse, keyed create", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, closeOnReuse(contactJSON, 201))
		c, _ := socketClient(t, srv.url)
		for range 2 {
			if _, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}); err != nil {
				t.Fatal(err)
			}
		}
		keys := srv.idempotencyKeys()
		if len(keys) != 3 || keys[1] != keys[2] || keys[0] == keys[1] {
			t.Errorf("Idempotency-Keys %q: want the transport's resend to carry the second call's key", keys)
		}
	})
	t.Run("keep-alive closed on reuse, unkeyed create", func(t *testing.T) {
		t.Parallel()
		srv := newRawServer(t, closeOnReuse(contactJSON, 201))
		c, _ := socketClient(t, srv.url)
		if _, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}, WithoutIdempotencyKey()); err != nil {
			t.Fatal(err)
		}
		_, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}, WithoutIdempotencyKey())
		if !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("err = %v", err)
		}
		if _, reqs := srv.counts(); reqs != 2 {
			t.Errorf("%d requests: an unkeyed write was sent again", reqs)
		}
	})
}

// countingBody counts the bytes read from a response body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	b.n.Add(int64(k))
	return k, err
}

// TestFaultTrickleBodyErrorWrapsTheDeadline: a 200 whose body trickles in
// slower than the context allows fails when the deadline passes, and the
// error says so: errors.Is(err, context.DeadlineExceeded), as for a
// deadline at any other point of a call.
//
// Regression: before d7d84ef the body was decoded after send returned and
// the read error was formatted into Detail with %v, so the *Error{Status:
// 200, Title: "Invalid response"} wrapped nothing.
func TestFaultTrickleBodyErrorWrapsTheDeadline(t *testing.T) {
	checkNoLeaks(t)
	srv := newRawServer(t, func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(meJSON))
		for i := range len(meJSON) {
			if _, err := c.Write([]byte{meJSON[i]}); err != nil || !s.pause(100*time.Millisecond) {
				return false
			}
		}
		return false
	})
	c, _ := socketClient(t, srv.url)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Me(ctx)
	within(t, start, 300*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a body cut by the context's deadline: errors.Is(err, context.DeadlineExceeded) = false for %q (%T)", err, err)
	}
}

// TestFaultResetMidBodyOfAReadIsRetried: the README lists a reset among
// the connection failures that are retried where a retry is safe, and a
// GET always is. A reset in the middle of a 200's body is such a failure:
// the read should be retried, and when it fails for good the error should
// wrap the cause (ECONNRESET).
//
// Regression: before d7d84ef the client returned at once, after one
// attempt, with *Error{Status: 200, Title: "Invalid response"} whose
// Detail held the reset as text (the body was read after send had returned
// the 2xx, outside the retry loop, and the error wrapped nothing).
func TestFaultResetMidBodyOfAReadIsRetried(t *testing.T) {
	checkNoLeaks(t)
	srv := newRawServer(t, func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
		if n == 1 {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(meJSON), meJSON[:40])
			s.pause(20 * time.Millisecond)
			reset(c)
			return false
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(meJSON), meJSON)
		return true
	})
	c, _ := socketClient(t, srv.url, WithMaxRetries(1))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	me, err := c.Me(ctx)
	_, reqs := srv.counts()
	if err != nil || reqs != 2 {
		t.Errorf("a GET whose body was reset: %d requests, err = %v; want it retried (2 requests) and answered", reqs, err)
	} else if me.KeyID == "" {
		t.Errorf("Me = %+v", me)
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("errors.Is(err, syscall.ECONNRESET) = false for %q", err)
	}
}

// ---------------------------------------------------------------------------
// Faults on virtual time, with httpmock

// TestFaultRetryAfterHints: Retry-After 0 (a storm of them), a date in the
// past and a year ahead, on one call.
func TestFaultRetryAfterHints(t *testing.T) {
	checkNoLeaks(t)
	t.Run("storm of 429 with Retry-After 0", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, mt := mockClient(t)
			var rec recorder
			mt.RegisterResponder("GET", "=~/v1/me", rec.wrap(problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"0"}}, nil)))
			start := time.Now()
			_, err := c.Me(context.Background())
			var re *RetryError
			if !errors.As(err, &re) || re.Attempts != 1+DefaultMaxRetries || !errors.Is(err, ErrRateLimited) {
				t.Fatalf("err = %v", err)
			}
			if rec.count() != 1+DefaultMaxRetries {
				t.Errorf("%d requests", rec.count())
			}
			// Never sooner than asked (0), never later than the jitter.
			if el := time.Since(start); el > DefaultMaxRetries*jitterBound(0) {
				t.Errorf("took %v for two retries after Retry-After 0", el)
			}
		})
	})
	t.Run("Retry-After in the past", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, mt := mockClient(t)
			var rec recorder
			past := time.Now().Add(-24 * time.Hour).UTC().Format(http.TimeFormat)
			mt.RegisterResponder("GET", "=~/v1/me", rec.wrap(firstThen(
				problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {past}}, nil),
				jsonResponder(200, map[string]any{"keyId": "key_1"}))))
			if _, err := c.Me(context.Background()); err != nil {
				t.Fatal(err)
			}
			if gap := rec.times[1].Sub(rec.times[0]); gap > jitterBound(0) {
				t.Errorf("retried after %v; a date in the past means at once, plus at most %v", gap, jitterBound(0))
			}
		})
	})
	for _, form := range []string{"delay-seconds", "HTTP-date"} {
		t.Run("Retry-After of a year, "+form, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, mt := mockClient(t)
				var rec recorder
				mt.RegisterResponder("GET", "=~/v1/me", rec.wrap(func(r *http.Request) (*http.Response, error) {
					v := "31536000"
					if form == "HTTP-date" {
						v = time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat)
					}
					return problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {v}}, nil)(r)
				}))
				start := time.Now()
				_, err := c.Me(context.Background())
				var e *Error
				if !errors.As(err, &e) || !errors.Is(err, ErrRateLimited) || e.RetryAfter <= DefaultMaxRetryWait {
					t.Fatalf("err = %v", err)
				}
				if rec.count() != 1 || time.Since(start) != 0 {
					t.Errorf("%d requests over %v: want one, failing at once", rec.count(), time.Since(start))
				}
				if !strings.Contains(err.Error(), "retry after") {
					t.Errorf("Error() = %q does not say how long", err)
				}
				// Every hint is capped at maxHint (24 h), so that no
				// arithmetic on it overflows: the error says 24h, not a year.
				t.Logf("a year asked, RetryAfter = %v", e.RetryAfter)
			})
		})
	}
}

// TestFaultRetryAfterLongerThanTheKeyIsHeld: a wait longer than the budget
// holds the key for (an hour; a lockout's 5 minutes) fails the call at
// once whatever MaxRetryWait allows, since a retry after the hold would go
// before the server's wait.
func TestFaultRetryAfterLongerThanTheKeyIsHeld(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter string
		policy     string
		wait       time.Duration
	}{
		{"two hours", "7200", "key", 2 * time.Hour},
		{"a lockout of ten minutes", "600", "lockout", 10 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, mt := mockClient(t, WithMaxRetryWait(3*time.Hour))
				var rec recorder
				mt.RegisterResponder("GET", "=~/v1/me", rec.wrap(problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {tc.retryAfter}}, map[string]any{"policy": tc.policy})))
				start := time.Now()
				_, err := c.Me(context.Background())
				var e *Error
				if !errors.As(err, &e) || e.RetryAfter != tc.wait {
					t.Fatalf("err = %v", err)
				}
				if rec.count() != 1 || time.Since(start) != 0 {
					t.Errorf("%d requests over %v: want one, failing at once", rec.count(), time.Since(start))
				}
			})
		})
	}
}

// TestFaultRetryAfterMsAnyNumber: retryAfterMs is honoured in every JSON
// spelling of a number, and one too large for any wait fails the call at
// once (24 h, past every sane MaxRetryWait) rather than counting as no
// hint, which would retry within a second.
func TestFaultRetryAfterMsAnyNumber(t *testing.T) {
	for raw, want := range map[string]time.Duration{
		"3e3": 3 * time.Second, "3000.0": 3 * time.Second, "2999.5": 2999500 * time.Microsecond,
		"1e15": maxHint, "99999999999999999999": maxHint,
	} {
		t.Run(raw, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, mt := mockClient(t)
				var rec recorder
				mt.RegisterResponder("GET", "=~/v1/me", rec.wrap(firstThen(
					problemResponder(429, CodeRateLimited, nil, map[string]any{"policy": "key", "retryAfterMs": json.Number(raw)}),
					jsonResponder(200, map[string]any{"keyId": "key_1"}))))
				_, err := c.Me(context.Background())
				if want > DefaultMaxRetryWait {
					var e *Error
					if !errors.As(err, &e) || e.RetryAfter != want || rec.count() != 1 {
						t.Fatalf("%d requests, err = %v; want one, failing with RetryAfter %v", rec.count(), err, want)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if gap := rec.times[1].Sub(rec.times[0]); gap < want || gap > want+jitterBound(want) {
					t.Errorf("retried after %v, want %v plus at most %v", gap, want, jitterBound(want))
				}
			})
		})
	}
}

// TestCallersThatGiveUpNeverLockTheKey: 64 goroutines whose calls give up
// after 100 ms, on a server that answers in 200 ms and refuses most of
// them (a principal level of 60 points a minute). The client reads none of
// those answers, so each attempt that left counts as a possible refusal,
// and the key is never locked out.
func TestCallersThatGiveUpNeverLockTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := sandbox.New(sandbox.WithLimits(sandbox.Limits{PrincipalQuota: 60}), sandbox.WithLatency(200*time.Millisecond))
		c := sandboxClient(t, srv, WithMaxRetries(0))
		var wg sync.WaitGroup
		stop := time.Now().Add(2 * time.Minute)
		for range 64 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
					_, _ = c.Contacts.Get(ctx, hostileContactID)
					cancel()
					time.Sleep(50 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		time.Sleep(time.Second) // the handlers finish
		if st := srv.Stats(sandbox.TestKey); st.Lockouts > 0 {
			t.Errorf("the key was locked out %d times (%d requests, refusals %v)", st.Lockouts, st.Requests, st.Refusals)
		}
	})
}

// TestFaultRetryAfterZeroStormNeverLocksTheKey: a server that answers 429
// Retry-After 0 to everything, 48 goroutines on two clients of one key for
// 5 virtual minutes: no 60 s window ever holds more than 25 refusals, and
// every call ends with its context. With the budget and without it (then
// only the lockout guard holds the calls back).
func TestFaultRetryAfterZeroStormNeverLocksTheKey(t *testing.T) {
	checkNoLeaks(t)
	for _, budgeted := range []bool{false, true} {
		t.Run(fmt.Sprintf("budget %v", budgeted), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mt := httpmock.NewMockTransport()
				var mu sync.Mutex
				var refusals []time.Time
				storm := problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"0"}}, map[string]any{"retryAfterMs": 0, "policy": "key"})
				mt.RegisterNoResponder(func(r *http.Request) (*http.Response, error) {
					mu.Lock()
					refusals = append(refusals, time.Now())
					mu.Unlock()
					return storm(r)
				})
				base := uniqueBaseURL()
				opts := []Option{WithAPIKey(testKey), WithBaseURL(base), WithHTTPClient(&http.Client{Transport: mt}), WithLogger(quiet), WithMaxRetries(10)}
				if !budgeted {
					opts = append(opts, WithoutBudget())
				}
				var clients [2]*Client
				for i := range clients {
					c, err := NewClient(opts...)
					if err != nil {
						t.Fatal(err)
					}
					clients[i] = c
				}
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				var wg sync.WaitGroup
				var calls, local atomic.Int64
				for g := range 48 {
					c := clients[g%2]
					wg.Go(func() {
						for ctx.Err() == nil {
							var err error
							switch g % 3 {
							case 0:
								_, err = c.Me(ctx)
							case 1:
								_, err = c.Contacts.List(ctx, &ListContactsParams{Limit: Int(5)})
							default:
								_, err = c.Contacts.Create(ctx, ContactCreate{Name: "storm"})
							}
							calls.Add(1)
							if err == nil {
								t.Error("a call succeeded against a server that only refuses")
								return
							}
							var e *Error
							if errors.As(err, &e) && e.Local {
								local.Add(1)
								_ = sleep(ctx, max(e.RetryAfter, time.Second))
							}
						}
					})
				}
				wg.Wait()
				mu.Lock()
				defer mu.Unlock()
				worst := 0
				for i := range refusals {
					j := i
					for j < len(refusals) && refusals[j].Sub(refusals[i]) < budget.RefusalWindow {
						j++
					}
					worst = max(worst, j-i)
				}
				if worst > budget.RefusalLimit {
					t.Errorf("%d refusals in one 60 s window; the server locks a key after 50", worst)
				}
				// Never locked up: without the budget the guard lets 25 a
				// minute through; with it the pace falls to its floor
				// (minPace of the key's rate) but every minute still
				// sends.
				if !budgeted && len(refusals) < 4*budget.RefusalLimit {
					t.Errorf("only %d requests in 5 minutes: the guard held the key longer than its window", len(refusals))
				}
				perMinute := make([]int, 5)
				for _, at := range refusals {
					if m := int(at.Sub(start) / time.Minute); m < len(perMinute) {
						perMinute[m]++
					}
				}
				for m, k := range perMinute {
					if k == 0 {
						t.Errorf("no request in minute %d: the key was held (per minute %v)", m+1, perMinute)
					}
				}
				if b := clients[0].Budget(); b.Refusals > budget.RefusalLimit {
					t.Errorf("Budget().Refusals = %d", b.Refusals)
				}
				t.Logf("%d requests, %d calls (%d held locally), worst 60 s window %d, per minute %v", len(refusals), calls.Load(), local.Load(), worst, perMinute)
			})
		})
	}
}

// TestFaultHTML503IsRetriedAsOverloaded: a 503 from a proxy, with an HTML
// body, counts as OVERLOADED: retried with spacing, and when retries run out
// a *RetryError wrapping the *Error, ErrOverloaded.
func TestFaultHTML503IsRetriedAsOverloaded(t *testing.T) {
	checkNoLeaks(t)
	synctest.Test(t, func(t *testing.T) {
		c, mt := mockClient(t)
		var rec recorder
		mt.RegisterResponder("GET", "=~/v1/me", rec.wrap(httpmock.NewStringResponder(503, "<html><body>Service Unavailable</body></html>").
			HeaderSet(http.Header{"Content-Type": {"text/html"}})))
		start := time.Now()
		_, err := c.Me(context.Background())
		var re *RetryError
		var e *Error
		if !errors.As(err, &re) || !errors.As(err, &e) || e.Status != 503 || !errors.Is(err, ErrOverloaded) {
			t.Fatalf("err = %v", err)
		}
		if rec.count() != 1+DefaultMaxRetries || time.Since(start) < DefaultMaxRetries*time.Second {
			t.Errorf("%d requests over %v", rec.count(), time.Since(start))
		}
	})
}

// endless is a body of n bytes ('x' after a problem's start), made as it
// is read, counting what was read.
type endless struct {
	n, read int64
	start   string
}

func (b *endless) Read(p []byte) (int, error) {
	if b.read >= b.n {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), b.n-b.read))
	for i := range k {
		if off := b.read + int64(i); off < int64(len(b.start)) {
			p[i] = b.start[off]
		} else {
			p[i] = 'x'
		}
	}
	b.read += int64(k)
	return k, nil
}

func (b *endless) Close() error { return nil }

// TestFaultHugeBodiesAreReadCapped: a 100 MB problem body on a retried 429
// is read up to 1 MiB per attempt; a 100 MB success body up to 32 MiB,
// then refused.
func TestFaultHugeBodiesAreReadCapped(t *testing.T) {
	checkNoLeaks(t)
	synctest.Test(t, func(t *testing.T) {
		c, mt := mockClient(t)
		var bodies []*endless
		mt.RegisterResponder("GET", "=~/v1/me", func(r *http.Request) (*http.Response, error) {
			b := &endless{n: 100 << 20, start: `{"code":"RATE_LIMITED","detail":"`}
			bodies = append(bodies, b)
			return &http.Response{StatusCode: 429, Header: http.Header{"Content-Type": {"application/problem+json"}, "Retry-After": {"1"}},
				Body: b, ContentLength: b.n, Request: r}, nil
		})
		_, err := c.Me(context.Background())
		var e *Error
		if !errors.As(err, &e) || e.Status != 429 || len(e.Body) != maxProblemBody {
			t.Fatalf("err = %v", err)
		}
		if len(bodies) != 1+DefaultMaxRetries {
			t.Errorf("%d attempts", len(bodies))
		}
		for i, b := range bodies {
			if b.read > maxProblemBody+64<<10 {
				t.Errorf("attempt %d: read %d bytes of a 100 MB problem body", i+1, b.read)
			}
		}

		var ok *endless
		mt.RegisterResponder("GET", "=~/v1/contacts/", func(r *http.Request) (*http.Response, error) {
			ok = &endless{n: 100 << 20, start: `{"id":"`}
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: ok, ContentLength: ok.n, Request: r}, nil
		})
		_, err = c.Contacts.Get(context.Background(), "con_1")
		if !errors.As(err, &e) || e.Status != 200 || !strings.Contains(err.Error(), "exceeds") {
			t.Fatalf("err = %v", err)
		}
		if ok.read > maxSuccessBody+1+64<<10 {
			t.Errorf("read %d bytes of a 100 MB success body", ok.read)
		}
	})
}

// ---------------------------------------------------------------------------
// The sandbox's own faults, on virtual time

// TestFaultSandboxOverloadedUntilRetriesRunOut: OVERLOADED on every
// attempt, 429 and 503: retried with spacing, then a *RetryError
// wrapping the *Error, ErrOverloaded; nothing written.
func TestFaultSandboxOverloadedUntilRetriesRunOut(t *testing.T) {
	checkNoLeaks(t)
	for _, status := range []int{429, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := sandbox.New(sandbox.WithFaults(func(*http.Request) sandbox.Fault {
					return sandbox.Fault{Overloaded: status, RetryAfter: 2 * time.Second}
				}))
				c := sandboxClient(t, srv)
				start := time.Now()
				_, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Busy"})
				var re *RetryError
				var e *Error
				if !errors.As(err, &re) || re.Attempts != 1+DefaultMaxRetries || !errors.As(err, &e) || e.Status != status || !errors.Is(err, ErrOverloaded) {
					t.Fatalf("err = %v", err)
				}
				if el := time.Since(start); el < DefaultMaxRetries*(2*time.Second+time.Second) {
					t.Errorf("gave up after %v: sooner than the hints plus spacing", el)
				}
				if st := srv.Stats(sandbox.TestKey); st.Requests != 1+DefaultMaxRetries || st.Writes != 0 || srv.ContactsNamed("Busy") != 0 {
					t.Errorf("requests %d, writes %d, contacts %d", st.Requests, st.Writes, srv.ContactsNamed("Busy"))
				}
			})
		})
	}
}

// TestFaultSandboxDropAfterCommit: every answer to a write is lost after
// the server committed it. A keyed create is retried with its key (the
// server replays, and drops again) until retries run out: one contact.
// An unkeyed create is not retried: ErrOutcomeUnknown, one contact. A
// payment (always keyed) is paid once.
func TestFaultSandboxDropAfterCommit(t *testing.T) {
	checkNoLeaks(t)
	synctest.Test(t, func(t *testing.T) {
		drop := atomic.Bool{}
		srv := sandbox.New(sandbox.WithFaults(func(r *http.Request) sandbox.Fault {
			return sandbox.Fault{DropAfterCommit: drop.Load() && r.Method == http.MethodPost}
		}))
		c := sandboxClient(t, srv)
		ctx := context.Background()

		drop.Store(true)
		_, err := c.Contacts.Create(ctx, ContactCreate{Name: "Keyed"})
		var re *RetryError
		if !errors.As(err, &re) || re.Attempts != 1+DefaultMaxRetries || !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("keyed: err = %v", err)
		}
		if n := srv.ContactsNamed("Keyed"); n != 1 {
			t.Errorf("keyed: %d contacts after %d attempts", n, re.Attempts)
		}

		_, err = c.Contacts.Create(ctx, ContactCreate{Name: "Unkeyed"}, WithoutIdempotencyKey())
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("unkeyed: err = %v", err)
		}
		if n := srv.ContactsNamed("Unkeyed"); n != 1 {
			t.Errorf("unkeyed: %d contacts", n)
		}

		drop.Store(false)
		ada, err := c.Contacts.Create(ctx, ContactCreate{Name: "Payer"})
		if err != nil {
			t.Fatal(err)
		}
		inv, err := c.Invoices.Create(ctx, InvoiceCreate{ContactID: ada.ID, Amount: 5000, Currency: "EUR", Status: Value(InvoiceStatusOpen)})
		if err != nil {
			t.Fatal(err)
		}
		drop.Store(true)
		paid, err := c.Invoices.Pay(ctx, inv.ID, WithMaxRetries(3))
		// Every POST is dropped, so the payment's retries are replays that
		// are dropped too; what counts is that it was paid exactly once.
		drop.Store(false)
		if err == nil && paid.Status != InvoiceStatusPaid {
			t.Errorf("Pay = %+v", paid)
		}
		got, gerr := c.Invoices.Get(ctx, inv.ID)
		if gerr != nil || got.Status != InvoiceStatusPaid || got.AmountRefunded != 0 {
			t.Fatalf("after the dropped payment: %+v, %v (pay err %v)", got, gerr, err)
		}
		paidEvents := 0
		for ev, err := range c.Events.All(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == EventTypeInvoicePaid {
				paidEvents++
			}
		}
		if paidEvents != 1 {
			t.Errorf("%d invoice.paid events: the payment was done %d times", paidEvents, paidEvents)
		}
		st := srv.Stats(sandbox.TestKey)
		// Keyed, Unkeyed, Payer, the invoice and the payment.
		if st.Writes != 5 {
			t.Errorf("%d writes committed, want 5", st.Writes)
		}
	})
}

// TestFaultSandboxDelay: an answer held back longer than the attempt
// timeout. A keyed create is retried with its key: the server says the key
// is in use while the first attempt still runs, then replays: one contact,
// and the call succeeds. An unkeyed create is not retried: ErrOutcomeUnknown
// (and the server does commit it). A read whose answer is later than the
// context's deadline ends at the deadline.
func TestFaultSandboxDelay(t *testing.T) {
	checkNoLeaks(t)
	synctest.Test(t, func(t *testing.T) {
		var first sync.Map // method, path and Idempotency-Key -> seen: only a first attempt is delayed
		srv := sandbox.New(sandbox.WithFaults(func(r *http.Request) sandbox.Fault {
			if _, seen := first.LoadOrStore(r.Method+" "+r.URL.Path+" "+r.Header.Get("Idempotency-Key"), true); !seen {
				return sandbox.Fault{Delay: 3 * time.Second}
			}
			return sandbox.Fault{}
		}))
		c := sandboxClient(t, srv, WithAttemptTimeout(time.Second))
		ctx := context.Background()

		ct, err := c.Contacts.Create(ctx, ContactCreate{Name: "Slow"}, WithMaxRetries(5))
		if err != nil {
			t.Fatalf("keyed: %v", err)
		}
		if ct.Name != "Slow" || srv.ContactsNamed("Slow") != 1 {
			t.Errorf("keyed: %d contacts named Slow", srv.ContactsNamed("Slow"))
		}

		start := time.Now()
		_, err = c.Contacts.Create(ctx, ContactCreate{Name: "SlowUnkeyed"}, WithoutIdempotencyKey())
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Fatalf("unkeyed: err = %v after %v", err, time.Since(start))
		}
		time.Sleep(5 * time.Second) // the server finishes what it started
		if n := srv.ContactsNamed("SlowUnkeyed"); n != 1 {
			t.Errorf("unkeyed: %d contacts", n)
		}

		dctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
		defer cancel()
		start = time.Now()
		_, err = c.Contacts.Get(dctx, ct.ID, WithAttemptTimeout(0))
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 2500*time.Millisecond {
			t.Errorf("read: err = %v after %v", err, time.Since(start))
		}
		time.Sleep(time.Second) // the server finishes the delayed read
		if st := srv.Stats(sandbox.TestKey); st.Writes != 2 {
			t.Errorf("%d writes, want 2", st.Writes)
		}
	})
}

// TestFaultSandboxChaos: 8 goroutines create 200 uniquely named contacts
// against a sandbox that drops, overloads or delays a random third of all
// requests. Whatever each call returns, no contact exists twice, every
// call that succeeded has its contact, and the server committed exactly as
// many writes as there are contacts.
func TestFaultSandboxChaos(t *testing.T) {
	checkNoLeaks(t)
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		rng := rand.New(rand.NewPCG(7, 11))
		srv := sandbox.New(sandbox.WithLatency(20*time.Millisecond), sandbox.WithFaults(func(r *http.Request) sandbox.Fault {
			mu.Lock()
			x := rng.IntN(12)
			mu.Unlock()
			switch x {
			case 0, 1:
				return sandbox.Fault{DropAfterCommit: true}
			case 2:
				return sandbox.Fault{Overloaded: 503, RetryAfter: time.Second}
			case 3:
				return sandbox.Fault{Delay: 2 * time.Second}
			}
			return sandbox.Fault{}
		}))
		c := sandboxClient(t, srv, WithAttemptTimeout(time.Second), WithMaxRetries(4))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		const n = 200
		results := make([]error, n)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					var opts []RequestOption
					if i%4 == 3 {
						opts = append(opts, WithoutIdempotencyKey())
					}
					_, results[i] = c.Contacts.Create(ctx, ContactCreate{Name: fmt.Sprintf("chaos-%03d", i)}, opts...)
				}
			})
		}
		wg.Wait()
		time.Sleep(10 * time.Second) // delayed answers finish
		total, failed := 0, 0
		for i, err := range results {
			k := srv.ContactsNamed(fmt.Sprintf("chaos-%03d", i))
			total += k
			switch {
			case k > 1:
				t.Errorf("chaos-%03d exists %d times (err %v)", i, k, err)
			case err == nil && k != 1:
				t.Errorf("chaos-%03d succeeded but exists %d times", i, k)
			case err != nil:
				failed++
				var e *Error
				var re *RetryError
				if !errors.Is(err, ErrOutcomeUnknown) && !errors.As(err, &re) && !errors.As(err, &e) {
					t.Errorf("chaos-%03d: unclear error %v", i, err)
				}
			}
		}
		if st := srv.Stats(sandbox.TestKey); st.Writes != total {
			t.Errorf("%d writes committed for %d contacts", st.Writes, total)
		}
		t.Logf("%d contacts, %d calls failed, %d requests", total, failed, srv.Stats(sandbox.TestKey).Requests)
	})
}

// ---------------------------------------------------------------------------
// Legal but unusual RateLimit headers that must not wedge the key

// headerOnce is a mock whose first answer to GET /v1/me carries the given
// header and every later one none; it counts the requests.
func headerOnce(t *testing.T, name, value string) (*Client, *atomic.Int32) {
	t.Helper()
	c, mt := mockClient(t)
	var n atomic.Int32
	mt.RegisterResponder("GET", "=~/v1/me", func(r *http.Request) (*http.Response, error) {
		resp := httpmock.NewStringResponse(200, meJSON)
		resp.Header.Set("Content-Type", "application/json")
		if n.Add(1) == 1 {
			resp.Header.Set(name, value)
		}
		resp.Request = r
		return resp, nil
	})
	return c, &n
}

// TestFaultRateLimitHeadersDoNotWedgeTheKey: one answer carries a legal
// but unusual RateLimit-Policy or RateLimit, later answers none. The client
// follows it, but it must not stop sending for good, and must not wait
// longer than its own model says.
//
// Regression (all three failed before c856d02; ratelimit.go):
//   - `"key";q=0;w=60` made the key level's size 0, so admit refused every
//     later call at once as one that "can never fit"; nothing was sent
//     again, so no later header could undo it.
//   - `"hourly";q=3` (w is optional in the draft) made a level with window
//     0 that never refilled: after 3 calls every call waited out its whole
//     deadline (without one, for ever).
//   - `"key";r=0;t=999999999999999` made the observed rate tiny, so
//     level.wait returned forever and admit never looked at the model
//     again: a call with a minute's deadline sat the full minute and
//     failed. Now what others took counts as taken by this key at that
//     moment, so it leaves the key's log within the level's window.
func TestFaultRateLimitHeadersDoNotWedgeTheKey(t *testing.T) {
	checkNoLeaks(t)
	for _, tc := range []struct{ name, header, value string }{
		{"zero quota", "RateLimit-Policy", `"key";q=0;w=60`},
		{"policy without a window", "RateLimit-Policy", `"hourly";q=3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { keepsSending(t, tc.header, tc.value, 10) })
		})
	}
	t.Run("huge t", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, _ := headerOnce(t, "RateLimit", `"key";r=0;t=999999999999999`)
			if _, err := c.Me(context.Background()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			start := time.Now()
			_, err := c.Me(ctx)
			if el := time.Since(start); err != nil || el > time.Minute+time.Second {
				t.Errorf("the next call took %v (err %v); the key's own log frees the level within its window (60 s)", el, err)
			}
		})
	})
}

// TestFaultOddAnswersDoNotWedgeTheKey: two single answers that once left
// the key refusing every call locally, for good (nothing was sent again, so
// no later answer could undo them):
//   - `"org";q=1;w=60` made the org level (a key's share: 0.5) smaller than
//     the cheapest call, which then "could never fit". Now only a level with
//     its documented quota refuses a call that can never fit; against a size
//     learned from a header a bigger call waits for a full bucket and goes,
//     so the key sends at the rate the header states (0.5 a minute here).
//   - QUOTA_EXHAUSTED for a policy the client does not know with resetsAt
//     9999-12-31 blocked every call until then. A reset is now held for at
//     most maxHint (24 h), like every other hint.
func TestFaultOddAnswersDoNotWedgeTheKey(t *testing.T) {
	checkNoLeaks(t)
	t.Run("org quota of 1", func(t *testing.T) {
		// An org share of 0.5 points a minute: at least 5 calls in 10 minutes.
		synctest.Test(t, func(t *testing.T) { keepsSending(t, "RateLimit-Policy", `"org";q=1;w=60`, 4) })
	})
	t.Run("quota exhausted until 9999", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, mt := mockClient(t)
			mt.RegisterResponder("DELETE", "=~/v1/contacts/", problemResponder(429, CodeQuotaExhausted, nil,
				map[string]any{"policy": "nope", "resetsAt": "9999-12-31T23:59:59Z"}))
			var reads atomic.Int32
			mt.RegisterResponder("GET", "=~/v1/me", func(r *http.Request) (*http.Response, error) {
				reads.Add(1)
				return jsonResponder(200, map[string]any{"keyId": "key_1"})(r)
			})
			if err := c.Contacts.Delete(context.Background(), "con_1"); !errors.Is(err, ErrQuotaExhausted) {
				t.Fatalf("err = %v", err)
			}
			time.Sleep(maxHint + time.Second)
			if _, err := c.Me(context.Background()); err != nil || reads.Load() != 1 {
				t.Errorf("%v after the quota was reported exhausted until 9999: %v", maxHint, err)
			}
		})
	})
}

// meWithin calls Me through a client of srv with a context of deadline d and
// checks that the call ended by then.
func meWithin(t *testing.T, srv *rawServer, d time.Duration, opts ...Option) error {
	t.Helper()
	c, _ := socketClient(t, srv.url, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	_, err := c.Me(ctx)
	within(t, start, d)
	return err
}

// keepsSending answers value in header once, then calls Me for 10 virtual
// minutes, waiting what each local refusal says: the key must send more
// than want requests, that is, not stop for good.
func keepsSending(t *testing.T, header, value string, want int32) {
	t.Helper()
	c, n := headerOnce(t, header, value)
	start := time.Now()
	var last error
	for time.Since(start) < 10*time.Minute {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := c.Me(ctx)
		cancel()
		var e *Error
		if errors.As(err, &e) && e.Local {
			last = err
			time.Sleep(max(e.RetryAfter, time.Second))
		} else if err != nil {
			t.Fatal(err)
		}
		if n.Load() > want {
			return
		}
	}
	t.Errorf("after %s, %d requests in 10 virtual minutes; the key is wedged: %v", value, n.Load(), last)
}

// TestNoResendPassesTheBudget: a write whose reused connection closes
// after the request was read, without an answer, is sent again only by the
// client's own retry, through the budget. net/http resends a request with
// an Idempotency-Key on such a connection by itself, unseen, when it has no
// body or can rewind it; on a key at its limit that resend was refused, and
// the budget gave back the cost of an attempt the server had charged.
func TestNoResendPassesTheBudget(t *testing.T) {
	contact, _ := json.Marshal(sampleContact)
	invoice, _ := json.Marshal(map[string]any{
		"id": "inv_1", "contactId": "con_1", "amount": 100, "currency": "EUR", "status": "paid", "amountRefunded": 0,
		"createdAt": "2026-11-30T10:00:00Z", "updatedAt": "2026-11-30T10:00:00Z",
	})
	for _, tc := range []struct {
		name   string
		answer []byte
		call   func(context.Context, *Client) error
	}{
		{"with a body", contact, func(ctx context.Context, c *Client) error {
			_, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"})
			return err
		}},
		{"without a body", invoice, func(ctx context.Context, c *Client) error {
			_, err := c.Invoices.Pay(ctx, "inv_1")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRawServer(t, func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
				switch n {
				case 1:
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(meJSON), meJSON)
					return true
				case 2:
					return false // read, then closed without an answer
				}
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(tc.answer), tc.answer)
				return true
			})
			var attempts atomic.Int32
			c, _ := socketClient(t, srv.url, WithMiddleware(func(r *http.Request, next MiddlewareNext) (*http.Response, error) {
				attempts.Add(1)
				return next(r)
			}))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := c.Me(ctx); err != nil {
				t.Fatal(err)
			}
			if err := tc.call(ctx, c); err != nil {
				t.Fatal(err)
			}
			if _, reqs := srv.counts(); int(attempts.Load()) != reqs || reqs != 3 {
				t.Errorf("the server read %d requests, the budget let %d attempts out; want 3 of each", reqs, attempts.Load())
			}
			if keys := srv.idempotencyKeys(); keys[1] == "" || keys[1] != keys[2] {
				t.Errorf("the write's attempts carried the keys %q; want one key, reused", keys[1:])
			}
		})
	}
}

// TestOnlyAKeyedWriteIsHeldBack: net/http resends a written request for
// its key only when it is no read; a DELETE without a key it resends only
// when nothing was written, and that resend goes.
func TestOnlyAKeyedWriteIsHeldBack(t *testing.T) {
	for _, tc := range []struct {
		method, key string
		want        bool
	}{
		{http.MethodPost, "Idempotency-Key", true},
		{http.MethodPatch, "X-Idempotency-Key", true},
		{http.MethodPost, "", false},
		{http.MethodDelete, "", false},
		{http.MethodGet, "Idempotency-Key", false},
	} {
		r, _ := http.NewRequest(tc.method, "http://127.0.0.1/v1/contacts", nil)
		if tc.key != "" {
			r.Header.Set(tc.key, "k")
		}
		if got := resentForItsKey(r); got != tc.want {
			t.Errorf("%s with key header %q: held back %v, want %v", tc.method, tc.key, got, tc.want)
		}
	}
}

// h2Conn is a connection that wraps TLS and says its state.
type h2Conn struct {
	net.Conn
	proto string
}

func (c h2Conn) ConnectionState() tls.ConnectionState {
	return tls.ConnectionState{NegotiatedProtocol: c.proto}
}

// TestAWrappedHTTP2ConnectionIsNotClosed: a connection that carries HTTP/2
// is shared by other calls' streams, so the last moment never closes it,
// also when it wraps the TLS connection.
func TestAWrappedHTTP2ConnectionIsNotClosed(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if multiplexed(a) || multiplexed(h2Conn{a, "http/1.1"}) || !multiplexed(h2Conn{a, "h2"}) {
		t.Errorf("multiplexed: plain %v, wrapped HTTP/1.1 %v, wrapped h2 %v; want false, false, true",
			multiplexed(a), multiplexed(h2Conn{a, "http/1.1"}), multiplexed(h2Conn{a, "h2"}))
	}
}
