// Package speccheck checks exchanges with the sandbox against openapi.json
// with kin-openapi's openapi3filter. Importing it registers the check with
// package sandbox (sandbox.RegisterChecker), which then validates every
// exchange of every Server that runs under go test:
//
//	import _ "github.com/bodo-app/bodo-go/internal/sandbox/speccheck"
//
// It lives apart from the sandbox so that only the test binaries that ask
// for it link kin-openapi (see sandbox.WithValidation).
package speccheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/bodo-app/bodo-go/internal/ops"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

func init() { sandbox.RegisterChecker(Check) }

// Check checks one exchange against openapi.json (ops.Spec) and returns
// the violation, "" for none: a response that does not match the
// description (status, headers, body), or a request the description
// forbids that was answered with success.
func Check(r *http.Request, reqBody []byte, status int, header http.Header, body []byte) string {
	sc, err := loadChecker()
	if err != nil {
		return "loading openapi.json: " + err.Error()
	}
	return sc.check(r, reqBody, status, header, body)
}

// specChecker is openapi.json loaded once for every Server.
type specChecker struct {
	doc    *openapi3.T
	router routers.Router
	// unrouted stands for the requests that match no operation (an unknown
	// path, a method the path does not take): the answers every path may
	// give before routing.
	unrouted *openapi3.Operation
}

var loadChecker = sync.OnceValues(func() (*specChecker, error) {
	doc, err := openapi3.NewLoader().LoadFromData(ops.Spec)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	un := &openapi3.Operation{OperationID: "unrouted", Responses: openapi3.NewResponses()}
	for code, name := range map[string]string{
		"400": "BadRequest", "401": "Unauthenticated", "404": "NotFound", "405": "MethodNotAllowed",
		"429": "TooManyRequests", "500": "Internal", "503": "ServiceUnavailable",
	} {
		r := doc.Components.Responses[name]
		if r == nil {
			return nil, fmt.Errorf("openapi.json: components.responses lacks %s", name)
		}
		un.Responses.Set(code, r)
	}
	return &specChecker{doc: doc, router: router, unrouted: un}, nil
})

// specServer is the server URL of openapi.json: requests are routed as if
// they had been sent there.
var specServer = &url.URL{Scheme: "https", Host: "api.bodo-app.com"}

// check validates one exchange and returns its violation, "" for none.
func (sc *specChecker) check(r *http.Request, reqBody []byte, status int, header http.Header, body []byte) string {
	ctx := context.Background()
	req := r.Clone(ctx)
	u := *r.URL
	u.Scheme, u.Host = specServer.Scheme, specServer.Host
	req.URL = &u
	req.Host = specServer.Host
	if len(reqBody) > 0 && req.Header.Get("Content-Type") == "" {
		// The sandbox reads a body without Content-Type as JSON.
		req.Header.Set("Content-Type", "application/json")
	}
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	req.ContentLength = int64(len(reqBody))

	opts := &openapi3filter.Options{
		MultiError:            true,
		IncludeResponseStatus: true,
		SkipSettingDefaults:   true,
		AuthenticationFunc:    bearerScheme,
	}
	in := &openapi3filter.RequestValidationInput{Request: req, Options: opts}
	route, params, err := sc.router.FindRoute(req)
	var reqErr error
	switch {
	case err == nil && !sameShape(route.Path, r.URL.Path):
		// The router forgives what the sandbox does not (a trailing
		// slash, an empty segment): such a path is unknown.
		reqErr = fmt.Errorf("%s is no canonical path of %s", r.URL.Path, route.Path)
		in.Route = &routers.Route{Spec: sc.doc, Path: r.URL.Path, Method: r.Method, Operation: sc.unrouted}
	case err == nil:
		in.Route, in.PathParams = route, params
		reqErr = openapi3filter.ValidateRequest(ctx, in)
	case errors.Is(err, routers.ErrPathNotFound), errors.Is(err, routers.ErrMethodNotAllowed), isRouteError(err):
		reqErr = err
		in.Route = &routers.Route{Spec: sc.doc, Path: r.URL.Path, Method: r.Method, Operation: sc.unrouted}
	default:
		return fmt.Sprintf("%s %s: routing: %v", r.Method, r.URL.Path, err)
	}
	where := r.Method + " " + r.URL.RequestURI()
	if reqErr != nil && status < 400 {
		return fmt.Sprintf("%s: answered %d to a request openapi.json forbids: %s", where, status, oneLine(reqErr))
	}
	respErr := openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                opts,
	})
	if respErr != nil {
		return fmt.Sprintf("%s: the %d answer does not match openapi.json: %s", where, status, oneLine(respErr))
	}
	return ""
}

// sameShape reports whether the concrete path p has the segments of the
// template and is canonical, as the sandbox routes it.
func sameShape(template, p string) bool {
	return p != "" && path.Clean(p) == p && strings.Count(template, "/") == strings.Count(p, "/") &&
		!strings.Contains(p, "//") && !strings.HasSuffix(p, "/")
}

func isRouteError(err error) bool {
	var re *routers.RouteError
	return errors.As(err, &re)
}

// bearerScheme checks the bearerAuth scheme of openapi.json: an
// Authorization header with the Bearer scheme and a token.
func bearerScheme(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecurityScheme == nil || in.SecurityScheme.Type != "http" || !strings.EqualFold(in.SecurityScheme.Scheme, "bearer") {
		return fmt.Errorf("unknown security scheme %s", in.SecuritySchemeName)
	}
	if bearer(in.RequestValidationInput.Request) == "" {
		return errors.New("no Authorization: Bearer <key>")
	}
	return nil
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// bearer returns the token of an Authorization: Bearer header, "" for none.
func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// Main runs a test binary's tests (call it from TestMain) and fails the
// binary when any sandbox recorded a violation of openapi.json, even one
// whose 500 answer no test looked at; it lists the first ten.
func Main(m *testing.M) {
	code := m.Run()
	if vs := sandbox.Violations(); len(vs) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d exchanges violated openapi.json:\n", len(vs))
		for _, v := range vs[:min(len(vs), 10)] {
			fmt.Fprintln(os.Stderr, "  ", v)
		}
		code = 1
	}
	os.Exit(code)
}
