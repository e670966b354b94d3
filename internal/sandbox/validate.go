package sandbox

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// Checker checks one exchange against openapi.json and returns the
// violation, "" for none: r is the request as the sandbox received it,
// reqBody its body; status, header and body are the answer.
type Checker func(r *http.Request, reqBody []byte, status int, header http.Header, body []byte) string

var checker atomic.Pointer[Checker]

// RegisterChecker installs the checker every Server uses when it validates
// (see WithValidation). Package speccheck registers kin-openapi's
// openapi3filter when it is imported; the sandbox does not import it
// itself, so that the modules beside this one that import the sandbox
// (redisbudget, internal/compare) need no kin-openapi in their go.mod.
func RegisterChecker(c Checker) { checker.Store(&c) }

// WithValidation turns the check of every exchange against openapi.json on
// or off. By default it is on exactly when the sandbox runs under go test
// (testing.Testing) and a Checker is registered: a test binary that imports
// github.com/bodo-app/bodo-go/internal/sandbox/speccheck (a blank import
// will do) checks every exchange, so that no test can make the client
// send, or the sandbox answer, anything the description does not allow.
// WithValidation(true) without a registered checker panics in New.
//
// With it on, ServeHTTP checks each top-level exchange with speccheck
// (kin-openapi's openapi3filter): the request (path, query and header parameters, the
// bearer scheme, the body) and the response (its status is one the
// operation declares, required headers present and matching their schemas,
// the body matching the schema of its media type). A violation is
//
//   - a response that does not match the description, or
//   - a request the description forbids that the sandbox nevertheless
//     answered with success (below 400): the sandbox must refuse whatever
//     the description refuses.
//
// A request the description forbids and the sandbox refuses is no
// violation: tests send such requests on purpose. A violation replaces the
// answer with 500 INTERNAL naming it (the answer's effects stay), and is
// recorded: Server.Violations and the package-level Violations report it,
// and speccheck.Main fails a test binary on it. Batch parts are checked as
// part of the batch's answer (BatchResultItem); their bodies are opaque there.
func WithValidation(on bool) Option { return func(c *config) { c.validate = &on } }

// Violations returns every violation recorded by any Server of this process
// since it started, oldest first.
func Violations() []string {
	allViolations.Lock()
	defer allViolations.Unlock()
	return slices.Clone(allViolations.list)
}

var allViolations struct {
	sync.Mutex
	list []string
}

// Violations returns the violations of openapi.json this server recorded,
// oldest first (see WithValidation).
func (s *Server) Violations() []string {
	s.violationsMu.Lock()
	defer s.violationsMu.Unlock()
	return slices.Clone(s.violations)
}

func (s *Server) validating() bool {
	if s.cfg.validate != nil && !*s.cfg.validate {
		return false
	}
	return (s.cfg.validate != nil || testing.Testing()) && checker.Load() != nil
}

func (s *Server) recordViolation(v string) {
	s.violationsMu.Lock()
	s.violations = append(s.violations, v)
	s.violationsMu.Unlock()
	allViolations.Lock()
	allViolations.list = append(allViolations.list, v)
	allViolations.Unlock()
}

// captured is an answer ServeHTTP wrote, held back to be checked.
type captured struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *captured) Header() http.Header { return c.header }
func (c *captured) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}
func (c *captured) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.body.Write(p)
}

// serveChecked serves r into a capture, checks the exchange against
// openapi.json, and writes the answer, or 500 naming the violation.
func (s *Server) serveChecked(w http.ResponseWriter, r *http.Request, lg legs) {
	check := *checker.Load()
	reqBody, bodyErr := readBody(r)
	if bodyErr != nil {
		// Too large or unreadable: the sandbox answers 400 without reading
		// further; only the response is of interest, and it is a plain
		// problem.
		reqBody = nil
	}
	inner := r.Clone(r.Context())
	inner.Body = io.NopCloser(io.MultiReader(bytes.NewReader(reqBody), errReader{bodyErr}))
	c := &captured{header: http.Header{}}
	s.serveHTTP(c, inner, lg)
	if c.status == 0 {
		c.status = http.StatusOK
	}
	v := ""
	if bodyErr == nil {
		v = check(r, reqBody, c.status, c.header, c.body.Bytes())
	}
	if v != "" {
		s.recordViolation(v)
		l := languageOf(r.Header)
		a := problemAnswer(problem{Status: http.StatusInternalServerError, Code: codeInternal,
			Detail:   msg{"sandbox: Verstoß gegen openapi.json: %s", "sandbox: openapi.json violation: %s"}.in(l, v),
			Instance: r.URL.Path, RequestID: c.header.Get("Request-Id"), lang: l})
		for _, name := range []string{"Request-Id", "Bodo-Version", "RateLimit", "RateLimit-Policy"} {
			if vals, ok := c.header[http.CanonicalHeaderKey(name)]; ok {
				a.header[http.CanonicalHeaderKey(name)] = vals
			}
		}
		a.header.Set("Content-Length", itoa(len(a.body)))
		c.header, c.status = a.header, a.status
		c.body.Reset()
		c.body.Write(a.body)
	}
	h := w.Header()
	for name, vals := range c.header {
		h[name] = vals
	}
	w.WriteHeader(c.status)
	if c.status != http.StatusNoContent && c.status != http.StatusNotModified {
		_, _ = w.Write(c.body.Bytes())
	}
}

// errReader returns err (io.EOF when nil) from every Read.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}
