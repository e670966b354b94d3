package bodo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lastMoment is a loopback server of contacts for the tests of the last
// moment: a get of an id in its refusals arrives (arrived), waits for the
// refusal's release and answers 503 OVERLOADED with the refusal's wait in
// the body only (retryAfterMs); it records when the last refusal was
// written and when every other get of an id arrived.
type lastMoment struct {
	client   *Client
	ctx      context.Context // of every get: 10 s
	done     chan error      // each get's outcome (get)
	mu       sync.Mutex
	refused  time.Time
	arrivals []time.Time
	paths    []string // of the arrivals, for the failure message
	arrived  chan struct{}
}

// overloadAfter is a refusal of lastMoment: its wait, asked once release
// closes.
type overloadAfter struct {
	wait    time.Duration
	release chan struct{}
}

// newLastMoment starts the server and a client of it with conns
// connections to the host, whose slow start a first answer has ended.
func newLastMoment(t *testing.T, conns int, refusals map[string]overloadAfter) *lastMoment {
	t.Helper()
	contact, _ := json.Marshal(sampleContact)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	lm := &lastMoment{ctx: ctx, done: make(chan error, 4), arrived: make(chan struct{}, len(refusals))}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/v1/contacts/")
		if o, ok := refusals[id]; ok {
			lm.arrived <- struct{}{}
			<-o.release
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, `{"type":"https://developers.bodo-app.com/problems/OVERLOADED","title":"Überlastet","status":503,"code":"OVERLOADED","requestId":"req_01JBD8Y3K5M7Q2W9X4Z6T1V0NP","retryAfterMs":%d}`, o.wait.Milliseconds())
			lm.mu.Lock()
			lm.refused = time.Now()
			lm.mu.Unlock()
			return
		}
		if id != hostileContactID {
			lm.mu.Lock()
			lm.arrivals = append(lm.arrivals, time.Now())
			lm.paths = append(lm.paths, r.Method+" "+r.URL.Path)
			lm.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(contact)
	}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{MaxConnsPerHost: conns}
	t.Cleanup(tr.CloseIdleConnections)
	c, _ := socketClient(t, srv.URL, WithMaxRetries(0), WithHTTPClient(&http.Client{Transport: tr}))
	if _, err := c.Contacts.Get(ctx, hostileContactID); err != nil {
		t.Fatal(err)
	}
	lm.client = c
	return lm
}

// get gets the contact id in a goroutine of its own; its outcome goes to
// done.
func (lm *lastMoment) get(id string) {
	go func() {
		_, err := lm.client.Contacts.Get(lm.ctx, id)
		lm.done <- err
	}()
}

// arrivedAfter is how long after the last refusal the one get that
// arrived after it came.
func (lm *lastMoment) arrivedAfter(t *testing.T) time.Duration {
	t.Helper()
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if len(lm.arrivals) != 1 {
		var got []string
		for i, at := range lm.arrivals {
			got = append(got, fmt.Sprintf("%s at %v", lm.paths[i], at.Sub(lm.refused)))
		}
		t.Fatalf("%d requests after the refusal (%s), want 1", len(lm.arrivals), strings.Join(got, ", "))
	}
	return lm.arrivals[0].Sub(lm.refused)
}

// TestNoRequestLeavesAfterAnAnswerThatAsksToWait, over real loopback HTTP
// with one connection to the host: a call admitted while another's
// OVERLOADED was on its way, its wait only in the body (retryAfterMs),
// waits for the connection that answer came on, and is written after the
// wait is over, not the moment the body has been read.
func TestNoRequestLeavesAfterAnAnswerThatAsksToWait(t *testing.T) {
	const (
		wait      = 300 * time.Millisecond
		refusedID = "con_01JBD8Y3K5M7Q2W9X4Z6T1V0AA"
		afterID   = "con_01JBD8Y3K5M7Q2W9X4Z6T1V0BB"
	)
	release := make(chan struct{})
	lm := newLastMoment(t, 1, map[string]overloadAfter{refusedID: {wait, release}})
	lm.get(refusedID)
	<-lm.arrived
	lm.get(afterID)
	time.Sleep(50 * time.Millisecond) // admitted, and queued for the one connection
	close(release)
	<-lm.done
	if err := <-lm.done; err != nil {
		t.Fatalf("the call after the refusal: %v", err)
	}
	if d := lm.arrivedAfter(t); d < wait-20*time.Millisecond {
		t.Errorf("the call admitted before the refusal was read arrived %v after it, want the %v it asked", d, wait)
	}
}

