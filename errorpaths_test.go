package bodo

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// errorPath is one way a call can fail: run returns its error, check what
// else it must let errors.Is and errors.As find.
type errorPath struct {
	name  string
	run   func(t *testing.T) error
	check func(t *testing.T, err error, e *Error)
}

// TestEveryErrorIsAnError walks the ways a call fails, and NewClient's,
// and checks that each error is a *Error or wraps one, with the error
// underneath still found by errors.Is and errors.As.
func TestEveryErrorIsAnError(t *testing.T) {
	var paths []errorPath
	paths = append(paths, transportPaths()...)
	paths = append(paths, sandboxPaths()...)
	paths = append(paths, answerPaths()...)
	paths = append(paths, inputPaths()...)
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			err := p.run(t)
			if err == nil {
				t.Fatal("no error")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%T %v is no *Error and wraps none", err, err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "bodo: ") || strings.Contains(msg, "\n") || strings.Contains(msg, testKey) || strings.Contains(msg, sandbox.TestKey) {
				t.Errorf("Error() = %q", msg)
			}
			p.check(t, err, e)
		})
	}
}

// transportPaths fail on real sockets: a refused connection, and a server
// that never answers before the deadline.
func transportPaths() []errorPath {
	return []errorPath{
		{"connection refused", func(t *testing.T) error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			c, _ := socketClient(t, "http://"+addr, WithMaxRetries(0))
			_, err = c.Me(context.Background())
			return err
		}, func(t *testing.T, err error, e *Error) {
			var ue *url.Error
			var op *net.OpError
			if e.Status != 0 || e.Operation != "getMe" || !errors.As(err, &ue) || !errors.As(err, &op) || !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("%+v: want status 0 wrapping the *url.Error and ECONNREFUSED", e)
			}
		}},
		{"deadline while the server thinks", func(t *testing.T) error {
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(release) })
			c, _ := socketClient(t, srv.URL)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := c.Contacts.Get(ctx, "con_1")
			return err
		}, func(t *testing.T, err error, e *Error) {
			var ue *url.Error
			if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ue) || e.Status != 0 {
				t.Errorf("%v: want DeadlineExceeded and the *url.Error", err)
			}
		}},
	}
}

