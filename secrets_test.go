package bodo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/jarcoal/httpmock"
)

// The API key must not leak: not in an error, however it is printed, not in
// a log line, not to another host on a redirect.

// formats are the ways an error (or anything) tends to get printed.
var formats = []string{"%v", "%+v", "%#v", "%s", "%q"}

// noKeyIn fails t when any rendering of v, or any value reachable from it,
// contains key.
func noKeyIn(t *testing.T, what string, v any, key string) {
	t.Helper()
	for _, f := range formats {
		if s := fmt.Sprintf(f, v); strings.Contains(s, key) {
			t.Errorf("%s printed with %s shows the API key: %s", what, f, s)
		}
	}
	if path := findString(v, key, what); path != "" {
		t.Errorf("the API key is reachable at %s", path)
	}
}

// findString walks every value reachable from v, exported or not: through
// pointers, interfaces, struct fields, slices, arrays and maps (keys and
// values), contexts (but for their cancellation state, contextState) and
// bodies included, each pointer once. It calls the
// funcs of type func() string and func() []string it meets, the shape of a
// getter that hides a secret in a closure. It returns the path of the first
// string or byte sequence that contains key, or "".
func findString(v any, key, path string) string {
	root := reflect.New(reflect.TypeOf(&v).Elem()).Elem()
	root.Set(reflect.ValueOf(&v).Elem())
	w := &keyWalker{key: key, seen: map[walkVisit]bool{}}
	return w.walk(root, path)
}

// keyWalker is findString's state: the values it has seen, by address and
// type, so that a cycle ends.
type keyWalker struct {
	key  string
	seen map[walkVisit]bool
}

type walkVisit struct {
	p uintptr
	t reflect.Type
}

// contextState are the fields of package context's types that hold the
// cancellation state (lock, done channel, derived contexts, error, timer),
// which the transport changes while a walk runs and which carry no value of
// the caller: findString walks a context's values and parents, not these.
var contextState = map[string]bool{"mu": true, "done": true, "children": true, "err": true, "cause": true, "timer": true}

var (
	stringGetter  = reflect.TypeOf(func() string { return "" })
	stringsGetter = reflect.TypeOf(func() []string { return nil })
)

// first marks the value at p of type t seen and reports whether it was new.
func (w *keyWalker) first(p uintptr, t reflect.Type) bool {
	k := walkVisit{p, t}
	if w.seen[k] {
		return false
	}
	w.seen[k] = true
	return true
}

// readable returns v addressable and without the read-only flag of an
// unexported field, so that the funcs inside it can be called: an
// addressable v through its address, a value of an interface or a map
// (never addressable) as a copy.
func readable(v reflect.Value) reflect.Value {
	switch {
	case v.CanAddr() && v.CanInterface():
		return v
	case v.CanAddr():
		return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
	case v.CanInterface():
		c := reflect.New(v.Type()).Elem()
		c.Set(v)
		return c
	}
	return v
}

func (w *keyWalker) walk(v reflect.Value, path string) string {
	if !v.IsValid() {
		return ""
	}
	v = readable(v)
	switch v.Kind() {
	case reflect.String:
		if strings.Contains(v.String(), w.key) {
			return path
		}
	case reflect.Pointer:
		if v.IsNil() || !w.first(v.Pointer(), v.Type()) {
			return ""
		}
		return w.walk(v.Elem(), path)
	case reflect.Interface:
		return w.walk(v.Elem(), path)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if v.Type().PkgPath() == "context" && contextState[f.Name] {
				continue
			}
			if p := w.walk(v.Field(i), path+"."+f.Name); p != "" {
				return p
			}
		}
	case reflect.Slice:
		if v.IsNil() || !w.first(v.Pointer(), v.Type()) {
			return ""
		}
		fallthrough
	case reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, v.Len())
			for i := range b {
				b[i] = byte(v.Index(i).Uint())
			}
			if bytes.Contains(b, []byte(w.key)) {
				return path
			}
			return ""
		}
		for i := range v.Len() {
			if p := w.walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case reflect.Map:
		if v.IsNil() || !w.first(v.Pointer(), v.Type()) {
			return ""
		}
		for it := v.MapRange(); it.Next(); {
			if p := w.walk(it.Key(), path+"[key]"); p != "" {
				return p
			}
			name := "[…]"
			if it.Key().Kind() == reflect.String {
				name = fmt.Sprintf("[%q]", it.Key().String())
			}
			if p := w.walk(it.Value(), path+name); p != "" {
				return p
			}
		}
	case reflect.Func:
		if v.IsNil() || v.Type() != stringGetter && v.Type() != stringsGetter {
			return ""
		}
		if v.CanInterface() {
			return w.walk(v.Call(nil)[0], path+"()")
		}
	}
	return ""
}

