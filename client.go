package bodo

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/budget"
	"github.com/bodo-app/bodo-go/internal/ops"
	"github.com/google/uuid"
)

// DefaultBaseURL is the production API.
const DefaultBaseURL = "https://api.bodo-app.com"

// Defaults of the retry discipline; see WithMaxRetries and WithMaxRetryWait.
const (
	DefaultMaxRetries   = 2
	DefaultMaxRetryWait = 60 * time.Second
)

// Client is a bodo API client. It is safe for concurrent use; make one and
// share it. Its services are Contacts, Invoices, Exports, Operations and
// Events; Batch, Me, RateLimit and OpenAPI are methods of Client itself.
type Client struct {
	// Contacts lists, counts, creates, reads, updates and deletes contacts.
	Contacts *ContactsService
	// Invoices creates, lists and reads invoices, and pays and refunds them.
	Invoices *InvoicesService
	// Exports starts exports, which run as Operations.
	Exports *ExportsService
	// Operations reads long-running operations and waits for them to end.
	Operations *OperationsService
	// Events lists what happened in the organisation, oldest first.
	Events *EventsService

	server     string // base URL, ending in "/"
	host       string
	apiKey     func() string   // a func, so that no way of printing a Client shows the key
	authHeader func() []string // the Authorization header's value, likewise
	keyID      string
	httpClient *http.Client
	answerWait time.Duration // the default client's ResponseHeaderTimeout, from a request's headers (sendTrace); 0 with WithHTTPClient
	logger     *slog.Logger
	onRetry    func(RetryEvent)
	onWait     func(WaitEvent)
	onSlow     func(context.Context, budget.SlowWait) // slowWait, bound once so that a call does not allocate it
	onHeld     func(reason string) <-chan struct{}    // heldBy, likewise
	budgeted   bool
	defaults   callSettings
	state      *budget.State
	cache      *etagCache
}

type clientSettings struct {
	apiKey     string
	baseURL    string
	httpClient *http.Client
	logger     *slog.Logger
	onRetry    func(RetryEvent)
	onWait     func(WaitEvent)
	noBudget   bool
	shared     budgetstore.Store
	cacheSize  int
	allowHTTP  bool
	call       callSettings
}

// callSettings are the settings of one call: the client's defaults with the
// call's RequestOptions applied.
type callSettings struct {
	maxRetries       int
	maxRetryWait     time.Duration
	attemptTimeout   time.Duration
	idempotencyKey   string
	noIdempotencyKey bool
	header           http.Header // the client's (WithHeader given to NewClient)
	callHeader       http.Header // the call's own, each name in place of the client's
	ifMatch          string
	responseInto     **http.Response
	statusPoll       bool         // the client's own GET /v1/rate_limit (pollStatus): past the levels
	own              bool         // the client's own request (its status, its key's identity): the caller's hooks do not hear of it
	middleware       []Middleware // the client's, then the call's; never appended to in place
}

// Option configures a Client in NewClient.
type Option interface {
	applyClient(*clientSettings) error
}

// RequestOption configures one call.
type RequestOption interface {
	applyRequest(*callSettings) error
}

// ClientOrRequestOption is an option that works in both places: given to
// NewClient it sets the default of every call; given to a call it overrides
// that default for the call.
type ClientOrRequestOption interface {
	Option
	RequestOption
}

type clientOption func(*clientSettings) error

func (f clientOption) applyClient(s *clientSettings) error { return f(s) }

type requestOption func(*callSettings) error

func (f requestOption) applyRequest(s *callSettings) error { return f(s) }

type eitherOption func(*callSettings) error

func (f eitherOption) applyClient(s *clientSettings) error { return f(&s.call) }
func (f eitherOption) applyRequest(s *callSettings) error  { return f(s) }

// WithAPIKey sets the API key (bodo_live_… or bodo_test_…). Without it,
// NewClient reads BODO_API_KEY. An empty key is an error, not a fallback:
// it is most often a variable that was not set.
func WithAPIKey(key string) Option {
	return clientOption(func(s *clientSettings) error {
		if key == "" {
			return errors.New("WithAPIKey: the key is empty")
		}
		s.apiKey = key
		return nil
	})
}

// WithBaseURL sets the API's base URL. Without it, NewClient reads
// BODO_BASE_URL, else uses DefaultBaseURL. An empty URL is an error, not
// the default: it is most often a variable that was not set, and the
// default is the production API.
func WithBaseURL(u string) Option {
	return clientOption(func(s *clientSettings) error {
		if u == "" {
			return errors.New("WithBaseURL: the URL is empty")
		}
		s.baseURL = u
		return nil
	})
}

