package bodo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The hostile-server suite: each test plays a server, a network or a caller
// that misbehaves in one way, and shows what the client does about it.
// Every call runs under hostileCtx, so no test can hang.

const contactJSON = `{"id":"con_1","name":"Ada","tags":[],"createdAt":"2026-11-30T10:00:00Z","updatedAt":"2026-11-30T10:00:00Z"}`

// hostileCtx bounds every call of the suite.
func hostileCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// witness is a server that must never be reached: it records every request
// it gets.
type witness struct {
	mu   sync.Mutex
	seen []*http.Request
	url  string
}

// newWitness starts a witness listening on network and addr (such as "tcp4"
// and "127.0.0.1:0"), answering every request with the answer a server
// would give a successful call; it skips t when the address is not there.
func newWitness(t *testing.T, network, addr string) *witness {
	t.Helper()
	w := &witness{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.seen = append(w.seen, r)
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			rw.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(rw, contactJSON)
			return
		}
		_, _ = io.WriteString(rw, meJSON)
	}))
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("no %s listener on %s: %v", network, addr, err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

func (w *witness) requests() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

// countingServer starts a loopback server that counts its requests and
// answers them with h.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *int) {
	t.Helper()
	var mu sync.Mutex
	n := new(int)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*n++
		mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, n
}

// TestHostileRedirectIsNeverFollowed: the API answers 307 to another port
// of the same host, to another host name (localhost, [::1]), for a read and
// for a write. No request reaches the target, with or without the key; the
// call fails with the 307 (ErrRedirected) naming the Location, after one
// request; an unkeyed write is no ErrOutcomeUnknown. A caller's
// *http.Client that follows redirects is not followed either, and is not
// changed.
func TestHostileRedirectIsNeverFollowed(t *testing.T) {
	checkNoLeaks(t)
	targets := map[string][2]string{
		"another port": {"tcp4", "127.0.0.1:0"},
		"localhost":    {"tcp4", "127.0.0.1:0"},
		"[::1]":        {"tcp6", "[::1]:0"},
	}
	for name, where := range targets {
		t.Run(name, func(t *testing.T) {
			target := newWitness(t, where[0], where[1])
			if name == "localhost" {
				target.url = strings.Replace(target.url, "127.0.0.1", "localhost", 1)
			}
			api, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.url+r.URL.RequestURI(), http.StatusTemporaryRedirect)
			})
			followed := false
			follows := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { followed = true; return nil }}
			for _, opts := range [][]Option{nil, {WithHTTPClient(follows)}} {
				c, _ := socketClient(t, api.URL, opts...)
				ctx := hostileCtx(t)
				_, err := c.Me(ctx)
				checkRedirected(t, "read", err, target.url+"/v1/me")
				_, err = c.Contacts.Create(ctx, ContactCreate{Name: "Ada"})
				checkRedirected(t, "keyed write", err, target.url+"/v1/contacts")
				_, err = c.Contacts.Create(ctx, ContactCreate{Name: "Ada"}, WithoutIdempotencyKey())
				checkRedirected(t, "unkeyed write", err, target.url+"/v1/contacts")
			}
			if *hits != 6 {
				t.Errorf("the API got %d requests, want 6: a redirect is no reason to retry", *hits)
			}
			if n := target.requests(); n != 0 {
				t.Errorf("the redirect's target got %d requests", n)
			}
			if followed || follows.CheckRedirect == nil {
				t.Errorf("the caller's http.Client: its CheckRedirect was called (%v) or replaced (%v)", followed, follows.CheckRedirect == nil)
			}
		})
	}
}

// checkRedirected fails t unless err is the *Error of a 307 that names
// location and is no ErrOutcomeUnknown.
func checkRedirected(t *testing.T, what string, err error, location string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusTemporaryRedirect || !errors.Is(err, ErrRedirected) {
		t.Fatalf("%s: err = %v, want the 307 as an *Error", what, err)
	}
	if errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("%s: a redirect is an answer, not an unknown outcome: %v", what, err)
	}
	if !strings.Contains(err.Error(), location) {
		t.Errorf("%s: the error does not name the Location %s: %v", what, location, err)
	}
}