// sandboxPaths fail against the sandbox on virtual time: dropped
// connections, cancels, and the budget's local refusals.
func sandboxPaths() []errorPath {
	inBubble := func(f func(t *testing.T) error) func(t *testing.T) error {
		return func(t *testing.T) error {
			var err error
			synctest.Test(t, func(t *testing.T) { err = f(t) })
			return err
		}
	}
	drop := sandbox.WithFaults(func(*http.Request) sandbox.Fault { return sandbox.Fault{DropAfterCommit: true} })
	slow := sandbox.WithFaults(func(*http.Request) sandbox.Fault { return sandbox.Fault{Delay: 10 * time.Second} })
	return []errorPath{
		{"dropped connection, retries run out", inBubble(func(t *testing.T) error {
			c := sandboxClient(t, sandbox.New(drop), WithMaxRetries(1))
			_, err := c.Me(context.Background())
			return err
		}), func(t *testing.T, err error, e *Error) {
			var re *RetryError
			if !errors.As(err, &re) || re.Attempts != 2 || !errors.Is(err, io.ErrUnexpectedEOF) || e.Status != 0 {
				t.Errorf("%v: want a *RetryError of 2 attempts over the dropped connection", err)
			}
		}},
		{"dropped connection, unkeyed write", inBubble(func(t *testing.T) error {
			c := sandboxClient(t, sandbox.New(drop))
			_, err := c.Contacts.Create(context.Background(), ContactCreate{Name: "Ada"}, WithoutIdempotencyKey())
			return err
		}), func(t *testing.T, err error, e *Error) {
			if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "not retried") {
				t.Errorf("%v: want ErrOutcomeUnknown over the dropped connection", err)
			}
		}},
		{"cancel while the server thinks", inBubble(func(t *testing.T) error {
			c := sandboxClient(t, sandbox.New(slow))
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			_, err := c.Contacts.Get(ctx, "con_1")
			time.Sleep(10 * time.Second) // the server finishes the call
			return err
		}), func(t *testing.T, err error, e *Error) {
			var ue *url.Error
			if !errors.Is(err, context.Canceled) || !errors.As(err, &ue) || e.Local {
				t.Errorf("%v: want Canceled and the *url.Error", err)
			}
		}},
		{"cancel while the budget holds the call", inBubble(func(t *testing.T) error {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			_, err := spentClient(t).Me(ctx)
			return err
		}), func(t *testing.T, err error, e *Error) {
			if !errors.Is(err, context.Canceled) || !e.Local || e.Policy != "key" {
				t.Errorf("%v: want a local *Error of the key level wrapping Canceled", err)
			}
		}},
		{"a deadline before the budget lets the call go", inBubble(func(t *testing.T) error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := spentClient(t).Me(ctx)
			return err
		}), func(t *testing.T, err error, e *Error) {
			if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrRateLimited) || !e.Local || e.RetryAfter < 10*time.Second {
				t.Errorf("%v: want a local ErrRateLimited wrapping DeadlineExceeded", err)
			}
		}},
		{"a batch that can never fit", inBubble(func(t *testing.T) error {
			c := sandboxClient(t, sandbox.New())
			var parts []BatchRequestItem
			for range 11 {
				parts = append(parts, BatchRequestItem{Method: BatchMethodDelete, Path: "/v1/contacts/con_00000000000000000000000000"})
			}
			_, err := c.Batch(context.Background(), BatchRequest{Requests: parts})
			return err
		}), func(t *testing.T, err error, e *Error) {
			if !errors.Is(err, ErrCannotFit) || !e.Local {
				t.Errorf("%v: want a local ErrCannotFit", err)
			}
		}},
		{"a money action without a key", inBubble(func(t *testing.T) error {
			srv := sandbox.New()
			c := sandboxClient(t, srv)
			_, err := c.Invoices.Pay(context.Background(), "inv_1", WithoutIdempotencyKey())
			if n := srv.Stats(sandbox.TestKey).Requests; n != 0 {
				t.Errorf("%d requests sent", n)
			}
			return err
		}), func(t *testing.T, err error, e *Error) {
			if e.Code != CodeIdempotencyKeyRequired || e.Status != http.StatusBadRequest || !e.Local || !errors.Is(err, ErrBadRequest) ||
				!errors.Is(err, ErrIdempotencyKeyRequired) ||
				!strings.Contains(err.Error(), "WithoutIdempotencyKey") {
				t.Errorf("%+v: want a local 400 IDEMPOTENCY_KEY_REQUIRED", e)
			}
		}},
	}
}

// spentClient is a client of a fresh sandbox whose key level the client
// believes 100 points short: a call waits 20 s for it.
func spentClient(t *testing.T) *Client {
	c := sandboxClient(t, sandbox.New())
	if _, err := c.Me(context.Background()); err != nil { // the answer shows the key is a bucket that refills
		t.Fatal(err)
	}
	c.state.Spend("key", -100)
	return c
}

// answerPaths fail on answers the client cannot use, from a handler served
// in-process on virtual time.
func answerPaths() []errorPath {
	serve := func(status int, contentType, body string, call func(c *Client) error) func(t *testing.T) error {
		return func(t *testing.T) error {
			var err error
			synctest.Test(t, func(t *testing.T) {
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", contentType)
					w.WriteHeader(status)
					_, _ = io.WriteString(w, body)
				})
				err = call(newTestClient(t, handlerTransport{h}, WithMaxRetries(10)))
			})
			return err
		}
	}
	me := func(c *Client) error { _, err := c.Me(context.Background()); return err }
	get := func(c *Client) error { _, err := c.Contacts.Get(context.Background(), "con_1"); return err }
	unreadable := func(t *testing.T, err error, e *Error) {
		if e.Status != http.StatusOK || e.Title != "Invalid response" || errors.Unwrap(e) == nil {
			t.Errorf("%+v: want the 200 that could not be read, and why", e)
		}
	}
	return []errorPath{
		{"invalid JSON", serve(200, "application/json", `{"keyId": `, me), unreadable},
		{"a 200 of the wrong shape", serve(200, "application/json", `{"id": 5, "tags": "none"}`, get), unreadable},
		{"an HTML 502 from a proxy", serve(502, "text/html", "<html>Bad Gateway</html>", get), func(t *testing.T, err error, e *Error) {
			if e.Status != http.StatusBadGateway || e.Code != "" {
				t.Errorf("%+v: want the 502 without a code", e)
			}
		}},
		{"503 without a hint, WithMaxRetries(10)", serve(503, "text/plain", "busy", me), func(t *testing.T, err error, e *Error) {
			var re *RetryError
			if !errors.As(err, &re) || re.Attempts != 1+maxHintlessRetries || !errors.Is(err, ErrOverloaded) ||
				!strings.Contains(err.Error(), "at most 4 times, whatever WithMaxRetries says") {
				t.Errorf("%v: want 5 attempts and why", err)
			}
		}},
	}
}