// checkErrorHidesKey checks err and everything errors.As finds in it.
func checkErrorHidesKey(t *testing.T, name string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", name)
	}
	noKeyIn(t, name, err, testKey)
	var e *Error
	if errors.As(err, &e) {
		noKeyIn(t, name+": *Error", e, testKey)
		noKeyIn(t, name+": Error value", *e, testKey)
		for _, r := range []*http.Request{e.Request, responseRequest(e.Response)} {
			if r == nil {
				continue
			}
			if a := r.Header.Get("Authorization"); a != "" && a != "Bearer [REDACTED]" {
				t.Errorf("%s: a request in the error carries Authorization %q", name, a)
			}
			noKeyIn(t, name+": its request", r, testKey)
		}
	}
	var re *RetryError
	if errors.As(err, &re) {
		noKeyIn(t, name+": *RetryError", re, testKey)
	}
}

func responseRequest(r *http.Response) *http.Request {
	if r == nil {
		return nil
	}
	return r.Request
}

// TestSecretNotInErrors makes every kind of error the client returns and
// prints it every way.
func TestSecretNotInErrors(t *testing.T) {
	checkNoLeaks(t)
	synctest.Test(t, func(t *testing.T) {
		var retryErrs []error
		c, mt := mockClient(t, WithOnRetry(func(ev RetryEvent) { retryErrs = append(retryErrs, ev.Err) }))
		ctx := context.Background()
		mt.RegisterResponder("GET", "=~/v1/me", problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"1"}}, map[string]any{"policy": "key"}))
		mt.RegisterResponder("GET", "=~/v1/contacts/con_404", problemResponder(404, CodeNotFound, nil, nil))
		mt.RegisterResponder("GET", "=~/v1/contacts/con_bad", httpmock.NewStringResponder(200, `{"id": `))
		mt.RegisterResponder("GET", "=~/v1/contacts/con_year", problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"31536000"}}, nil))
		mt.RegisterResponder("GET", "=~/v1/contacts/con_html", httpmock.NewStringResponder(502, "<html>Bad Gateway</html>"))
		mt.RegisterResponder("POST", "=~/v1/contacts", problemResponder(422, CodeValidationFailed, nil, map[string]any{"errors": []map[string]string{{"field": "name", "message": "fehlt"}}}))
		mt.RegisterResponder("PATCH", "=~/v1/contacts/", func(*http.Request) (*http.Response, error) {
			return nil, io.ErrUnexpectedEOF
		})
		resets := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		mt.RegisterResponder("DELETE", "=~/v1/contacts/", problemResponder(429, CodeQuotaExhausted, nil, map[string]any{"policy": "delete-day", "resetsAt": resets}))

		cases := map[string]func() error{
			"retries ran out": func() error { _, err := c.Me(ctx); return err },
			"not found":       func() error { _, err := c.Contacts.Get(ctx, "con_404"); return err },
			"invalid 200":     func() error { _, err := c.Contacts.Get(ctx, "con_bad"); return err },
			"hint too long":   func() error { _, err := c.Contacts.Get(ctx, "con_year"); return err },
			"html 502":        func() error { _, err := c.Contacts.Get(ctx, "con_html"); return err },
			"validation":      func() error { _, err := c.Contacts.Create(ctx, ContactCreate{Name: ""}); return err },
			"outcome unknown": func() error {
				_, err := c.Contacts.Update(ctx, "con_1", ContactUpdate{}, WithoutIdempotencyKey())
				return err
			},
			"quota exhausted": func() error { return c.Contacts.Delete(ctx, "con_1") },
			"refused locally": func() error { return c.Contacts.Delete(ctx, "con_2") },
			"deadline before the retry": func() error {
				dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				defer cancel()
				_, err := c.Me(dctx)
				return err
			},
			"cancelled": func() error {
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				_, err := c.Me(cctx)
				return err
			},
			"can never fit": func() error {
				var parts []BatchRequestItem
				for range 20 {
					parts = append(parts, BatchRequestItem{Method: BatchMethodGet, Path: "/v1/contacts?q=x&limit=100"})
				}
				// 20 × 7 points fit the key's 600; the egress of 20 × 100
				// records fits too: shrink the key level to make it never
				// fit.
				c.state.SetQuota("key", 100, 100)
				defer c.state.SetQuota("key", 300, 600)
				_, err := c.Batch(ctx, BatchRequest{Requests: parts})
				return err
			},
		}
		for name, f := range cases {
			checkErrorHidesKey(t, name, f())
		}
		for i, err := range retryErrs {
			checkErrorHidesKey(t, fmt.Sprintf("RetryEvent %d", i), err)
		}
	})
}