// TestHostileRedirectThenErrorHoldsNoKey: the API redirects to itself and
// the target answers 404 (or 200). Nothing reachable from the returned
// error, nor from the response stored by WithResponseInto, holds the key:
// findString walks the whole graph, unexported fields, contexts and bodies
// included.
func TestHostileRedirectThenErrorHoldsNoKey(t *testing.T) {
	checkNoLeaks(t)
	api, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/v1/"):
			http.Redirect(w, r, "/after"+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		case r.URL.Path == "/after/v1/me":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, meJSON)
		default:
			problemHandler(w, http.StatusNotFound, CodeNotFound)
		}
	})
	c, key := socketClient(t, api.URL)
	ctx := hostileCtx(t)
	var resp *http.Response
	_, err := c.Contacts.Get(ctx, "con_1", WithResponseInto(&resp))
	if err == nil {
		t.Fatal("no error")
	}
	noKeyIn(t, "the error of a redirect", err, key)
	_, err = c.Me(ctx, WithResponseInto(&resp))
	noKeyIn(t, "the error of a redirect to a 200", err, key)
	noKeyIn(t, "the response of a redirect", resp, key)

	ok, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, meJSON)
	})
	c, key = socketClient(t, ok.URL)
	if _, err := c.Me(ctx, WithResponseInto(&resp)); err != nil || resp == nil {
		t.Fatalf("resp %v, err %v", resp, err)
	}
	noKeyIn(t, "the response of a call", resp, key)
}