// WithInsecureHTTP allows a plain-http base URL on a host that is not
// loopback. Without it NewClient refuses one, since the API key would cross
// the network in clear text.
func WithInsecureHTTP() Option {
	return clientOption(func(s *clientSettings) error {
		s.allowHTTP = true
		return nil
	})
}

// WithHTTPClient sets the *http.Client that sends the requests. Its Timeout,
// if any, bounds each attempt; prefer a context deadline for the whole call.
// NewClient uses a copy of hc whose CheckRedirect follows no redirect (the
// API never redirects; see ErrRedirected); hc itself is left as it is.
// Without this option a Client uses an *http.Client over a clone of
// http.DefaultTransport with DefaultDialTimeout, DefaultTLSHandshakeTimeout
// and DefaultResponseHeaderTimeout where it sets none, and no timeout on
// the whole exchange; over http.DefaultTransport itself when it is no
// *http.Transport. A
// client given here keeps its own timeouts, none if it has none: an attempt
// it never ends holds a slot of the key's calls in flight until the call's
// context ends (WithAttemptTimeout bounds it). In slow start (a key's
// first call) hung calls hold the key's other calls for
// DefaultResponseHeaderTimeout at most: then slow start ends, and calls go
// up to the adaptive cap, never more than the parallel quota; past it, each
// hung call keeps its slot. An *http.Transport resends by itself a request
// without a body whose reused connection closed without an answer, and on
// HTTP/2 one whose stream was reset or that a GOAWAY cut off; the client
// lets it resend a read on HTTP/1, and holds back the resend of a keyed
// write (a payment) and every HTTP/2 resend and retries it through the
// budget, as one of the call's retries (WithMaxRetries). A write with a
// body that HTTP/2 says was not processed (RST_STREAM REFUSED_STREAM, a
// GOAWAY below its stream) counts as not sent, and is retried. Leave
// HTTP2Config.StrictMaxConcurrentRequests off: with it, a request on a
// full HTTP/2 connection waits for a stream after its last moment, which
// net/http tells no one, and a refusal answered meanwhile does not hold
// it (rule 5 of the budget).
func WithHTTPClient(hc *http.Client) Option {
	return clientOption(func(s *clientSettings) error {
		if hc == nil {
			return errors.New("WithHTTPClient: nil *http.Client")
		}
		s.httpClient = hc
		return nil
	})
}

// WithLogger sets the client's logger. It logs every 429 and 503 at WARN,
// with host, operation, class, code, policy, attempt, wait and request id;
// and at INFO, once per call, a call that has waited 5 s for the budget and
// is still held ("bodo: waiting for the budget"), with host, operation,
// class, held_by (what holds it: the level it waits for longest, such as
// write or key, or in-flight, pace, server-wait, refusal-guard, lockout),
// waited,
// expected_remaining (when the model can tell) and queued_behind (the calls
// waiting behind it for the same level). A call that gets through sooner
// logs nothing. Once per key, at WARN, it logs that the server named more
// rate-limit policies or partitions than the budget models (the first
// Client of the key gives the logger). The default is slog.Default();
// slog.New(slog.DiscardHandler) silences it.
func WithLogger(l *slog.Logger) Option {
	return clientOption(func(s *clientSettings) error {
		if l == nil {
			return errors.New("WithLogger: nil *slog.Logger")
		}
		s.logger = l
		return nil
	})
}

// WithOnRetry calls f before each retry, after the wait is chosen and before
// it starts, from the calling goroutine. Use it to count or export retries;
// f must not block. Given more than once, each f hears of every retry, in
// the order given. It does not hear of the requests the client makes on
// its own (see WithOnWait).
func WithOnRetry(f func(RetryEvent)) Option {
	return clientOption(func(s *clientSettings) error {
		if f == nil {
			return errors.New("WithOnRetry: nil func")
		}
		s.onRetry = then(s.onRetry, f)
		return nil
	})
}

// WithoutBudget turns the budget off for this client: calls are no longer
// paced by the model of the key's levels, the adaptive cap or the FIFO
// queue. For callers who pace themselves. The retry discipline, the lockout
// guard and the refusal of calls that would hit an exhausted quota stay on.
func WithoutBudget() Option {
	return clientOption(func(s *clientSettings) error {
		s.noBudget = true
		return nil
	})
}