// TestSecretNotInErrorsThroughMiddleware: with a middleware, whose
// attempts carry the client in their context, neither an error's request
// nor a response's (WithResponseInto) leads to the key once the call is
// done.
func TestSecretNotInErrorsThroughMiddleware(t *testing.T) {
	checkNoLeaks(t)
	synctest.Test(t, func(t *testing.T) {
		var seen *Client
		passThrough := func(req *http.Request, next MiddlewareNext) (*http.Response, error) {
			a, _ := AttemptFrom(req.Context())
			seen = a.Client
			return next(req)
		}
		c, mt := mockClient(t, WithMiddleware(passThrough), WithMaxRetries(0))
		mt.RegisterResponder("GET", "=~/v1/contacts/con_404", problemResponder(404, CodeNotFound, nil, nil))
		mt.RegisterResponder("GET", "=~/v1/me", jsonResponder(200, map[string]any{}))
		_, err := c.Contacts.Get(context.Background(), "con_404")
		checkErrorHidesKey(t, "through middleware", err)
		if seen != c {
			t.Errorf("the middleware saw the client %p, want %p", seen, c)
		}
		var resp *http.Response
		if _, err := c.Me(context.Background(), WithResponseInto(&resp)); err != nil {
			t.Fatal(err)
		}
		noKeyIn(t, "a response through middleware", resp, testKey)
	})
}