// problemHandler writes a problem answer of the API.
func problemHandler(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"type":"https://developers.bodo-app.com/problems/%s","title":"Titel","status":%d,"code":"%s","requestId":"req_01JBD8Y3K5M7Q2W9X4Z6T1V0NP"}`, code, status, code)
}

// TestHostilePathIdsAreOneSegment: ids that are empty, dot segments, hold a
// slash or name another route ("count" next to /v1/contacts/count) are
// refused before anything is sent, with a local *Error (ErrBadRequest);
// any other id reaches the server as exactly one path segment of its
// operation.
func TestHostilePathIdsAreOneSegment(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	api, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/count") {
			_, _ = io.WriteString(w, `{"count":3}`)
			return
		}
		_, _ = io.WriteString(w, contactJSON)
	})
	c, _ := socketClient(t, api.URL)
	ctx := hostileCtx(t)
	calls := map[string]func() error{
		`Contacts.Get("count")`:  func() error { _, err := c.Contacts.Get(ctx, "count"); return err },
		`Contacts.Get("..")`:     func() error { _, err := c.Contacts.Get(ctx, ".."); return err },
		`Contacts.Get(".")`:      func() error { _, err := c.Contacts.Get(ctx, "."); return err },
		`Contacts.Get("a/b")`:    func() error { _, err := c.Contacts.Get(ctx, "a/b"); return err },
		`Contacts.Get("a\\b")`:   func() error { _, err := c.Contacts.Get(ctx, `a\b`); return err },
		`Contacts.Delete("..")`:  func() error { return c.Contacts.Delete(ctx, "..") },
		`Contacts.Update("")`:    func() error { _, err := c.Contacts.Update(ctx, "", ContactUpdate{}); return err },
		`Invoices.Pay("..")`:     func() error { _, err := c.Invoices.Pay(ctx, ".."); return err },
		`Operations.Get("../x")`: func() error { _, err := c.Operations.Get(ctx, "../x"); return err },
	}
	for name, call := range calls {
		err := call()
		var e *Error
		if !errors.As(err, &e) || !e.Local || !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: err = %v, want a local *Error", name, err)
		}
	}
	if *hits != 0 {
		t.Fatalf("the server got %d requests: %q", *hits, paths)
	}
	odd := "con_ä ?#%2e"
	if _, err := c.Contacts.Get(ctx, odd); err != nil {
		t.Fatal(err)
	}
	if want := "/v1/contacts/con_%C3%A4%20%3F%23%252e"; len(paths) != 1 || paths[0] != want {
		t.Errorf("the server got %q, want %s", paths, want)
	}
}

// TestHostileRepeatedCursorEndsTheIteration: a server answers every page
// with the same nextCursor, or with two cursors in turn. All ends with an
// *Error (ErrRepeatedCursor) after the pages it had not seen, instead of
// fetching them for ever.
func TestHostileRepeatedCursorEndsTheIteration(t *testing.T) {
	api, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/contacts":
			_, _ = io.WriteString(w, `{"data":[`+contactJSON+`],"nextCursor":"same"}`)
		case "/v1/invoices":
			next := "b"
			if r.URL.Query().Get("cursor") == "b" {
				next = "a"
			}
			_, _ = fmt.Fprintf(w, `{"data":[],"nextCursor":%q}`, next)
		}
	})
	c, _ := socketClient(t, api.URL)
	ctx := hostileCtx(t)
	items, err := drain(c.Contacts.All(ctx, nil), 50)
	if !errors.Is(err, ErrRepeatedCursor) || items != 2 || *hits != 2 {
		t.Errorf("contacts: %d items in %d pages, err = %v; want 2 items, 2 pages, ErrRepeatedCursor", items, *hits, err)
	}
	*hits = 0
	_, err = drain(c.Invoices.All(ctx, &ListInvoicesParams{Cursor: String("a")}), 50)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrRepeatedCursor) || *hits != 2 {
		t.Errorf("invoices: %d pages, err = %v; want 2 pages, ErrRepeatedCursor", *hits, err)
	}
}

// TestHostileEventsWithoutIDsEndTheIteration: Events.All pages after the
// last event's id; a server whose last event has none, and which repeats
// its nextCursor, ends the iteration with ErrRepeatedCursor instead of
// serving the first page for ever.
func TestHostileEventsWithoutIDsEndTheIteration(t *testing.T) {
	api, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":[{"id":"","type":"contact.created","createdAt":"2026-11-30T10:00:00Z","data":{}}],"nextCursor":"cur_1"}`)
	})
	c, _ := socketClient(t, api.URL)
	items, err := drain(c.Events.All(hostileCtx(t), nil), 50)
	if !errors.Is(err, ErrRepeatedCursor) || items != 2 || *hits != 2 {
		t.Errorf("%d events in %d pages, err = %v; want 2 events, 2 pages, ErrRepeatedCursor", items, *hits, err)
	}
}

// TestHostileEmptyPagesEndTheIteration: a server answers every page
// without data and with a new nextCursor. Nothing reaches the caller that
// could stop the iteration, so All ends it with an *Error (ErrEmptyPages)
// after maxEmptyPages pages; pages with data and new cursors go on.
func TestHostileEmptyPagesEndTheIteration(t *testing.T) {
	api, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		n, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		data := ""
		if r.URL.Path == "/v1/contacts" {
			data = contactJSON
		}
		_, _ = fmt.Fprintf(w, `{"data":[%s],"nextCursor":"%d"}`, data, n+1)
	})
	c, _ := socketClient(t, api.URL, WithoutBudget())
	ctx := hostileCtx(t)
	_, err := drain(c.Invoices.All(ctx, nil), 10)
	if !errors.Is(err, ErrEmptyPages) || *hits != maxEmptyPages {
		t.Errorf("invoices: %d empty pages, err = %v; want %d, ErrEmptyPages", *hits, err, maxEmptyPages)
	}
	*hits = 0
	items, err := drain(c.Contacts.All(ctx, nil), 2*maxEmptyPages)
	if err != nil || items != 2*maxEmptyPages {
		t.Errorf("contacts: %d items, err = %v; want %d pages of data", items, err, 2*maxEmptyPages)
	}
}