// inputPaths are bad input, refused before anything is sent.
func inputPaths() []errorPath {
	call := func(opts ...RequestOption) func(t *testing.T) error {
		return func(t *testing.T) error {
			c, mt := mockClient(t)
			_, err := c.Contacts.Update(context.Background(), "con_1", ContactUpdate{}, opts...)
			if n := mt.GetTotalCallCount(); n != 0 {
				t.Errorf("%d requests sent", n)
			}
			return err
		}
	}
	newClient := func(opts ...Option) func(t *testing.T) error {
		return func(t *testing.T) error {
			t.Setenv("BODO_API_KEY", "")
			t.Setenv("BODO_BASE_URL", "")
			_, err := NewClient(opts...)
			return err
		}
	}
	badInput := func(local bool) func(t *testing.T, err error, e *Error) {
		return func(t *testing.T, err error, e *Error) {
			if e.Code != CodeBadRequest || e.Status != 0 || e.Local != local || !errors.Is(err, ErrBadRequest) {
				t.Errorf("%+v: want bad input (local %v)", e, local)
			}
		}
	}
	negative := func(t *testing.T, err error, e *Error) {
		badInput(true)(t, err, e)
		if !strings.Contains(err.Error(), "WithMaxRetries: -1 is negative") {
			t.Errorf("%v does not say which option", err)
		}
	}
	var nilCtx context.Context
	return []errorPath{
		{"a negative WithMaxRetries on a call", call(WithMaxRetries(-1)), negative},
		{"a malformed WithIfMatch", call(WithIfMatch("v1")), badInput(true)},
		{"WithHeader of the client's own header", call(WithHeader("Authorization", "Bearer x")), badInput(true)},
		{"a nil context", func(t *testing.T) error {
			c, _ := mockClient(t)
			_, err := c.Me(nilCtx)
			return err
		}, badInput(true)},
		{"NewClient without a key", newClient(), badInput(false)},
		{"NewClient with a negative WithMaxRetries", newClient(WithAPIKey(testKey), WithMaxRetries(-1)), badInput(false)},
		{"NewClient with a base URL of another scheme", newClient(WithAPIKey(testKey), WithBaseURL("ftp://api.bodo-app.com")), badInput(false)},
		{"NewClient with a base URL that does not parse", newClient(WithAPIKey(testKey), WithBaseURL("https://api.bodo-app.com/%zz")), func(t *testing.T, err error, e *Error) {
			var ue *url.Error
			badInput(false)(t, err, e)
			if !errors.As(err, &ue) {
				t.Errorf("%v does not wrap the *url.Error", err)
			}
		}},
	}
}

// handlerTransport serves requests with an http.Handler in-process, so
// that a test server works inside a synctest bubble.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// TestOperationFailedErrorIsAnError: a failed operation reads as the
// *Error of the getOperation answer that said so.
func TestOperationFailedErrorIsAnError(t *testing.T) {
	err := error(&OperationFailedError{Operation: &Operation{ID: "op_1", Error: Value(OperationError{Code: CodeInternal, Message: "Export fehlgeschlagen."})}})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInternal || e.Operation != "getOperation" || !errors.Is(err, ErrInternal) {
		t.Errorf("%v: %+v", err, e)
	}
}