// WithOnWait calls f for every attempt that waited for the budget before it
// was sent, with how long and why, and for every attempt the budget held or
// refused and never sent, with the error the call returns (WaitEvent.Err).
// It calls f from the calling goroutine; f must not block. Given more than
// once, each f hears of every wait, in the order given. The requests the
// client makes on its own (the status, when a level that holds calls has
// an old word; the key's identity) are no caller's calls, and f does not
// hear of them.
func WithOnWait(f func(WaitEvent)) Option {
	return clientOption(func(s *clientSettings) error {
		if f == nil {
			return errors.New("WithOnWait: nil func")
		}
		s.onWait = then(s.onWait, f)
		return nil
	})
}

// then is a hook that calls prev, if any, and then f.
func then[E any](prev, f func(E)) func(E) {
	if prev == nil {
		return f
	}
	return func(ev E) { prev(ev); f(ev) }
}

// WithOptions applies opts in order, as one Option: for a package whose
// option installs more than one thing, such as a middleware and an
// OnWait.
func WithOptions(opts ...Option) Option {
	return clientOption(func(s *clientSettings) error {
		for _, o := range opts {
			if o == nil {
				return errors.New("WithOptions: nil Option")
			}
			if err := o.applyClient(s); err != nil {
				return err
			}
		}
		return nil
	})
}

// WithMaxRetries sets how many times a call is retried after its first
// attempt (default 2; 0 turns retries off). Given to NewClient it is the
// default of every call; given to a call it applies to that call.
//
// Every retry counts against n. A retry after a wait the server named
// (Retry-After or retryAfterMs) waits that long; a retry without one (after
// a connection failure, a cut-off answer, or a 429 or 503 that names no
// wait) waits a doubling backoff with full jitter under 1, 2, 4 and 8 s,
// and a call makes at most 4 of those whatever n says: without a hint a client gives up after five
// attempts (the API's contract), and a run of refusals calls for fewer
// calls, not more retries. So WithMaxRetries(10) against a server that
// refuses without a hint stops after 5 attempts, with a *RetryError that
// says why.
func WithMaxRetries(n int) ClientOrRequestOption {
	return eitherOption(func(s *callSettings) error {
		if n < 0 {
			return fmt.Errorf("WithMaxRetries: %d is negative", n)
		}
		s.maxRetries = n
		return nil
	})
}

// WithMaxRetryWait sets the longest wait the client accepts before a retry
// (default DefaultMaxRetryWait, 60 s). When the server asks for longer, the
// call fails at once with the *Error, whose RetryAfter says how long. So
// does a call whose answer asks for more than the budget holds the key
// for, whatever MaxRetryWait allows: 5 minutes for a lockout (the
// contract's lockout) and an hour for any other wait (the longest window
// of a level). It
// bounds the waits the budget holds the key for as well: a lockout, the
// server's wait for every call of the key, a refusal's wait on a level the
// call takes from, and a pause or a refusal's wait on a level that another
// process put in the shared budget.
// A call that would sit one out for longer is not sent: it fails at once
// with a local *Error whose RetryAfter says what is left of the wait.
func WithMaxRetryWait(d time.Duration) ClientOrRequestOption {
	return eitherOption(func(s *callSettings) error {
		if d < 0 {
			return fmt.Errorf("WithMaxRetryWait: %v is negative", d)
		}
		s.maxRetryWait = d
		return nil
	})
}

// WithAttemptTimeout bounds each attempt of a call (0, the default, leaves
// attempts unbounded but for the context). An attempt that times out counts
// as a connection failure: it is retried when that is safe.
func WithAttemptTimeout(d time.Duration) ClientOrRequestOption {
	return eitherOption(func(s *callSettings) error {
		if d < 0 {
			return fmt.Errorf("WithAttemptTimeout: %v is negative", d)
		}
		s.attemptTimeout = d
		return nil
	})
}

// WithHeader adds a header to the requests. Given to a call, the call's
// values of that name replace the client's. Authorization, Idempotency-Key,
// Bodo-Version, User-Agent and Accept are the client's own and cannot be set
// this way (use WithIdempotencyKey for the key). A name that is no token or
// a value with a control character (CR, LF, NUL; a tab is fine) is refused:
// by NewClient, or by the call before it is sent.
func WithHeader(name, value string) ClientOrRequestOption {
	return headerOption{name, value}
}

// headerOption is WithHeader: into the client's headers, or the call's own.
type headerOption struct{ name, value string }

func (o headerOption) applyClient(s *clientSettings) error {
	return o.addTo(&s.call.header)
}

func (o headerOption) applyRequest(s *callSettings) error { return o.addTo(&s.callHeader) }