// TestAnIterationRemembersAtMostMaxCursors: the cursors one iteration
// followed take bounded memory; a cycle within the last maxCursors is
// found.
func TestAnIterationRemembersAtMostMaxCursors(t *testing.T) {
	var pc pageCursors
	for i := range maxCursors + 1000 {
		if pc.seen(strconv.Itoa(i)) {
			t.Fatalf("cursor %d seen before", i)
		}
	}
	if len(pc.hashes) != maxCursors || len(pc.ring) != maxCursors {
		t.Errorf("%d cursors remembered (ring %d), want %d", len(pc.hashes), len(pc.ring), maxCursors)
	}
	if !pc.seen(strconv.Itoa(maxCursors+999)) || pc.seen("0") {
		t.Error("the last cursor is not remembered, or the first still is")
	}
}

// drain runs seq to its end or for at most limit steps and returns the
// items it yielded and the error that ended it.
func drain[T any](seq func(func(T, error) bool), limit int) (int, error) {
	n := 0
	var last error
	for _, err := range seq {
		if err != nil {
			last = err
			break
		}
		if n++; n >= limit {
			break
		}
	}
	return n, last
}

// TestHostileETagCannotFailLaterGets: a server hands out a 2 MB ETag, which
// sent back in If-None-Match would be 431 for ever: it is not cached, and
// every Get succeeds. A server that refuses a revalidation (410, 412, 431)
// fails that Get only: the entry is dropped, and the next Get asks without
// If-None-Match.
func TestHostileETagCannotFailLaterGets(t *testing.T) {
	huge := `"` + strings.Repeat("e", 2<<20) + `"`
	var mu sync.Mutex
	revalidations := map[string]int{}
	api, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/v1/contacts/")
		tag := `"v1"`
		if id == "con_huge" {
			tag = huge
		}
		if r.Header.Get("If-None-Match") != "" {
			mu.Lock()
			revalidations[id]++
			mu.Unlock()
			// con_<status> refuses every revalidation with that status.
			if status, err := strconv.Atoi(strings.TrimPrefix(id, "con_")); err == nil {
				problemHandler(w, status, CodeBadRequest)
				return
			}
		}
		w.Header().Set("ETag", tag)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, contactJSON)
	})
	c, _ := socketClient(t, api.URL, WithCache(10))
	ctx := hostileCtx(t)
	for i := range 3 {
		if _, err := c.Contacts.Get(ctx, "con_huge"); err != nil {
			t.Fatalf("Get %d of the resource with a 2 MB ETag: %v", i+1, err)
		}
	}
	var resp *http.Response
	_, err := c.Contacts.Update(ctx, "con_1", ContactUpdate{}, WithIfMatch(huge), WithResponseInto(&resp))
	if !errors.Is(err, ErrBadRequest) || resp != nil {
		t.Errorf("WithIfMatch of a 2 MB ETag: err = %v", err)
	}
	for _, status := range []int{http.StatusGone, http.StatusPreconditionFailed, http.StatusRequestHeaderFieldsTooLarge} {
		id := fmt.Sprintf("con_%d", status)
		if _, err := c.Contacts.Get(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Contacts.Get(ctx, id); err == nil {
			t.Fatalf("%s: the server refused the revalidation, yet no error", id)
		}
		if _, err := c.Contacts.Get(ctx, id); err != nil {
			t.Errorf("%s: the Get after the refused revalidation: %v", id, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"con_410": 1, "con_412": 1, "con_431": 1}
	if !maps.Equal(revalidations, want) {
		t.Errorf("revalidations %v, want %v: the refused one only", revalidations, want)
	}
}

// TestHostileDeleteRetriedAfterLostAnswerIsGone: the first DELETE reaches
// the server, which deletes and drops the connection before answering;
// the retry is answered 404. Delete returns nil: the resource is gone, as
// asked. A DELETE answered 404 at once stays ErrNotFound.
func TestHostileDeleteRetriedAfterLostAnswerIsGone(t *testing.T) {
	checkNoLeaks(t)
	srv := newRawServer(t, func(s *rawServer, n int, c *net.TCPConn, req *http.Request) bool {
		if n == 1 && strings.HasSuffix(req.URL.Path, "/con_lost") {
			reset(c) // deleted; the answer is lost
			return false
		}
		body := `{"type":"https://developers.bodo-app.com/problems/NOT_FOUND","title":"Nicht gefunden","status":404,"code":"NOT_FOUND","requestId":"req_01JBD8Y3K5M7Q2W9X4Z6T1V0NP"}`
		_, _ = fmt.Fprintf(c, "HTTP/1.1 404 Not Found\r\nContent-Type: application/problem+json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return true
	})
	c, _ := socketClient(t, srv.url)
	ctx := hostileCtx(t)
	if err := c.Contacts.Delete(ctx, "con_lost"); err != nil {
		t.Errorf("Delete after a lost answer and a 404: %v, want nil", err)
	}
	if _, n := srv.counts(); n != 2 {
		t.Errorf("%d requests, want the DELETE and its retry", n)
	}
	if err := c.Contacts.Delete(ctx, "con_none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete answered 404 at once: %v, want ErrNotFound", err)
	}
}

// TestHostileUnsendableInputIsRefusedBeforeSending: a header value with CR
// or LF, a header name with a space, an Idempotency-Key with a line break
// or a space, an API key with a NUL: NewClient or the call refuses them
// with a local *Error (ErrBadRequest), nothing is sent and an unkeyed
// write is no ErrOutcomeUnknown. A TLS certificate failure is not sent
// either: not ErrOutcomeUnknown, not retried, and 30 of them do not make
// the refusal guard hold the key.
func TestHostileUnsendableInputIsRefusedBeforeSending(t *testing.T) {
	checkNoLeaks(t)
	for name, opt := range map[string]Option{
		"CR LF in a header value":  WithHeader("X-Trace", "a\r\nInjected: 1"),
		"NUL in a header value":    WithHeader("X-Trace", "a\x00b"),
		"a space in a header name": WithHeader("X Trace", "a"),
		"NUL in the API key":       WithAPIKey("bodo_test_secret\x00secretsecret"),
		"LF in the API key":        WithAPIKey("bodo_test_secret\nsecretsecret"),
	} {
		_, err := NewClient(WithAPIKey(testKey), WithBaseURL(uniqueBaseURL()), opt)
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("NewClient with %s: err = %v", name, err)
		}
	}

	api, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, contactJSON)
	})
	retries := 0
	c, _ := socketClient(t, api.URL, WithOnRetry(func(RetryEvent) { retries++ }))
	ctx := hostileCtx(t)
	for name, opts := range map[string][]RequestOption{
		"CR LF in a header value":    {WithoutIdempotencyKey(), WithHeader("X-Trace", "a\r\nInjected: 1")},
		"LF in an Idempotency-Key":   {WithIdempotencyKey("key\nInjected: 1")},
		"a key that ends in a space": {WithIdempotencyKey("my key ")},
		"NUL in an Idempotency-Key":  {WithIdempotencyKey("key\x00")},
	} {
		_, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"}, opts...)
		var e *Error
		if !errors.As(err, &e) || !e.Local || !errors.Is(err, ErrBadRequest) || errors.Is(err, ErrOutcomeUnknown) {
			t.Errorf("%s: err = %v, want a local *Error", name, err)
		}
	}
	if *hits != 0 || retries != 0 {
		t.Errorf("unsendable input: %d requests, %d retries", *hits, retries)
	}
	if _, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"}, WithIdempotencyKey("order 42")); err != nil || *hits != 1 {
		t.Errorf("a key with a space inside, which a header carries as it is: %v, %d sent", err, *hits)
	}

	tlsAPI := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, meJSON)
	}))
	tlsAPI.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors are the point
	tlsAPI.StartTLS()
	t.Cleanup(tlsAPI.Close)
	untrusting := &http.Transport{}
	t.Cleanup(untrusting.CloseIdleConnections)
	c, key := socketClient(t, tlsAPI.URL, WithHTTPClient(&http.Client{Transport: untrusting}), WithOnRetry(func(RetryEvent) { retries++ }))
	for i := range 30 {
		_, err := c.Contacts.Create(ctx, ContactCreate{Name: "Ada"}, WithoutIdempotencyKey())
		if err == nil || errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("create %d over a refused certificate: err = %v", i+1, err)
		}
	}
	if _, err := c.Me(ctx); err == nil || retries != 0 {
		t.Errorf("a read over a refused certificate: err = %v after %d retries, want no retry", err, retries)
	}
	trusting, err := NewClient(WithAPIKey(key), WithBaseURL(tlsAPI.URL), WithHTTPClient(tlsAPI.Client()), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	soon, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := trusting.Me(soon); err != nil {
		t.Errorf("the same key over a trusted certificate, after 30 refused ones: %v", err)
	}
}

