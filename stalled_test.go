package bodo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pipeServer is a client whose transport is the default client's over
// in-memory connections, served by serve, its answer wait as NewClient
// sets it for the default client; known says whether the key's identity
// is set up front (else a second key on the host has it asked).
func pipeServer(t *testing.T, known bool, serve func(w net.Conn, r *http.Request), opts ...Option) *Client {
	t.Helper()
	tr := defaultHTTPClient().Transport.(*http.Transport)
	tr.DialContext = func(context.Context, string, string) (net.Conn, error) {
		cli, srv := net.Pipe()
		go func() {
			defer srv.Close()
			br := bufio.NewReader(srv)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				serve(srv, req)
			}
		}()
		return cli, nil
	}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := NewClient(append([]Option{WithAPIKey(testKey), WithBaseURL(fmt.Sprintf("http://127.0.0.1:%d", hostSeq.Add(1))),
		WithHTTPClient(&http.Client{Transport: tr}), WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	c.answerWait = DefaultResponseHeaderTimeout
	if known {
		c.state.SetIdentity("prn_"+c.host, "org_"+c.host)
	}
	return c
}

// pipeClient is a pipeServer that answers a request whose path holds
// "stalled" with head and then nothing until release is closed, any other
// with a contact.
func pipeClient(t *testing.T, head string, release chan struct{}, opts ...Option) *Client {
	t.Helper()
	contact, _ := json.Marshal(sampleContact)
	return pipeServer(t, true, func(w net.Conn, r *http.Request) {
		if strings.Contains(r.URL.Path, "stalled") {
			_, _ = io.WriteString(w, head)
			<-release
			_ = w.Close()
			return
		}
		_, _ = fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(contact), contact)
	}, opts...)
}

// TestAStalledBodyEndsItsAttempt (no unbounded wait): a server that sends
// an answer's headers and then nothing of its body for good. The default
// client ends such an attempt once no byte came for its answer wait
// (DefaultResponseHeaderTimeout), as a body cut off, retried when safe.
// Six of them at once, which hold every slot of the key in flight, hold
// no other call for longer: each ends within minutes, and a seventh call
// goes.
func TestAStalledBodyEndsItsAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		c := pipeClient(t, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", release)
		for range 10 { // past slow start
			if _, err := c.Contacts.Get(t.Context(), hostileContactID); err != nil {
				t.Fatal(err)
			}
		}
		stalled := make(chan error, 6)
		for i := range 6 {
			go func() {
				_, err := c.Contacts.Get(context.Background(), fmt.Sprint("con_stalled", i))
				stalled <- err
			}()
		}
		synctest.Wait()
		start := time.Now()
		if _, err := c.Contacts.Get(context.Background(), hostileContactID); err != nil {
			t.Errorf("a seventh call: %v", err)
		}
		if d := time.Since(start); d > 5*time.Minute {
			t.Errorf("a seventh call went after %v", d)
		}
		for range 6 {
			select {
			case err := <-stalled:
				var e *Error
				if !errors.As(err, &e) || !strings.Contains(err.Error(), "no byte") {
					t.Errorf("a stalled body: %v", err)
				}
			case <-time.After(10 * time.Minute):
				t.Fatal("a stalled body held its call 10 minutes")
			}
		}
	})
}

// TestAProxysRefusalBeingReadHoldsNoOtherCall: a 503 that is not the
// API's own (text/html, a proxy's), with a Retry-After and a body that
// stalls. Its wait binds only the call that got it, so while its body is
// read, a request of another call is not held back at its last moment as
// for a refusal of the API whose body may ask for a wait: it goes at once.
func TestAProxysRefusalBeingReadHoldsNoOtherCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		c := pipeClient(t, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/html\r\nRetry-After: 20\r\nContent-Length: 1000\r\n\r\n<html>", release,
			WithMaxRetries(0))
		if _, err := c.Contacts.Get(t.Context(), hostileContactID); err != nil {
			t.Fatal(err)
		}
		stalled := make(chan error, 1)
		go func() {
			_, err := c.Contacts.Get(context.Background(), "con_stalled")
			stalled <- err
		}()
		synctest.Wait()
		time.Sleep(time.Second)
		start := time.Now()
		if _, err := c.Contacts.Get(context.Background(), hostileContactID); err != nil {
			t.Errorf("another call while a proxy's 503 is read: %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("another call while a proxy's 503 is read went after %v, want at once", d)
		}
		<-stalled
	})
}