// addTo adds the header to a copy of *h, which settings may share.
func (o headerOption) addTo(h *http.Header) error {
	switch http.CanonicalHeaderKey(o.name) {
	case "Authorization", "Idempotency-Key", "Bodo-Version", "User-Agent", "Accept":
		return fmt.Errorf("WithHeader: %s is set by the client", o.name)
	}
	if why := cmp.Or(headerName(o.name), headerValue(o.value)); why != "" {
		return fmt.Errorf("WithHeader(%q): %s", o.name, why)
	}
	*h = h.Clone()
	if *h == nil {
		*h = http.Header{}
	}
	h.Add(o.name, o.value)
	return nil
}

// WithIdempotencyKey sets the Idempotency-Key of a POST or PATCH (1–255
// ASCII characters, visible or spaces between them: what a header carries
// as it is). Without it the client makes a random UUID per call. Either way
// the key stays the same on every retry of the call. Another key fails the
// call before it is sent.
func WithIdempotencyKey(key string) RequestOption {
	return requestOption(func(s *callSettings) error {
		if len(key) < 1 || len(key) > 255 {
			return fmt.Errorf("WithIdempotencyKey: a key has 1 to 255 characters, not %d", len(key))
		}
		if !fieldContent(key) {
			return fmt.Errorf("WithIdempotencyKey: %q holds a control character or one beyond ASCII, or begins or ends with a space, which a header would not carry as it is", key)
		}
		s.idempotencyKey = key
		s.noIdempotencyKey = false
		return nil
	})
}

// WithoutIdempotencyKey sends a POST or PATCH without an Idempotency-Key.
// Such a write is not retried when its outcome is unknown (a connection
// that failed after sending, a context that ended while it was out, a 503
// or 409 that is not the API's refusal), since the client cannot know
// whether it took effect (ErrOutcomeUnknown). Money actions
// (Invoices.Pay, Invoices.Refund) require a key: given this option they
// are not sent and fail with a local *Error, 400 IDEMPOTENCY_KEY_REQUIRED
// (errors.Is(err, ErrBadRequest)).
func WithoutIdempotencyKey() RequestOption {
	return requestOption(func(s *callSettings) error {
		s.idempotencyKey = ""
		s.noIdempotencyKey = true
		return nil
	})
}

// NewClient makes a Client. A missing API key, one that cannot be sent in a
// header (white space, a control character, a character beyond ASCII), a
// malformed base URL or an option that can never be sent is an error. Its
// requests go through the *http.Client of WithHTTPClient, else one with the
// default timeouts (DefaultDialTimeout, DefaultTLSHandshakeTimeout,
// DefaultResponseHeaderTimeout) where http.DefaultTransport sets none;
// neither follows redirects.
func NewClient(opts ...Option) (*Client, error) {
	s := clientSettings{
		apiKey:  os.Getenv("BODO_API_KEY"),
		baseURL: os.Getenv("BODO_BASE_URL"),
		call: callSettings{
			maxRetries:   DefaultMaxRetries,
			maxRetryWait: DefaultMaxRetryWait,
		},
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyClient(&s); err != nil {
			return nil, badInput("", false, err.Error(), err)
		}
	}
	if s.apiKey == "" {
		return nil, badInput("", false, "no API key: pass WithAPIKey or set BODO_API_KEY", nil)
	}
	if !visibleASCII(s.apiKey) {
		return nil, badInput("", false, "the API key contains white space, a control character (such as NUL) or a character beyond ASCII, which cannot be sent in a header", nil)
	}
	if s.baseURL == "" {
		s.baseURL = DefaultBaseURL
	}
	u, err := parseBaseURL(s.baseURL, s.allowHTTP)
	if err != nil {
		return nil, badInput("", false, err.Error(), errors.Unwrap(err))
	}
	var answerWait time.Duration
	if s.httpClient == nil {
		s.httpClient = defaultHTTPClient()
		if t, ok := s.httpClient.Transport.(*http.Transport); ok {
			answerWait = t.ResponseHeaderTimeout
		}
	}
	s.httpClient = withoutRedirects(s.httpClient)
	if s.logger == nil {
		s.logger = slog.Default()
	}
	c := &Client{
		server:     u.String(),
		host:       u.Host,
		apiKey:     secretFunc(s.apiKey),
		authHeader: secretHeader("Bearer " + s.apiKey),
		keyID:      budget.KeyHash(s.apiKey)[:keyIDLen],
		httpClient: s.httpClient,
		answerWait: answerWait,
		logger:     s.logger,
		onRetry:    s.onRetry,
		onWait:     s.onWait,
		budgeted:   !s.noBudget,
		defaults:   s.call,
		cache:      newETagCache(s.cacheSize),
		state:      budget.For(budgetHost(u), s.apiKey),
	}
	if s.shared != nil {
		c.state.UseStore(s.shared, sharedKey(budgetHost(u), s.apiKey), s.logger)
	} else {
		c.state.UseLogger(s.logger) // for what the budget logs once (its bounds)
	}
	c.onSlow = c.slowWait
	c.onHeld = c.heldBy
	c.initServices()
	return c, nil
}