// TestHostileLongCursorsAreNotKept: an iteration remembers the cursors it
// followed in a fixed size each, so that a server answering 32 cursors of
// a megabyte each leaves the iteration holding a few hundred bytes, not
// the 32 MB of the cursors.
func TestHostileLongCursorsAreNotKept(t *testing.T) {
	const n, size = 32, 1 << 20
	var pc pageCursors
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		cursor := strconv.Itoa(i) + strings.Repeat("c", size)
		if pc.seen(cursor) {
			t.Fatalf("cursor %d seen before", i)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > n*size/8 {
		t.Errorf("the iteration keeps %d bytes after %d cursors of %d bytes", grown, n, size)
	}
	if !pc.seen(strconv.Itoa(n-1) + strings.Repeat("c", size)) {
		t.Error("a cursor followed before is not seen")
	}
	runtime.KeepAlive(&pc)
}

// TestEventsPageOnAfterTheLastEvent: listEvents pages forward with after,
// an event id, so Events.All passes the last event it read, whatever the
// server's nextCursor is (here an opaque one it would refuse as after).
func TestEventsPageOnAfterTheLastEvent(t *testing.T) {
	const a, b = "evt_01JBD8Y3K5M7Q2W9X4Z6T1V0NA", "evt_01JBD8Y3K5M7Q2W9X4Z6T1V0NB"
	event := func(id string) string {
		return `{"id":"` + id + `","type":"contact.created","createdAt":"2026-11-30T10:00:00Z","data":{}}`
	}
	api, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Query().Get("after") {
		case "":
			_, _ = io.WriteString(w, `{"data":[`+event(a)+`],"nextCursor":"opaque-1"}`)
		case a:
			_, _ = io.WriteString(w, `{"data":[`+event(b)+`],"nextCursor":null}`)
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	c, _ := socketClient(t, api.URL)
	var ids []string
	for ev, err := range c.Events.All(hostileCtx(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	if len(ids) != 2 || ids[1] != b {
		t.Errorf("events %v, want %s then %s", ids, a, b)
	}
}

// TestARefusalsLogLineKeepsServerStringsShort: a 503 whose problem
// carries a code and a policy of 400 KiB each, and whose Request-Id header
// is 4 MiB, is logged in a few KiB.
func TestARefusalsLogLineKeepsServerStringsShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := strings.Repeat("A", 400<<10)
		body, _ := json.Marshal(map[string]any{"type": "about:blank", "code": "X" + big, "policy": "P" + big})
		reqID := "req_" + strings.Repeat("R", 4<<20)
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return answerWith(r, http.StatusServiceUnavailable, "application/problem+json", body,
				http.Header{"Request-Id": {reqID}, "Retry-After": {"0"}}), nil
		})
		var out bytes.Buffer
		c := hostileClient(t, uniqueBaseURL(), rt, WithLogger(slog.New(slog.NewJSONHandler(&out, nil))))
		const calls = 5
		for range calls {
			_, _ = c.Contacts.Get(context.Background(), hostileContactID) // 3 attempts each (MaxRetries 2)
		}
		lines := bytes.Count(out.Bytes(), []byte("\n"))
		if out.Len() > calls*3*4<<10 {
			t.Errorf("%d calls: %d log lines, %d MiB of log (%d KiB per line) chosen by the server", calls, lines, out.Len()>>20, out.Len()/max(lines, 1)>>10)
		}
	})
}

