// Package bodotest provides a bodo API server for tests: the counterpart of
// net/http/httptest for this API. A test of your own code makes a Server and
// a client of it inside testing/synctest, where every wait the API's limits
// impose passes in virtual time:
//
//	func TestInvoiceAndPay(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			srv := bodotest.NewServer()
//			defer srv.Close()
//			client, err := bodo.NewClient(bodo.WithBaseURL(srv.URL),
//				bodo.WithHTTPClient(srv.Client()), bodo.WithAPIKey(bodotest.APIKey))
//			if err != nil {
//				t.Fatal(err)
//			}
//			inv, err := invoiceAndPay(t.Context(), client, "Ada", 1200) // your code
//			if err != nil || inv.Status != bodo.InvoiceStatusPaid {
//				t.Fatalf("invoiceAndPay: %+v, %v", inv, err)
//			}
//		})
//	}
//
// By default the Server enforces the documented limits in real time, as the
// production API does: a key writes 60 times a minute, so outside synctest
// an import of 300 contacts takes minutes (and the client logs at INFO that
// its calls wait for the budget), while inside synctest.Test it takes no
// time at all. WithoutLimits turns the limits off, for a test that checks
// what the code does, not how it paces itself; WithLimitFactor scales them.
//
// A Server is an in-memory implementation of the whole API (every
// operation, its cost, the rate-limit levels and headers, problems,
// idempotency, ETags, lockouts and quotas) with one organisation, the keys
// APIKey, SecondKey and ForeignKey, and no data. WithProfile plays a server
// that differs from the documented one where the API leaves room, and
// WithFaults injects every refusal the API has (RATE_LIMITED by a policy,
// a lockout, QUOTA_EXHAUSTED, OVERLOADED), lost answers and delays.
//
// It serves in-process: a client made with the Server's URL and Client
// needs no sockets, which is what lets it run inside a synctest bubble.
// Start serves it over HTTP on loopback instead, for code that takes a URL.
//
// Problems are German, as the API's are, unless the request's
// Accept-Language prefers English: a client made with
// bodo.WithHeader("Accept-Language", "en") gets English titles, details and
// field messages, with Content-Language: en.
package bodotest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// The API keys every Server knows. They belong to the one organisation of
// the server and see the same data.
const (
	// APIKey is the key of a user; use it unless a test needs more keys.
	APIKey = "bodo_test_sandbox0000000000000000"
	// SecondKey is another key of the same user: it has key, write,
	// parallel and delete levels of its own but shares the user's
	// principal level with APIKey.
	SecondKey = "bodo_test_sandbox1111111111111111"
	// ForeignKey is the key of a service account of the same organisation;
	// the Foreign90 profile spends the organisation's points in its name.
	ForeignKey = "bodo_test_sandbox2222222222222222"
)

// Server is a bodo API server for tests. Make one with NewServer; it is
// safe for concurrent use.
type Server struct {
	// URL is the base URL to give bodo.WithBaseURL: an https URL of a host
	// of its own, which only the Client of this Server reaches (the name
	// resolves nowhere), or after Start the http://127.0.0.1 address the
	// server listens on.
	URL string

	api       http.Handler // the sandbox, or nil when err is set
	err       error        // a bad option, answered to every request
	client    *http.Client
	inProcess http.RoundTripper // serves ServeHTTP without sockets

	mu      sync.Mutex
	closed  bool
	http    *http.Server    // set by Start
	network *http.Transport // Client's transport after Start
	serving sync.WaitGroup  // the requests ServeHTTP began before Close
}

// servers numbers the Servers of the process, for their hosts.
var servers atomic.Int64

// NewServer returns a Server with the options applied, serving in-process:
// no sockets and no goroutines of its own, so it works inside a
// testing/synctest bubble. A bad option does not panic: the Server then
// answers every request 500 INTERNAL with a detail that names it, and Start
// returns it as an error.
func NewServer(opts ...Option) *Server {
	var set settings
	for _, o := range opts {
		if o != nil {
			o.apply(&set)
		}
	}
	s := &Server{URL: fmt.Sprintf("https://bodotest-%d.invalid", servers.Add(1))}
	s.api, s.err = set.server()
	s.inProcess = sandbox.HandlerTransport(s)
	s.client = &http.Client{Transport: &transport{s: s}}
	return s
}

// Client returns the *http.Client to give bodo.WithHTTPClient: it serves
// requests in-process, or after Start sends them over loopback. It is the
// same client on every call; after Close its requests fail.
func (s *Server) Client() *http.Client { return s.client }

// ServeHTTP serves the bodo API, so that a Server can also be mounted on a
// server of the test's own (httptest.NewServer(srv), say). Close does not
// stop it, and waits for the requests it began before.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.err != nil {
		writeBroken(w, s.err)
		return
	}
	s.mu.Lock()
	counted := !s.closed
	if counted {
		s.serving.Add(1)
	}
	s.mu.Unlock()
	if counted {
		defer s.serving.Done()
	}
	s.api.ServeHTTP(w, r)
}

// Start serves the Server over HTTP on a free port of 127.0.0.1, for code
// that needs a real URL, and sets URL to it; Client then sends requests over
// the network. Call it once, before URL and Client are used. A Server
// listening on loopback cannot be used inside a testing/synctest bubble.
func (s *Server) Start() error {
	if s.err != nil {
		return s.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errors.New("bodotest: Start after Close")
	case s.http != nil:
		return errors.New("bodotest: Start called twice")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("bodotest: listening on loopback: %w", err)
	}
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.network = &http.Transport{}
	s.URL = "http://" + ln.Addr().String()
	go func() { _ = s.http.Serve(ln) }()
	return nil
}

// Close stops the Server: it closes the loopback listener and its
// connections when Start was called, makes the requests of Client fail
// from then on, and, as httptest.Server.Close does, blocks until the
// requests already being served have ended (their handlers have
// returned). It is safe to call more than once, and on a nil *Server.
func (s *Server) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	if s.http != nil {
		_ = s.http.Close()
		s.network.CloseIdleConnections()
	}
	s.mu.Unlock()
	s.serving.Wait()
}

// errClosed is what Client's requests return after Close.
var errClosed = errors.New("bodotest: the server is closed")

// transport is Client's transport: in-process until Start, the network
// after it.
type transport struct{ s *Server }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	s := t.s
	s.mu.Lock()
	closed, network := s.closed, s.network
	s.mu.Unlock()
	switch {
	case closed:
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errClosed
	case network != nil:
		return network.RoundTrip(req)
	}
	return s.inProcess.RoundTrip(req)
}

// writeBroken answers 500 INTERNAL naming err.
func writeBroken(w http.ResponseWriter, err error) {
	body, _ := json.Marshal(map[string]any{
		"type":   "https://developers.bodo-app.com/problems/INTERNAL",
		"title":  "bodotest",
		"status": http.StatusInternalServerError,
		"detail": err.Error(),
		"code":   "INTERNAL",
	})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = w.Write(body)
}
