package bodo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// refusingServer answers a get of refusedID 503 OVERLOADED with wait in
// its body (and retryAfter in Retry-After, unless empty), once release is
// closed, flushing the headers bodyDelay before the body; it notes when the
// headers went and when other calls arrived.
type refusingServer struct {
	mu       sync.Mutex
	headers  time.Time
	arrivals []time.Time
	arrived  chan struct{}
	// bodyAfter, when set, holds the body until it closes (or the
	// refused request's connection does); bodyDelay runs from then.
	bodyAfter <-chan struct{}
}

func newRefusingServer(t *testing.T, tls2 bool, refusedID string, release chan struct{}, retryAfter string, wait, bodyDelay time.Duration) (*refusingServer, *httptest.Server) {
	contact, _ := json.Marshal(sampleContact)
	rs := &refusingServer{arrived: make(chan struct{}, 1)}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/v1/contacts/")
		if id == refusedID {
			rs.arrived <- struct{}{}
			<-release
			w.Header().Set("Content-Type", "application/problem+json")
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			w.(http.Flusher).Flush()
			rs.mu.Lock()
			rs.headers = time.Now()
			bodyAfter := rs.bodyAfter
			rs.mu.Unlock()
			if bodyAfter != nil {
				select {
				case <-bodyAfter:
				case <-r.Context().Done():
				}
			}
			time.Sleep(bodyDelay)
			_, _ = fmt.Fprintf(w, `{"type":"https://developers.bodo-app.com/problems/OVERLOADED","title":"Überlastet","status":503,"code":"OVERLOADED","requestId":"req_01JBD8Y3K5M7Q2W9X4Z6T1V0NP","retryAfterMs":%d}`, wait.Milliseconds())
			return
		}
		if id != hostileContactID {
			rs.mu.Lock()
			rs.arrivals = append(rs.arrivals, time.Now())
			rs.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(contact)
	}))
	if tls2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return rs, srv
}

// warmClient is a client of srv that has had one answer (first), with
// opts after WithMaxRetries(0), and the context of a test's calls: 10 s.
func warmClient(t *testing.T, srv *httptest.Server, opts ...Option) (c *Client, ctx context.Context, first *http.Response) {
	t.Helper()
	c, _ = socketClient(t, srv.URL, append([]Option{WithMaxRetries(0)}, opts...)...)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	if _, err := c.Contacts.Get(ctx, hostileContactID, WithResponseInto(&first)); err != nil {
		t.Fatal(err)
	}
	return c, ctx, first
}

// hostClient is an *http.Client of at most conns connections to a host.
func hostClient(t *testing.T, conns int) *http.Client {
	tr := &http.Transport{MaxConnsPerHost: conns}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// refuse gets refusedContactID with c in a goroutine, whose outcome goes
// to the channel it returns, and lets the server answer once the get has
// arrived; it returns once the client has the refusal's headers (a
// middleware's next returns after the client marked them), at any machine
// speed.
func (rs *refusingServer) refuse(ctx context.Context, c *Client, release chan struct{}) chan error {
	done := make(chan error, 2)
	read := make(chan struct{})
	var once sync.Once
	headers := WithMiddleware(func(r *http.Request, next MiddlewareNext) (*http.Response, error) {
		resp, err := next(r)
		once.Do(func() { close(read) })
		return resp, err
	})
	go func() { _, err := c.Contacts.Get(ctx, refusedContactID, headers); done <- err }()
	<-rs.arrived
	close(release)
	<-read
	return done
}

// after is when the calls other than the refused one arrived, after its
// headers went.
func (rs *refusingServer) after(t *testing.T) []time.Duration {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var ds []time.Duration
	for _, a := range rs.arrivals {
		ds = append(ds, a.Sub(rs.headers))
	}
	return ds
}

// The contacts refusingServer refuses, and that a call asks for after it.
const (
	refusedContactID = "con_01JBD8Y3K5M7Q2W9X4Z6T1V0AA"
	laterContactID   = "con_01JBD8Y3K5M7Q2W9X4Z6T1V0BB"
)

// TestNoRequestLeavesWhileAMiddlewareReadsARefusal: a middleware that
// buffers error bodies (a logging one) reads an OVERLOADED's body, which
// asks for a wait, and the connection goes back to the pool; the call
// queued on it waits for that answer to be read, and then for its wait.
func TestNoRequestLeavesWhileAMiddlewareReadsARefusal(t *testing.T) {
	const wait = 500 * time.Millisecond
	release := make(chan struct{})
	rs, srv := newRefusingServer(t, false, refusedContactID, release, "", wait, 0)
	buffer := func(r *http.Request, next MiddlewareNext) (*http.Response, error) {
		resp, err := next(r)
		if err == nil && resp.StatusCode >= 400 {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(b))
			time.Sleep(10 * time.Millisecond) // logging it
		}
		return resp, err
	}
	c, ctx, _ := warmClient(t, srv, WithHTTPClient(hostClient(t, 1)), WithMiddleware(buffer))
	done := make(chan error, 2)
	go func() { _, err := c.Contacts.Get(ctx, refusedContactID); done <- err }()
	<-rs.arrived
	go func() { _, err := c.Contacts.Get(ctx, laterContactID); done <- err }()
	time.Sleep(50 * time.Millisecond)
	close(release)
	<-done
	<-done
	for _, d := range rs.after(t) {
		if d < wait-20*time.Millisecond {
			t.Errorf("a call admitted before the OVERLOADED was read arrived %v after it, inside its %v wait", d, wait)
		}
	}
}