// TestAWaitSatOutIsLookedAtAgain (rule 5), over real loopback HTTP with two
// connections to the host: a call admitted while two OVERLOADED answers
// were on their way gets the connection of the first (200 ms) and sits out
// its wait; the second (400 ms) is read meanwhile, and the call is written
// after that one is over too.
func TestAWaitSatOutIsLookedAtAgain(t *testing.T) {
	const (
		firstID  = "con_01JBD8Y3K5M7Q2W9X4Z6T1V0AA"
		secondID = "con_01JBD8Y3K5M7Q2W9X4Z6T1V0CC"
		afterID  = "con_01JBD8Y3K5M7Q2W9X4Z6T1V0BB"
		second   = 400 * time.Millisecond
	)
	releaseFirst, releaseSecond := make(chan struct{}), make(chan struct{})
	lm := newLastMoment(t, 2, map[string]overloadAfter{
		firstID:  {200 * time.Millisecond, releaseFirst},
		secondID: {second, releaseSecond},
	})
	for _, id := range []string{firstID, secondID} {
		lm.get(id)
		<-lm.arrived
	}
	lm.get(afterID)
	time.Sleep(50 * time.Millisecond) // admitted, and queued for a connection
	close(releaseFirst)
	time.Sleep(50 * time.Millisecond) // it sits out the first wait on the first's connection
	close(releaseSecond)
	for range 3 {
		<-lm.done
	}
	if d := lm.arrivedAfter(t); d < second-20*time.Millisecond {
		t.Errorf("the call admitted before the refusals were read arrived %v after the second, want the %v it asked", d, second)
	}
}

// TestARefusalsHeadersBindWhileItsSlowBodyIsRead (rule 5), over real
// loopback HTTP: an OVERLOADED whose headers ask for 2 s (Retry-After) and
// whose body comes after more than the second a request at its last moment
// waits for it; a call that reaches that moment meanwhile is written when
// the headers' wait is over. The body leaves 1.3 s after the call reached
// its last moment (a trace's GotConn, whose hooks run before the client's),
// not after the headers: a call slow to get there (a dial on a loaded
// machine) would otherwise read the body within its second and sit out the
// body's 100 ms instead.
func TestARefusalsHeadersBindWhileItsSlowBodyIsRead(t *testing.T) {
	const wait = 2 * time.Second // Retry-After: 2; the body asks for 100ms
	release := make(chan struct{})
	rs, srv := newRefusingServer(t, false, refusedContactID, release, "2", 100*time.Millisecond, 1300*time.Millisecond)
	lastMoment := make(chan struct{})
	rs.mu.Lock()
	rs.bodyAfter = lastMoment
	rs.mu.Unlock()
	var once sync.Once
	atLastMoment := WithMiddleware(func(r *http.Request, next MiddlewareNext) (*http.Response, error) {
		trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { once.Do(func() { close(lastMoment) }) }}
		return next(r.WithContext(httptrace.WithClientTrace(r.Context(), trace)))
	})
	c, ctx, _ := warmClient(t, srv, WithHTTPClient(hostClient(t, 2)))
	done := rs.refuse(ctx, c, release)
	go func() { _, err := c.Contacts.Get(ctx, laterContactID, atLastMoment); done <- err }()
	<-done
	<-done
	for _, d := range rs.after(t) {
		if d < wait-50*time.Millisecond {
			t.Errorf("a call that reached its last moment while the OVERLOADED's body was read arrived %v after its headers, inside the %v they asked", d, wait)
		}
	}
}

