package bodo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// pipeClient is a client whose transport is the default client's over
// in-memory connections, its answer wait as NewClient sets it for the
// default client: a request whose path holds "stalled" is answered with
// head and then nothing until release is closed; any other with a contact.
func pipeClient(t *testing.T, head string, release chan struct{}, opts ...Option) *Client {
	t.Helper()
	contact, _ := json.Marshal(sampleContact)
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
				if strings.Contains(req.URL.Path, "stalled") {
					_, _ = srv.Write([]byte(head))
					<-release
					return
				}
				_, _ = fmt.Fprintf(srv, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(contact), contact)
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
	c.state.SetIdentity("prn_"+c.host, "org_"+c.host)
	return c
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