// TestASteadyChunkedBodyIsNotCut: a body sent as one chunk of 3 MiB, 16
// KiB a second (as a Go server sends one big Write over a slow link), is
// read to its end: net/http's reader of a chunked body returns a read only
// once it is full, and a read of most of a megabyte would wait longer than
// the answer wait with bytes arriving all along.
func TestASteadyChunkedBodyIsNotCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size = 3 << 20
		body := `{"data":[],"nextCursor":null}` + strings.Repeat(" ", size-29)
		c := pipeServer(t, true, func(w net.Conn, _ *http.Request) {
			_, _ = fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n", size)
			for i := 0; i < size; i += 16 << 10 {
				if _, err := io.WriteString(w, body[i:min(i+16<<10, size)]); err != nil {
					return
				}
				time.Sleep(time.Second)
			}
			_, _ = io.WriteString(w, "\r\n0\r\n\r\n")
		}, WithMaxRetries(0))
		start := time.Now()
		if _, err := c.Contacts.List(context.Background(), nil); err != nil {
			t.Errorf("a body of 16 KiB a second, cut after %v: %v", time.Since(start), err)
		}
	})
}

// TestAStalledBodyReadByMiddlewareEnds: the bound on a stalled body holds
// from the middleware's first sight of the answer: a middleware that reads
// the body (to log or check it) does not wait for it for good.
func TestAStalledBodyReadByMiddlewareEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		c := pipeClient(t, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", release,
			WithMaxRetries(0), WithMiddleware(func(req *http.Request, next MiddlewareNext) (*http.Response, error) {
				resp, err := next(req)
				if err != nil {
					return nil, err
				}
				b, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				resp.Body = io.NopCloser(strings.NewReader(string(b)))
				return resp, err
			}))
		done := make(chan error, 1)
		go func() {
			_, err := c.Contacts.Get(context.Background(), "con_stalled")
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Error("a stalled body read by a middleware: no error")
			}
		case <-time.After(10 * time.Minute):
			t.Fatal("a stalled body read by a middleware held its call 10 minutes")
		}
	})
}

// TestOnWaitDoesNotHearTheClientsOwnRequest: the identity request the
// client sends on its own, held back at its last moment by a wait longer
// than MaxRetryWait that a refusal announced meanwhile, is no caller's
// call: OnWait does not hear of it.
func TestOnWaitDoesNotHearTheClientsOwnRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var heard []string
		gate, inMe := make(chan struct{}), make(chan struct{}, 1)
		answer := func(w io.Writer, status, ctype, body string) {
			_, _ = fmt.Fprintf(w, "HTTP/1.1 %s\r\nContent-Type: %s\r\nRetry-After: 120\r\nContent-Length: %d\r\n\r\n%s", status, ctype, len(body), body)
		}
		c := pipeServer(t, false, func(w net.Conn, r *http.Request) {
			switch {
			case r.URL.Path == "/v1/me":
				answer(w, "200 OK", "application/json", `{"keyId":"key_1","principal":{"id":"prn_1","type":"user","name":"A"},"organization":{"id":"org_1","name":"O"}}`)
			case strings.HasSuffix(r.URL.Path, "refused"):
				answer(w, "429 Too Many Requests", "application/problem+json", `{"status":429,"code":"RATE_LIMITED","retryAfterMs":120000,"policy":"key"}`)
			default:
				contact, _ := json.Marshal(sampleContact)
				answer(w, "200 OK", "application/json", string(contact))
			}
		}, WithOnWait(func(e WaitEvent) {
			mu.Lock()
			heard = append(heard, e.Operation)
			mu.Unlock()
		}), WithMiddleware(func(req *http.Request, next MiddlewareNext) (*http.Response, error) {
			if a, _ := AttemptFrom(req.Context()); a.Operation == "getMe" {
				inMe <- struct{}{}
				<-gate // admitted, not yet written
			}
			return next(req)
		}))
		for range 10 { // past slow start
			if _, err := c.Contacts.Get(context.Background(), hostileContactID); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := NewClient(WithAPIKey("bodo_test_anotheranotheranother"), WithBaseURL(c.server)); err != nil {
			t.Fatal(err) // a second key on the host
		}
		if _, err := c.Contacts.Get(context.Background(), hostileContactID); err != nil {
			t.Fatal(err)
		}
		<-inMe
		var e *Error // 120 s > MaxRetryWait (60 s)
		if _, err := c.Contacts.Get(context.Background(), "con_refused", WithMaxRetries(0)); !errors.As(err, &e) || e.Status != http.StatusTooManyRequests {
			t.Fatalf("the refused call: %v", err)
		}
		close(gate)
		time.Sleep(time.Second)
		mu.Lock()
		defer mu.Unlock()
		if slices.Contains(heard, "getMe") {
			t.Errorf("OnWait heard of the client's own request: %v", heard)
		}
	})
}