// TestAnHTTP2RequestIsHeldBackInsideALongWait (rule 5), over real loopback
// HTTP/2: a call that reaches its last moment while an OVERLOADED's body is
// read learns of a wait longer than it sits out (MaxRetryWait); its
// request is not written on the connection the other calls share
// (a middleware is told ErrHeldBack), and the call is admitted anew, where
// it meets the wait.
func TestAnHTTP2RequestIsHeldBackInsideALongWait(t *testing.T) {
	const (
		wait      = 600 * time.Millisecond
		bodyDelay = 200 * time.Millisecond
	)
	release := make(chan struct{})
	rs, srv := newRefusingServer(t, true, refusedContactID, release, "", wait, bodyDelay)
	var heldBack atomic.Int32
	told := func(r *http.Request, next MiddlewareNext) (*http.Response, error) {
		resp, err := next(r)
		if errors.Is(err, ErrHeldBack) {
			heldBack.Add(1)
		}
		return resp, err
	}
	c, ctx, first := warmClient(t, srv, WithHTTPClient(srv.Client()), WithMaxRetryWait(100*time.Millisecond), WithMiddleware(told))
	if first.ProtoMajor != 2 {
		t.Fatalf("the calls go over %s, want HTTP/2", first.Proto)
	}
	done := rs.refuse(ctx, c, release)
	_, err := c.Contacts.Get(ctx, laterContactID)
	<-done
	var e *Error
	if !errors.As(err, &e) || !e.Local || e.RetryAfter <= 0 {
		t.Errorf("the call held back: %v, want a local error with its RetryAfter", err)
	}
	if n := heldBack.Load(); n != 1 {
		t.Errorf("the middleware was told of %d attempts held back, want 1", n)
	}
	for _, d := range rs.after(t) {
		if d < bodyDelay+wait-20*time.Millisecond {
			t.Errorf("a call that reached its last moment while the OVERLOADED's body was read arrived %v after its headers, inside the %v its body asked", d, wait)
		}
	}
}

// TestACallThatEndsInsideAWaitIsNotWritten (rule 5), over real loopback
// HTTP/1: a call whose context ends while it sits out, at its last moment,
// a wait an OVERLOADED asked for is not written once it ends.
func TestACallThatEndsInsideAWaitIsNotWritten(t *testing.T) {
	release := make(chan struct{})
	rs, srv := newRefusingServer(t, false, refusedContactID, release, "", 500*time.Millisecond, 200*time.Millisecond)
	c, ctx, _ := warmClient(t, srv, WithHTTPClient(hostClient(t, 2)))
	done := rs.refuse(ctx, c, release)
	short, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	defer cancel()
	if _, err := c.Contacts.Get(short, laterContactID); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call that ended inside the wait: %v, want context.DeadlineExceeded", err)
	}
	<-done
	time.Sleep(100 * time.Millisecond) // what was written has arrived
	if after := rs.after(t); len(after) > 0 {
		t.Errorf("a call that ended inside the wait was written, arriving %v after the OVERLOADED's headers", after)
	}
}