// TestARefusalsPolicyNameIsBounded: a RATE_LIMITED whose problem names a
// policy of 1 MiB teaches the key no level of that name (budget.MaxNameBytes),
// however many come.
func TestARefusalsPolicyNameIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		i := 0
		raw, _ := json.Marshal(sampleContact)
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			i++
			if i%2 == 0 {
				return answerWith(r, http.StatusOK, "application/json", raw, nil), nil
			}
			name := fmt.Sprintf("p%d-%s", i, strings.Repeat("z", (1<<20)-200))
			body, _ := json.Marshal(map[string]any{"type": "about:blank", "code": "RATE_LIMITED", "policy": name, "retryAfterMs": 1})
			return answerWith(r, http.StatusTooManyRequests, "application/problem+json", body, nil), nil
		})
		c := hostileClient(t, uniqueBaseURL(), rt, WithMaxRetries(0))
		for range 2 * 64 {
			_, _ = c.Contacts.Get(context.Background(), hostileContactID)
			time.Sleep(3 * time.Second) // the refusal guard's window: 25 refusals a minute
		}
		names := 0
		for _, l := range c.Budget().Levels {
			names += len(l.Name)
		}
		if names > 64*8<<10 {
			t.Errorf("the key's budget keeps %d levels whose names take %d MiB", len(c.Budget().Levels), names>>20)
		}
	})
}