// keyIDLen is the length of a KeyID: 16 hex digits, 64 bits of the hash.
const keyIDLen = 16

// KeyID names the client's API key without revealing it: the first 16 hex
// digits of the key's SHA-256, the hash by which clients of one process
// share a key's budget. Clients of the same key have the same KeyID; it
// tells keys apart in metrics and logs, where the key must never be.
func (c *Client) KeyID() string {
	if c == nil {
		return ""
	}
	return c.keyID
}

// String describes the client without its API key.
func (c *Client) String() string {
	if !c.made() {
		return "bodo.Client{not made by NewClient}"
	}
	return fmt.Sprintf("bodo.Client{baseURL: %s, apiKey: %s}", c.server, redactKey(c.apiKey()))
}

// made reports whether c came from NewClient: a nil or zero Client has no
// key, server or budget, and its calls fail with an error.
func (c *Client) made() bool { return c != nil && c.apiKey != nil }

// GoString is String, so that %#v does not print the API key either.
func (c *Client) GoString() string { return c.String() }

// LogValue keeps the API key out of structured logs.
func (c *Client) LogValue() slog.Value {
	if !c.made() {
		return slog.StringValue(c.String())
	}
	return slog.GroupValue(slog.String("base_url", c.server), slog.String("api_key", redactKey(c.apiKey())))
}

// secretFunc returns the key from a closure: fmt prints a func as an
// address whatever the verb, so a Client printed in full shows no key.
func secretFunc(key string) func() string { return func() string { return key } }

// secretHeader is secretFunc for a header value, built once.
func secretHeader(v string) func() []string {
	h := []string{v}
	return func() []string { return h }
}

var (
	bodoVersionHeader = []string{APIVersion}
	userAgentHeader   = []string{"bodo-go/" + Version}
	acceptHeader      = []string{"application/json, application/problem+json"}
)

// redactKey shows a key's kind and its last four characters only.
func redactKey(k string) string {
	prefix := "bodo_"
	for _, p := range []string{"bodo_live_", "bodo_test_"} {
		if strings.HasPrefix(k, p) {
			prefix = p
		}
	}
	if len(k) < len(prefix)+12 {
		return prefix + "[REDACTED]"
	}
	return prefix + "[REDACTED]" + k[len(k)-4:]
}