// TestSecretNotInLogs logs a retried and a final 429 through slog's JSON
// and text handlers, at debug level and with the source.
func TestSecretNotInLogs(t *testing.T) {
	checkNoLeaks(t)
	for _, kind := range []string{"json", "text"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var buf bytes.Buffer
				var mu sync.Mutex
				w := &lockedWriter{w: &buf, mu: &mu}
				opts := &slog.HandlerOptions{Level: slog.LevelDebug, AddSource: true}
				var h slog.Handler = slog.NewJSONHandler(w, opts)
				if kind == "text" {
					h = slog.NewTextHandler(w, opts)
				}
				c, mt := mockClient(t, WithLogger(slog.New(h)))
				mt.RegisterResponder("GET", "=~/v1/me", problemResponder(429, CodeRateLimited, http.Header{"Retry-After": {"1"}}, map[string]any{"policy": "key"}))
				mt.RegisterResponder("GET", "=~/v1/contacts/", problemResponder(503, CodeOverloaded, http.Header{"Retry-After": {"1"}}, nil))
				_, err := c.Me(context.Background())
				_, err2 := c.Contacts.Get(context.Background(), "con_1", WithMaxRetries(0))
				// What a caller typically logs, too.
				slog.New(h).Error("call failed", "err", err, "err2", err2)
				mu.Lock()
				out := buf.String()
				mu.Unlock()
				if strings.Count(out, "bodo: refused") < 4 {
					t.Fatalf("expected the refusals to be logged:\n%s", out)
				}
				if strings.Contains(out, testKey) {
					t.Errorf("the API key is in the log:\n%s", out)
				}
				if strings.Contains(out, "Bearer") {
					t.Errorf("an Authorization value is in the log:\n%s", out)
				}
			})
		})
	}
}

// TestSecretNotInClientFormatting prints a *Client every way, alone, in a
// struct and through slog. (*Client has String, GoString and LogValue
// that redact the key; before they came, %v of a *Client printed it.)
func TestSecretNotInClientFormatting(t *testing.T) {
	c, _ := mockClient(t)
	holder := struct{ API *Client }{c}
	for _, f := range formats {
		for what, v := range map[string]any{"client": c, "struct{ API *Client }": holder} {
			if s := fmt.Sprintf(f, v); strings.Contains(s, testKey) {
				t.Errorf("fmt.Sprintf(%q, %s) shows the API key: %.300s…", f, what, s)
			}
		}
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("made a client", "client", c)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("made a client", "client", c)
	if strings.Contains(buf.String(), testKey) {
		t.Errorf("slog shows the API key: %s", buf.String())
	}
}

// TestSecretNotInClientValueFormatting prints a Client value (*client, or a
// struct that holds a bodo.Client by value) every way.
//
// Regression: before d7d84ef String and GoString had pointer receivers and
// Client.apiKey was a string, so fmt printed a Client value's fields, the
// key among them, in clear with every verb (fmt calls no methods on an
// unexported field). The key now sits behind a func, which prints as an
// address.
func TestSecretNotInClientValueFormatting(t *testing.T) {
	c, _ := mockClient(t)
	holder := struct{ API Client }{*c}
	for _, f := range formats {
		for what, v := range map[string]any{"*client": *c, "struct{ API Client }": holder} {
			if s := fmt.Sprintf(f, v); strings.Contains(s, testKey) {
				t.Errorf("fmt.Sprintf(%q, %s) shows the API key", f, what)
			}
		}
	}
}

// TestSecretCheckerFindsTheKey: the checks above would see a key where one
// is: in a request header reachable from an *Error, in a body, in a map.
func TestSecretCheckerFindsTheKey(t *testing.T) {
	req := httptest.NewRequest("GET", "https://api.bodo-app.com/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	for what, v := range map[string]any{
		"request":  &Error{Response: &http.Response{Request: req}},
		"body":     &RetryError{Err: &Error{Body: []byte("echo " + testKey)}},
		"map":      map[string][]string{"X": {testKey}},
		"detail":   Error{Detail: testKey},
		"redacted": redactedRequest(req),
		"closure":  struct{ get func() string }{secretFunc(testKey)},
		"header":   &struct{ h func() []string }{secretHeader("Bearer " + testKey)},
		"cycle":    cyclic(testKey),
	} {
		path := findString(v, testKey, what)
		if (path == "") != (what == "redacted") {
			t.Errorf("%s: found at %q", what, path)
		}
	}
}

// cyclic is a value that points back to itself and holds key in an
// unexported field behind the cycle.
func cyclic(key string) any {
	type node struct {
		next   *node
		secret string
	}
	a := &node{}
	a.next = &node{next: a, secret: key}
	return a
}