// TestHostileAnswerWithoutContentIsAnError: an operation that answers
// with a resource, answered 204, with an empty body or with the JSON
// null, fails with an invalid response instead of returning a zero value
// as if it were the resource (a payment with no id). A 304 to an
// operation that sends no If-None-Match (a delete) is one too.
func TestHostileAnswerWithoutContentIsAnError(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{{http.StatusNoContent, ""}, {http.StatusOK, ""}, {http.StatusOK, "null"}, {http.StatusOK, " null\n"}} {
		c := hostileClient(t, uniqueBaseURL(), roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return answerWith(r, tc.status, "application/json", []byte(tc.body), nil), nil
		}))
		var e *Error
		if ct, err := c.Contacts.Get(t.Context(), hostileContactID); !errors.As(err, &e) || e.Status != tc.status || e.Title != "Invalid response" {
			t.Errorf("Get answered %d %q: %+v, %v; want an invalid response", tc.status, tc.body, ct, err)
		}
		if inv, err := c.Invoices.Pay(t.Context(), "inv_01JBD8Y3K5M7Q2W9X4Z6T1V0NP"); !errors.As(err, &e) || e.Title != "Invalid response" {
			t.Errorf("Pay answered %d %q: %+v, %v; want an invalid response", tc.status, tc.body, inv, err)
		}
	}
	c := hostileClient(t, uniqueBaseURL(), roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return answerWith(r, http.StatusNotModified, "", nil, nil), nil
	}))
	var e *Error
	if err := c.Contacts.Delete(t.Context(), hostileContactID); !errors.As(err, &e) || e.Status != http.StatusNotModified {
		t.Errorf("Delete answered 304: %v, want an error", err)
	}
}