func parseBaseURL(raw string, allowHTTP bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("base URL %q: %w", raw, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("base URL %q: the scheme must be https or http", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("base URL %q has no host", raw)
	}
	if u.Scheme == "http" && !allowHTTP && !isLoopback(u.Hostname()) {
		return nil, fmt.Errorf("base URL %q: plain http is only allowed to a loopback host; use https or WithInsecureHTTP", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("base URL %q must not carry user info, a query or a fragment", raw)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// budgetHost names the server of u for the key's budget: the host in lower
// case, with the port only when it is not the scheme's default, so that
// api.example.com, API.example.com and api.example.com:443 share one budget.
func budgetHost(u *url.URL) string {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" || u.Scheme == "https" && port == "443" || u.Scheme == "http" && port == "80" {
		return host
	}
	return net.JoinHostPort(host, port)
}

// isLoopback reports whether host (without port) is a loopback address or
// localhost.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// call is one call in progress: its operation, settings and the prepared
// request that every attempt clones.
type call struct {
	op       *ops.Operation
	settings callSettings
	req      *http.Request
	body     []byte           // the request body, replayed byte for byte on each attempt
	bc       budget.Call      // the call as the key's budget sees it: cost, demand, its place in the queues
	parts    []*ops.Operation // a batch's parts, in order

	firstTrace sendTrace // the first attempt's (see sendTrace)
	traced     bool      // firstTrace is taken
}

// do runs one call of op: builds the request, sends it through the retry
// discipline and decodes a 2xx answer into out (nil for no content). Every
// service method ends here.
func (c *Client) do(ctx context.Context, op *ops.Operation, build func(server string) (*http.Request, error), out any, opts []RequestOption) error {
	if ctx == nil {
		return badInput(op.ID, true, "nil context: pass context.Background() or the caller's", nil)
	}
	if !c.made() {
		return badInput(op.ID, true, "the Client was not made by NewClient: a nil or zero Client (or service) has no key or server", nil)
	}
	cl, err := c.newCall(op, build, opts)
	if err != nil {
		return err
	}
	if c.budgeted && !cl.settings.own && c.state.WantsIdentity(time.Now()) {
		defer func() { go c.learnIdentity() }() // after the call: a key's first call goes alone (slow start), and it is the caller's
	}
	var cacheKey string
	if c.cache != nil {
		cacheKey = cl.req.URL.RequestURI()
	}
	cached, hit := cacheEntry{}, false
	if op.Conditional {
		if cached, hit = c.cache.get(cacheKey); hit && cl.req.Header.Get("If-None-Match") == "" {
			cl.req.Header.Set("If-None-Match", cached.etag)
		}
	}
	resp, body, err := c.send(ctx, cl)
	if err != nil {
		if dst := cl.settings.responseInto; dst != nil {
			*dst = nil
			if e := (*Error)(nil); errors.As(err, &e) && e.Response != nil {
				*dst = e.Response
			}
		}
		if hit {
			c.cache.dropRefused(cacheKey, err)
		}
		return err
	}
	if cl.settings.responseInto != nil {
		resp.Request = redactedRequest(resp.Request)
		*cl.settings.responseInto = resp
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && !op.Conditional:
		return invalidResponse(op.ID, resp, nil, errors.New("a 304 Not Modified to an operation that is never conditional"))
	case op.Method == http.MethodPatch || op.Method == http.MethodDelete:
		c.cache.drop(cacheKey)
	case resp.StatusCode == http.StatusNotModified:
		c.settleEgress(cl, 0)
		if !hit || cached.etag != cl.req.Header.Get("If-None-Match") {
			return notModified(op.ID, resp)
		}
		if etag, ok := parseETag(resp.Header.Get("ETag")); ok && !weakMatch(etag, cached.etag) {
			// It names another representation than the one cached, whose
			// body is then not the current one: asked again, without it.
			c.cache.drop(cacheKey)
			return c.do(ctx, op, build, out, opts)
		}
		if out == nil {
			return nil
		}
		return decodeBytes(op.ID, resp, cached.body, out)
	}
	if out == nil {
		return nil
	}
	if resp.StatusCode == http.StatusNoContent || string(bytes.TrimSpace(body)) == "null" {
		return invalidResponse(op.ID, resp, body, errors.New("no content where the operation answers with one"))
	}
	if err := decodeBytes(op.ID, resp, body, out); err != nil {
		return err
	}
	if op.Conditional && c.cache != nil {
		if etag, ok := parseETag(resp.Header.Get("ETag")); ok {
			c.cache.put(cacheKey, etag, body)
		}
	}
	switch {
	case op == ops.GetMe:
		if me, ok := out.(*Me); ok && c.budgeted {
			c.state.SetIdentity(me.Principal.ID, me.Organization.ID)
		}
	case op == ops.GetRateLimit:
		if st, ok := out.(*RateLimitStatus); ok && c.budgeted {
			levels := make([]budget.LevelStatus, len(st.Policies))
			for i, p := range st.Policies {
				levels[i] = budget.LevelStatus{Name: p.Name, Remaining: float64(p.Remaining), Reset: p.Reset, Quota: float64(p.Quota), Window: p.Window}
				if p.Capacity != p.Quota { // the server said: a burst
					levels[i].Capacity = float64(p.Capacity)
				}
			}
			c.state.ObserveStatus(&cl.bc, levels)
			c.state.ObserveKeyStatus(st.LockedUntil.Or(time.Time{}), st.RejectionsLast60s)
		}
	case op.Egress == ops.EgressPage:
		c.settleEgress(cl, pageLen(out))
	case op == ops.Batch:
		c.settleEgress(cl, batchRecords(cl.parts, out))
	}
	return nil
}

// learnIdentity asks GET /v1/me whom the client's key belongs to (one
// point, once per key and process), so that the principal and org levels
// are split among the keys of this process that share them (do records the
// answer). It runs once the call that found it due has ended, beside the
// calls that follow, bounded as the status request is; a failure is asked
// again a minute later.
func (c *Client) learnIdentity() {
	failed := true
	defer func() {
		if p := recover(); p != nil {
			c.ownPanicked("identity", p)
		}
		if failed {
			c.state.IdentityFailed(time.Now())
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), statusPollTimeout)
	defer cancel()
	_, err := c.Me(ctx, WithMaxRetries(0), requestOption(func(s *callSettings) error {
		s.own = true
		return nil
	}))
	failed = err != nil
}

// notModified is the error of a 304 the client has no cached answer for
// (the caller sent If-None-Match itself).
func notModified(operation string, resp *http.Response) *Error {
	resp.Request = redactedRequest(resp.Request)
	return &Error{
		Operation: operation,
		Status:    http.StatusNotModified,
		Title:     "Not Modified",
		Detail:    "the resource has not changed since the ETag sent in If-None-Match",
		RequestID: resp.Header.Get("Request-Id"),
		Request:   resp.Request,
		Response:  resp,
	}
}

// settleEgress gives back the egress records a read reserved beyond the
// records it got: a list returns fewer than its limit, a 304 none.
func (c *Client) settleEgress(cl *call, records int) {
	if !c.budgeted {
		return
	}
	for _, d := range cl.bc.Demand {
		if d.Level == budget.Egress {
			c.state.Settle(&cl.bc, budget.Egress, d.Amount-float64(records))
		}
	}
}

// batchRecords counts the records a batch's answer returned for the egress
// level: the page length of every list part answered 2xx and one for every
// other read of one record answered 2xx. A part that failed, or answered
// 304, returned none.
func batchRecords(parts []*ops.Operation, out any) int {
	res, ok := out.(*BatchResult)
	if !ok {
		return 0
	}
	n := 0
	for i, r := range res.Responses {
		if i >= len(parts) || r.Status < 200 || r.Status > 299 {
			continue
		}
		switch parts[i].Egress {
		case ops.EgressOne:
			n++
		case ops.EgressPage:
			var page struct{ Data []json.RawMessage }
			if body, ok := r.Body.Get(); ok && json.Unmarshal(body, &page) == nil {
				n += len(page.Data)
			}
		}
	}
	return n
}

// pageLen is the number of records in a list answer: the length of its Data
// field.
func pageLen(out any) int {
	v := reflect.ValueOf(out)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return 0
	}
	if f := v.FieldByName("Data"); f.IsValid() && f.Kind() == reflect.Slice {
		return f.Len()
	}
	return 0
}

// newCall applies the options, builds the request and fixes what every
// attempt of the call sends: headers, Idempotency-Key and body bytes.
func (c *Client) newCall(op *ops.Operation, build func(string) (*http.Request, error), opts []RequestOption) (*call, error) {
	s := c.defaults
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyRequest(&s); err != nil {
			return nil, badInput(op.ID, true, err.Error(), err)
		}
	}
	req, err := build(c.server)
	if err != nil {
		return nil, badInput(op.ID, true, "building the request: "+err.Error(), err)
	}
	var body []byte
	if req.Body != nil {
		body, err = io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, badInput(op.ID, true, "reading the request body: "+err.Error(), err)
		}
	}
	for name, values := range s.header {
		req.Header[name] = values
	}
	for name, values := range s.callHeader {
		req.Header[name] = values
	}
	if s.ifMatch != "" {
		req.Header.Set("If-Match", s.ifMatch)
	}
	// The fixed headers share read-only slices: net/http never changes a
	// request's headers, and these are set on every call.
	req.Header["Authorization"] = c.authHeader()
	req.Header["Bodo-Version"] = bodoVersionHeader
	req.Header["User-Agent"] = userAgentHeader
	req.Header["Accept"] = acceptHeader
	ownKey := false // the caller chose the Idempotency-Key
	if req.Method == http.MethodPost || req.Method == http.MethodPatch {
		switch {
		case s.noIdempotencyKey && op.KeyRequired:
			return nil, &Error{
				Operation: op.ID,
				Status:    http.StatusBadRequest,
				Code:      CodeIdempotencyKeyRequired,
				Title:     "Idempotency-Key required",
				Detail:    "a money action requires an Idempotency-Key, which the client makes unless told not to: drop WithoutIdempotencyKey, or pass WithIdempotencyKey",
				Local:     true,
				Request:   redactedRequest(req),
			}
		case s.noIdempotencyKey:
			req.Header.Del("Idempotency-Key")
		default:
			ownKey = s.idempotencyKey != ""
			if !ownKey {
				s.idempotencyKey = uuid.NewString()
			}
			req.Header.Set("Idempotency-Key", s.idempotencyKey)
		}
	}
	cl := &call{op: op, settings: s, req: req, body: body}
	cl.bc = budget.Call{Op: op.ID, Target: req.Method + " " + req.URL.Path, Budgeted: c.budgeted, PastLevels: s.statusPoll, Status: op == ops.GetRateLimit, OnSlow: c.onSlow,
		MaxHold: max(s.maxRetryWait, time.Nanosecond), OwnKey: ownKey} // MaxRetryWait(0): no server's wait is sat out
	if !s.statusPoll {
		cl.bc.OnHeld = c.onHeld // the status request would wait for itself
	}
	if op == ops.Batch {
		if err := prepareBatch(cl); err != nil {
			return nil, badInput(op.ID, true, err.Error(), err)
		}
	} else {
		var q url.Values
		if req.URL.RawQuery != "" {
			q = req.URL.Query()
		}
		cl.bc.Cost = float64(op.CostFor(q.Get))
		cl.bc.Demand = budget.DemandOf(op, q)
	}
	return cl, nil
}