// TestAnHTTPSReadsResendSitsOutAWait (rule 5), over real loopback
// HTTPS with HTTP/1.1 (no h2 offered): a get admitted and written on a
// reused connection before an OVERLOADED (500 ms, in its body) was read has
// its connection closed by the server without an answer; net/http resends
// the get by itself. That resend is a request written after an answer that
// asked to wait: it must sit out the wait at its last moment, as it does
// over plain http.
func TestAnHTTPSReadsResendSitsOutAWait(t *testing.T) {
	const wait = 500 * time.Millisecond
	contact, _ := json.Marshal(sampleContact)
	var (
		mu       sync.Mutex
		refused  time.Time
		arrivals []time.Time
		bSeen    int
	)
	releaseA, closeB := make(chan struct{}), make(chan struct{})
	arrivedA, arrivedB := make(chan struct{}, 1), make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/v1/contacts/")
		switch id {
		case refusedContactID:
			arrivedA <- struct{}{}
			<-releaseA
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, `{"type":"https://developers.bodo-app.com/problems/OVERLOADED","title":"Überlastet","status":503,"code":"OVERLOADED","requestId":"req_01JBD8Y3K5M7Q2W9X4Z6T1V0NP","retryAfterMs":%d}`, wait.Milliseconds())
			mu.Lock()
			refused = time.Now()
			mu.Unlock()
			return
		case laterContactID:
			mu.Lock()
			bSeen++
			first := bSeen == 1
			if !first {
				arrivals = append(arrivals, time.Now())
			}
			mu.Unlock()
			if first {
				arrivedB <- struct{}{}
				<-closeB
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close() // no answer: net/http resends the get
				}
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(contact)
	}))
	srv.StartTLS() // HTTP/1.1 only: EnableHTTP2 is not set
	t.Cleanup(srv.Close)
	tr := srv.Client().Transport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	c, _ := socketClient(t, srv.URL, WithMaxRetries(0), WithHTTPClient(&http.Client{Transport: tr}))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var first *http.Response
	if _, err := c.Contacts.Get(ctx, hostileContactID, WithResponseInto(&first)); err != nil {
		t.Fatal(err)
	}
	if first.ProtoMajor != 1 || first.TLS == nil {
		t.Fatalf("warm answer over %s (TLS %v), want HTTP/1.1 over TLS", first.Proto, first.TLS != nil)
	}
	done := make(chan error, 2)
	go func() { _, err := c.Contacts.Get(ctx, laterContactID); done <- err }() // takes the warm, reused connection
	<-arrivedB
	go func() { _, err := c.Contacts.Get(ctx, refusedContactID); done <- err }()
	<-arrivedA
	close(releaseA)
	time.Sleep(50 * time.Millisecond) // the OVERLOADED is read: a 500 ms wait announced
	close(closeB)
	<-done
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 1 {
		t.Fatalf("%d resends of the get arrived, want 1", len(arrivals))
	}
	if d := arrivals[0].Sub(refused); d < wait-20*time.Millisecond {
		t.Errorf("net/http's resend of a get admitted before the OVERLOADED was read arrived %v after it, inside the %v wait it asked", d, wait)
	}
}

// TestAHeldBackCallMeetsItsWaitLocally: over real loopback HTTP/2, an
// OVERLOADED whose headers ask for 10 s (Retry-After) and whose body takes
// 1.5 s to come holds every call of the key that reaches its last moment
// meanwhile. A call that does not sit out that long (MaxRetryWait 100 ms)
// is held back and fails at once with the local wait's error (RetryAfter),
// as one that meets the wait at admission does; its caller's context never
// ended, so the error does not say context.Canceled.
func TestAHeldBackCallMeetsItsWaitLocally(t *testing.T) {
	release := make(chan struct{})
	rs, srv := newRefusingServer(t, true, refusedContactID, release, "10", 100*time.Millisecond, 1500*time.Millisecond)
	c, ctx, first := warmClient(t, srv, WithHTTPClient(srv.Client()), WithMaxRetryWait(100*time.Millisecond))
	if first.ProtoMajor != 2 {
		t.Fatalf("the calls go over %s, want HTTP/2", first.Proto)
	}
	done := rs.refuse(ctx, c, release)
	start := time.Now()
	_, err := c.Contacts.Get(ctx, laterContactID)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the call held back ended after %v, want it at once after its last moment's second", took.Round(time.Millisecond))
	}
	if ctx.Err() == nil && errors.Is(err, context.Canceled) {
		t.Errorf("a call whose context is live ended with an error that errors.Is context.Canceled: %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || !e.Local || e.RetryAfter <= 0 {
		t.Errorf("the call held back: %v, want a local error with its RetryAfter", err)
	}
	<-done
}