// prepareBatch gives every write part without an idempotencyKey a key of its
// own (fixed once, so every retry sends the same bytes) and sums the parts'
// costs and demands. With the batch's own Idempotency-Key, a part's key is
// derived from it and the part's place (a name-based UUID), so that the
// same batch sent again with the same key is the same request, which the
// server replays.
func prepareBatch(cl *call) error {
	var br BatchRequest
	if err := json.Unmarshal(cl.body, &br); err != nil {
		return err
	}
	if n := len(br.Requests); n < 1 || n > maxBatchParts {
		return fmt.Errorf("a batch has 1 to %d parts, not %d", maxBatchParts, n)
	}
	batchKey := cl.req.Header.Get("Idempotency-Key")
	cl.bc.Cost, cl.bc.Demand = 0, nil
	for i := range br.Requests {
		part := &br.Requests[i]
		method := string(part.Method)
		if key, ok := part.IdempotencyKey.Get(); ok && (key == "" || utf8.RuneCountInString(key) > 255) {
			return fmt.Errorf("part %d: an idempotencyKey has 1 to 255 characters, not %d", i, utf8.RuneCountInString(key))
		}
		if (method == http.MethodPost || method == http.MethodPatch) && !part.IdempotencyKey.IsSet() {
			key := uuid.NewString()
			if batchKey != "" {
				key = uuid.NewSHA1(batchPartKeys, fmt.Appendf(nil, "%s/%d", batchKey, i)).String()
			}
			part.IdempotencyKey = String(key)
		}
		op, q, err := partOperation(method, part.Path)
		if err != nil {
			return fmt.Errorf("part %d: %s %q: %w", i, method, part.Path, err)
		}
		cl.parts = append(cl.parts, op)
		cl.bc.Cost += float64(op.CostFor(q.Get))
		cl.bc.Demand = budget.AddDemand(cl.bc.Demand, budget.DemandOf(op, q))
	}
	body, err := json.Marshal(br)
	if err != nil {
		return err
	}
	cl.body = body
	cl.req.ContentLength = int64(len(body))
	return nil
}

// maxBatchParts is the most parts a batch has.
const maxBatchParts = 20

// batchPartKeys is the namespace of the part keys prepareBatch derives from
// a batch's Idempotency-Key.
var batchPartKeys = uuid.MustParse("6f1c9a52-3a0e-4d8b-9c47-0b1d2e5f7a10")

// newAttempt returns a fresh request for one attempt, with the call's body.
// It has no GetBody: net/http resends a request it can rewind, with an
// Idempotency-Key, by itself when the reused connection it went on closes
// without an answer, and such a resend would pass the budget unseen. Every
// attempt is the budget's: the call's own retry sends it again. A request
// without a body needs no rewinding; sendTrace.gotConn holds back its resend.
func (cl *call) newAttempt(ctx context.Context) *http.Request {
	r := cl.req.WithContext(ctx) // headers and URL are shared, read-only
	r.GetBody = nil
	if cl.body != nil {
		r.Body = io.NopCloser(bytes.NewReader(cl.body))
		r.ContentLength = int64(len(cl.body))
	}
	return r
}

// maxSuccessBody caps how much of a 2xx answer is read; a longer one is an
// error.
const maxSuccessBody = 32 << 20

// decodeBytes decodes a 2xx answer's body into out.
func decodeBytes(operation string, resp *http.Response, body []byte, out any) error {
	var err error
	if raw, ok := out.(*json.RawMessage); ok {
		if !json.Valid(body) {
			err = errors.New("the body is not JSON")
		}
		*raw = body
	} else {
		err = json.Unmarshal(body, out)
	}
	if err != nil {
		return invalidResponse(operation, resp, body, err)
	}
	return nil
}

func invalidResponse(operation string, resp *http.Response, body []byte, err error) *Error {
	resp.Request = redactedRequest(resp.Request)
	if len(body) > maxProblemBody {
		body = bytes.Clone(body[:maxProblemBody]) // an error keeps no more of a body than a problem's, nor the rest alive
	}
	return &Error{
		cause:     err,
		Operation: operation,
		Status:    resp.StatusCode,
		Title:     "Invalid response",
		Detail:    fmt.Sprintf("the %d answer could not be read: %v", resp.StatusCode, err),
		RequestID: resp.Header.Get("Request-Id"),
		Body:      body,
		Request:   resp.Request,
		Response:  resp,
	}
}
