package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// The API keys the sandbox knows. All three belong to the one organisation
// of the sandbox.
const (
	// TestKey is a key of principal A (a user).
	TestKey = "bodo_test_sandbox0000000000000000"
	// SecondKey is another key of principal A: it has its own key, write,
	// parallel, delete and quota levels but shares A's principal level.
	SecondKey = "bodo_test_sandbox1111111111111111"
	// ForeignKey is a key of principal B (a service account) in the same
	// organisation; WithForeignLoad spends org points in its name.
	ForeignKey = "bodo_test_sandbox2222222222222222"
)

// APIVersion is the version the sandbox implements and echoes in
// Bodo-Version.
const APIVersion = "2026-11-01"

// maxBody is the largest request body the sandbox reads.
const maxBody = 1 << 20

// Limits are the levels of bodo-api.md. Zero (or negative) fields take the
// value of DefaultLimits, so tests shrink only what they need.
//
// Shape and Shapes choose how the key, write, principal, org (the org
// level and each key's share of it) and delete levels count; delete-day and
// egress are always fixed windows. A token bucket holds its capacity
// (KeyCapacity for key, the quota for the others); the window shapes hold
// their quota, and KeyCapacity is then ignored.
type Limits struct {
	Window          time.Duration // the per-minute window of key, write, principal, org and delete
	KeyQuota        int           // points per Window refilling the key bucket
	KeyCapacity     int           // what the key bucket holds
	WriteQuota      int           // writes per Window
	Parallel        int           // calls in flight per key
	PrincipalQuota  int           // points per Window over all keys of a principal
	OrgQuota        int           // points per Window over all keys of the org
	OrgKeyShare     float64       // the share of OrgQuota one key may use per Window
	DeleteQuota     int           // deletes per Window
	DeleteDayQuota  int           // deletes per DayLength
	DayLength       time.Duration // fixed windows from the server's start
	EgressQuota     int           // records read per EgressWindow
	EgressWindow    time.Duration // fixed windows from the server's start
	LockoutRefusals int           // more refusals than this in LockoutWindow lock the key
	LockoutWindow   time.Duration // the sliding window refusals are counted in
	LockoutDuration time.Duration // how long a lockout lasts
	ExportDuration  time.Duration // how long an export runs
	// Shape is the shape of key, write, principal, org and delete; zero
	// means TokenBucket.
	Shape Shape
	// Shapes overrides Shape per policy name ("key", "write",
	// "principal", "org", "delete"); other names are ignored.
	Shapes map[string]Shape
}

// DefaultLimits returns the limits of bodo-api.md.
func DefaultLimits() Limits {
	return Limits{
		Window:          time.Minute,
		KeyQuota:        300,
		KeyCapacity:     600,
		WriteQuota:      60,
		Parallel:        6,
		PrincipalQuota:  1200,
		OrgQuota:        3000,
		OrgKeyShare:     0.5,
		DeleteQuota:     10,
		DeleteDayQuota:  300,
		DayLength:       24 * time.Hour,
		EgressQuota:     10000,
		EgressWindow:    time.Hour,
		LockoutRefusals: 50,
		LockoutWindow:   60 * time.Second,
		LockoutDuration: 5 * time.Minute,
		ExportDuration:  3 * time.Second,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	or := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	orDur := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	orDur(&l.Window, d.Window)
	or(&l.KeyQuota, d.KeyQuota)
	or(&l.KeyCapacity, d.KeyCapacity)
	or(&l.WriteQuota, d.WriteQuota)
	or(&l.Parallel, d.Parallel)
	or(&l.PrincipalQuota, d.PrincipalQuota)
	or(&l.OrgQuota, d.OrgQuota)
	if l.OrgKeyShare <= 0 || l.OrgKeyShare > 1 {
		l.OrgKeyShare = d.OrgKeyShare
	}
	or(&l.DeleteQuota, d.DeleteQuota)
	or(&l.DeleteDayQuota, d.DeleteDayQuota)
	orDur(&l.DayLength, d.DayLength)
	or(&l.EgressQuota, d.EgressQuota)
	orDur(&l.EgressWindow, d.EgressWindow)
	or(&l.LockoutRefusals, d.LockoutRefusals)
	orDur(&l.LockoutWindow, d.LockoutWindow)
	orDur(&l.LockoutDuration, d.LockoutDuration)
	orDur(&l.ExportDuration, d.ExportDuration)
	if l.Shape == "" {
		l.Shape = TokenBucket
	}
	if !l.Shape.valid() {
		panic(fmt.Sprintf("sandbox: unknown limiter shape %q", l.Shape))
	}
	for name, sh := range l.Shapes {
		if sh != "" && !sh.valid() {
			panic(fmt.Sprintf("sandbox: unknown limiter shape %q for %q", sh, name))
		}
	}
	return l
}

type config struct {
	limits      Limits
	faults      func(*http.Request) Fault
	overload    func() Fault // consulted when faults injects no OVERLOADED answer
	foreign     float64
	greedyEvery time.Duration        // WithGreedyForeignLoadEvery: foreign is taken this often, when it fits; 0 when not greedy
	drain       bool                 // WithDrainingForeignLoadEvery: what does not fit is taken in part
	late        func() time.Duration // WithLateForeignLoad's; nil for none
	latency     time.Duration
	jitter      func() (up, down time.Duration) // WithJitteredLatency's; nil for none
	maxUp       time.Duration                   // the longest way to the server jitter draws
	extras      []ExtraPolicy
	noisy       bool
	noiseSeed   uint64
	seed        uint64  // WithSeed's: mixed into every seeded option's own seed
	factor      float64 // WithLimitFactor; 1 by default
	// narrowestAll is WithNarrowestOfAll.
	narrowestAll bool
	// contradicted is WithContradictedHeaders.
	contradicted bool
	// gateway is WithGateway's; nil for none.
	gateway  *Gateway
	validate *bool // nil: when testing.Testing()
}

// Option configures New.
type Option func(*config)

// WithLimits replaces DefaultLimits; zero fields keep their default.
func WithLimits(l Limits) Option { return func(c *config) { c.limits = l } }

// WithFaults installs f, consulted once on every HTTP request (not per batch
// part) before anything else happens.
func WithFaults(f func(r *http.Request) Fault) Option { return func(c *config) { c.faults = f } }

// WithForeignLoad makes ForeignKey spend org points continuously at this
// rate. It is accounted lazily and bound by no other level. A token-bucket
// org is drained at this rate (the drain takes at most what the bucket
// holds); a window-shaped org counts rate × window points of it in every
// window, as if the stream had always run, so that it leaves the other keys
// quota − rate × window.
func WithForeignLoad(pointsPerSecond float64) Option {
	return func(c *config) { c.foreign = max(pointsPerSecond, 0) }
}

// WithGreedyForeignLoad makes ForeignKey take pointsPerSecond org points
// at once, once a second, whenever they fit, as a busy key of the same
// organisation would: it competes for what the org frees, where
// WithForeignLoad's load is set aside in advance. What does not fit in its
// second is not taken later.
func WithGreedyForeignLoad(pointsPerSecond float64) Option {
	return WithGreedyForeignLoadEvery(pointsPerSecond, time.Second)
}

// WithGreedyForeignLoadEvery is WithGreedyForeignLoad with ForeignKey
// taking what its rate brings in every (a second when every <= 0) at once
// each time, when it fits: the finer the grain, the more often it meets
// a call of TestKey's for what the org frees.
func WithGreedyForeignLoadEvery(pointsPerSecond float64, every time.Duration) Option {
	if every <= 0 {
		every = time.Second
	}
	return func(c *config) { c.foreign, c.greedyEvery, c.drain = max(pointsPerSecond, 0), every, false }
}

// WithDrainingForeignLoadEvery is WithGreedyForeignLoadEvery with
// ForeignKey taking as much of what its rate brings in every as the org
// holds, where a greedy load takes all of it or nothing: whenever the org
// holds less, it leaves less than a point.
func WithDrainingForeignLoadEvery(pointsPerSecond float64, every time.Duration) Option {
	greedy := WithGreedyForeignLoadEvery(pointsPerSecond, every)
	return func(c *config) { greedy(c); c.drain = true }
}

// WithLateForeignLoad makes each take of a greedy or draining foreign load
// land a pseudo-random time of up to late (seeded by seed, and less than
// the load's interval) after its tick, as a timer fires on a busy machine.
// A take that lands less late than the take a window before it finds that
// take still in a sliding log, and the org falls by a chunk for a moment.
func WithLateForeignLoad(late time.Duration, seed uint64) Option {
	return func(c *config) {
		if late <= 0 {
			c.late = nil
			return
		}
		var rng *rand.Rand
		c.late = func() time.Duration {
			if rng == nil { // at the first take, when WithSeed is in
				rng = rand.New(rand.NewPCG(seed^c.seed, 0x6c617465))
			}
			return time.Duration(rng.Int64N(int64(late)))
		}
	}
}

// WithSeed varies the pseudo-random choices of the seeded options
// (WithNoisyHeaders, WithLateForeignLoad, the overloaded profile's
// OVERLOADED answers) by seed, in whichever order the options come: each
// draws from its own seed mixed with this one. Without it, or with 0, every
// server of a profile makes the same choices.
func WithSeed(seed uint64) Option {
	return func(c *config) { c.seed = seed }
}

// MaxLimitFactor is the largest factor WithLimitFactor takes.
const MaxLimitFactor = 1e6

// WithLimitFactor multiplies every quota and capacity of the server by f
// (rounded, at least 1), whatever sets them (WithLimits, a Profile,
// WithExtraPolicies) and in whatever order the options come: points,
// writes, parallel calls, deletes, records read, and WithForeignLoad's
// rate. Windows, the lockout and exports keep their durations. New panics
// unless 0 < f <= MaxLimitFactor.
func WithLimitFactor(f float64) Option { return func(c *config) { c.factor = f } }

// scaled is l with every quota and capacity multiplied by f.
func (l Limits) scaled(f float64) Limits {
	for _, n := range []*int{&l.KeyQuota, &l.KeyCapacity, &l.WriteQuota, &l.Parallel, &l.PrincipalQuota, &l.OrgQuota,
		&l.DeleteQuota, &l.DeleteDayQuota, &l.EgressQuota} {
		*n = scaleQuota(*n, f)
	}
	return l
}

// scaleQuota is a positive n times f, rounded, at least 1.
func scaleQuota(n int, f float64) int {
	if n <= 0 {
		return n
	}
	return max(int(math.Round(float64(n)*f)), 1)
}

// WithLatency makes every answer take at least d; the call stays in flight
// meanwhile.
func WithLatency(d time.Duration) Option { return func(c *config) { c.latency = d } }

// KeyStats is what the sandbox saw of one API key.
type KeyStats struct {
	Requests       int            // every request seen for the key
	Accepted       int            // answered with a status other than 429 and 503
	PointsAccepted int            // points charged
	Refusals       map[string]int // problem code -> count, for 429 and 503 answers
	Lockouts       int            // how many times the key was locked
	InFlight       int            // requests inside the handler now, refused ones included
	MaxInFlight    int            // the highest InFlight ever seen
	Writes         int            // writes committed, replays not included
	// EarlyRequests counts requests that arrived before a wait announced
	// to the key was over (they are served as any other). An OVERLOADED
	// answer, a lockout answer and a parallel refusal announce a wait for
	// every request of the key; any other refusal one for the requests that
	// take from the refusing level (and partition). A wait ends at the
	// answer's time plus its retryAfterMs.
	EarlyRequests int
	// EarlyByPolicy counts the same by the wait a request came early for:
	// the refusal's policy, or OVERLOADED. A request early for several
	// counts once for each.
	EarlyByPolicy map[string]int
	// FirstEarly describes the first few early requests (at most
	// maxEarlyKept): when each arrived, what it asked, and the wait.
	FirstEarly []string
	// GatewayRefused counts the key's requests that WithGateway's gateway
	// refused; they never reached the server and are not in Requests.
	GatewayRefused int
}

// maxEarlyKept bounds KeyStats.FirstEarly.
const maxEarlyKept = 8

// Server is the in-memory bodo API. Its zero value is not usable; call New.
type Server struct {
	cfg          config
	lim          Limits
	extras       []ExtraPolicy // checked, defaults filled in
	policyHeader []string      // RateLimit-Policy when it is the same for every answer
	mux          *http.ServeMux
	routes       map[string]*route // by ServeMux pattern
	gate         *gatewayBucket    // WithGateway's; nil for none
	ids          ulids

	mu     sync.Mutex
	origin time.Time // fixed windows count from here
	keys   map[string]*apiKey
	orgID  string
	org    limiter
	noise  *noise // nil unless WithNoisyHeaders
	store

	violationsMu sync.Mutex
	violations   []string // of openapi.json, see WithValidation
}

type principal struct {
	id, kind, name string
	lim            limiter
}

type apiKey struct {
	id        string
	principal *principal
	key       limiter
	write     limiter
	del       limiter
	share     limiter // this key's share of the org
	deleteDay *fixedWindow
	egress    *fixedWindow
	extra     []map[string]limiter // per extra policy, by partition
	parallel  int                  // admitted calls in flight

	// Waits announced to the key, by policy: for every request, and for
	// the requests that take from a level (by waitID).
	waitAll   map[string][]announced
	waitLevel map[string][]announced

	lockedUntil time.Time
	countFrom   time.Time // refusals before this do not count towards a lockout
	refusals    []refusalMark

	idem  map[string]*idemEntry
	stats KeyStats
}

type refusalMark struct {
	at      time.Time
	lockout bool
}

// New returns a sandbox with one organisation, principals A and B, the keys
// TestKey, SecondKey (A) and ForeignKey (B), and no data.
func New(opts ...Option) *Server {
	cfg := config{limits: DefaultLimits(), factor: 1}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.validate != nil && *cfg.validate && checker.Load() == nil {
		panic("sandbox: WithValidation(true) needs a Checker: import github.com/bodo-app/bodo-go/internal/sandbox/speccheck")
	}
	now := time.Now()
	s := &Server{cfg: cfg, lim: cfg.limits.withDefaults(), origin: now.Truncate(time.Second)}
	if f := cfg.factor; f != 1 {
		if !(f > 0 && f <= MaxLimitFactor) {
			panic(fmt.Sprintf("sandbox: WithLimitFactor(%g) is not above 0 and at most %g", f, float64(MaxLimitFactor)))
		}
		s.lim = s.lim.scaled(f)
		cfg.foreign *= f
		cfg.extras = slices.Clone(cfg.extras)
		for i := range cfg.extras {
			cfg.extras[i].Quota = scaleQuota(cfg.extras[i].Quota, f)
		}
	}
	lim := s.lim
	s.extras = extraPolicies(cfg.extras, lim)
	if cfg.gateway != nil {
		s.gate = newGatewayBucket(*cfg.gateway, cfg.factor, now)
	}
	s.store = newStore()
	s.orgID = "org_" + s.ids.next(now)
	if cfg.noisy {
		s.noise = newNoise(cfg.noiseSeed^cfg.seed, func(name string) bool {
			return slices.ContainsFunc(s.extras, func(p ExtraPolicy) bool { return p.Name == name })
		})
	}
	if s.noise == nil && !slices.ContainsFunc(s.extras, func(p ExtraPolicy) bool { return p.Partitioned && !p.Hidden }) {
		s.policyHeader = []string{joinMembers(s.policyMembers(""))}
	}
	level := func(policy string, quota, capacity float64, foreign float64) limiter {
		return newLimiter(lim.shapeOf(policy), quota, capacity, lim.Window, s.origin, now, foreign)
	}
	if cfg.greedyEvery > 0 {
		s.org = &greedy{limiter: level(policyOrg, float64(lim.OrgQuota), float64(lim.OrgQuota), 0), chunk: cfg.foreign * cfg.greedyEvery.Seconds(), every: cfg.greedyEvery, next: now, drain: cfg.drain, late: cfg.late,
			origin: s.origin, window: lim.Window, at: now}
	} else {
		s.org = level(policyOrg, float64(lim.OrgQuota), float64(lim.OrgQuota), cfg.foreign)
	}
	newPrincipal := func(kind, name string) *principal {
		return &principal{id: "prn_" + s.ids.next(now), kind: kind, name: name,
			lim: level(policyPrincipal, float64(lim.PrincipalQuota), float64(lim.PrincipalQuota), 0)}
	}
	a := newPrincipal("user", "Erika Mustermann")
	b := newPrincipal("service_account", "Sync-Dienst")
	share := lim.OrgKeyShare * float64(lim.OrgQuota)
	newKey := func(p *principal) *apiKey {
		k := &apiKey{
			id: "key_" + s.ids.next(now), principal: p,
			key:       level(policyKey, float64(lim.KeyQuota), float64(lim.KeyCapacity), 0),
			write:     level(policyWrite, float64(lim.WriteQuota), float64(lim.WriteQuota), 0),
			del:       level(policyDelete, float64(lim.DeleteQuota), float64(lim.DeleteQuota), 0),
			share:     level(policyOrg, share, share, 0),
			deleteDay: newFixedWindow(float64(lim.DeleteDayQuota), lim.DayLength, s.origin, now, 0),
			egress:    newFixedWindow(float64(lim.EgressQuota), lim.EgressWindow, s.origin, now, 0),
			extra:     make([]map[string]limiter, len(s.extras)),
			waitAll:   map[string][]announced{},
			waitLevel: map[string][]announced{},
			idem:      map[string]*idemEntry{},
		}
		for i := range k.extra {
			k.extra[i] = map[string]limiter{}
		}
		k.stats.Refusals = map[string]int{}
		k.stats.EarlyByPolicy = map[string]int{}
		return k
	}
	s.keys = map[string]*apiKey{TestKey: newKey(a), SecondKey: newKey(a), ForeignKey: newKey(b)}
	s.registerRoutes()
	return s
}

// Stats reports what the sandbox saw of key; an unknown key has zero stats.
func (s *Server) Stats(key string) KeyStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[key]
	if !ok {
		return KeyStats{Refusals: map[string]int{}, EarlyByPolicy: map[string]int{}}
	}
	st := k.stats
	st.Refusals = maps.Clone(k.stats.Refusals)
	st.EarlyByPolicy = maps.Clone(k.stats.EarlyByPolicy)
	st.FirstEarly = slices.Clone(k.stats.FirstEarly)
	return st
}

// ForeignTaken is what WithGreedyForeignLoad's key took of the org so far;
// 0 without it.
func (s *Server) ForeignTaken() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.org.(*greedy)
	if !ok {
		return 0
	}
	g.advance(time.Now())
	return g.taken
}

// OrgTakenByWindow is what every key took of the org in each window of
// the limits' Window since the server started (its first counting from
// the second it started in), up to now, when a greedy foreign load takes
// from it (WithGreedyForeignLoadEvery); nil otherwise. The org's quota
// less a window's count is what no key took of it in that window.
func (s *Server) OrgTakenByWindow() []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.org.(*greedy)
	if !ok {
		return nil
	}
	g.advance(time.Now())
	return slices.Clone(g.byWindow)
}

// call is one operation being served: a top-level request or a batch part.
type call struct {
	key    *apiKey
	now    time.Time
	legs   legs // the request's way here and its answer's back
	reqID  string
	method string
	path   string // the request path, also the problem instance
	query  url.Values
	body   []byte
	header http.Header
	lang   lang   // of the problems answered, from Accept-Language
	ans    answer // set by the route's handler
}

// exchange is the outcome of the locked part of ServeHTTP.
type exchange struct {
	ans      answer
	admitted bool
	idem     *idemEntry // reserved for this request, completed after the answer
	policy   []string   // the RateLimit-Policy field lines
}

// ServeHTTP serves the bodo API. Under go test it checks every exchange
// against openapi.json (WithValidation).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lg := s.legs()
	if lg.up > 0 {
		time.Sleep(lg.up)
	}
	if s.gate != nil && !s.gate.pass(time.Now(), true) {
		time.Sleep(lg.down) // the gateway is on the way to the server
		s.refuseAtGateway(w, r)
		return
	}
	if s.validating() {
		s.serveChecked(w, r, lg)
		return
	}
	s.serveHTTP(w, r, lg)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request, lg legs) {
	start := time.Now()
	reqID := "req_" + s.ids.next(start)
	var fault Fault
	if s.cfg.faults != nil {
		fault = s.cfg.faults(r)
	}
	if fault.Overloaded == 0 && s.cfg.overload != nil {
		if o := s.cfg.overload(); o.Overloaded != 0 {
			fault.Overloaded, fault.RetryAfter, fault.HintInBodyOnly = o.Overloaded, o.RetryAfter, o.HintInBodyOnly
		}
	}
	body, bodyErr := readBody(r)

	s.mu.Lock()
	k := s.keys[bearer(r)]
	if k != nil {
		k.stats.Requests++
		k.stats.InFlight++
		k.stats.MaxInFlight = max(k.stats.MaxInFlight, k.stats.InFlight)
	}
	x := s.decide(r, k, body, bodyErr, fault, reqID, lg)
	x.policy = s.policyField(r.URL.Path)
	if s.cfg.contradicted {
		s.contradict(&x)
	}
	s.mu.Unlock()

	if d := max(lg.down, fault.Delay); d > 0 {
		time.Sleep(time.Until(start.Add(d)))
	}

	s.mu.Lock()
	if x.idem != nil {
		x.idem.complete(x.ans)
	}
	if k != nil {
		if x.admitted {
			k.parallel--
		}
		k.stats.InFlight--
		if x.ans.status == http.StatusTooManyRequests || x.ans.status == http.StatusServiceUnavailable {
			k.stats.Refusals[x.ans.code]++
		} else {
			k.stats.Accepted++
		}
	}
	s.mu.Unlock()

	if fault.DropAfterCommit {
		panic(http.ErrAbortHandler)
	}
	h := w.Header()
	for name, v := range x.ans.header {
		h[name] = v
	}
	h.Set("Request-Id", reqID)
	h.Set("Bodo-Version", APIVersion)
	h[http.CanonicalHeaderKey("RateLimit-Policy")] = slices.Clone(x.policy)
	if x.ans.status != http.StatusNoContent && x.ans.status != http.StatusNotModified {
		h.Set("Content-Length", itoa(len(x.ans.body)))
	}
	w.WriteHeader(x.ans.status)
	if x.ans.status != http.StatusNoContent && x.ans.status != http.StatusNotModified {
		_, _ = w.Write(x.ans.body)
	}
}

// decide does everything of a request that needs the state: authenticate,
// check the lockout, route, cost, admit, charge and run. It holds s.mu.
func (s *Server) decide(r *http.Request, k *apiKey, body []byte, bodyErr error, fault Fault, reqID string, lg legs) exchange {
	now := time.Now()
	s.settle(now)
	c := &call{key: k, now: now, legs: lg, reqID: reqID, method: r.Method, path: r.URL.Path, query: r.URL.Query(), body: body, header: r.Header, lang: languageOf(r.Header)}
	base := demand{points: 1}
	withField := func(a answer, d demand) answer {
		if k != nil {
			a.header.Set("RateLimit", s.rateLimitField(k, now, d))
		} else {
			a.header.Set("RateLimit", s.formatRateLimit([]levelState{{name: policyKey, remaining: s.lim.keyFull()}}))
		}
		return a
	}

	// What the request would take is worked out first (it changes
	// nothing), so that a request that comes early is counted whatever it
	// is answered.
	var (
		rt      *route
		d       demand
		pre     *answer
		idemKey string
		fp      string
		parts   []batchPart
	)
	if k != nil {
		if rt = s.lookup(r.Method, r.URL); rt != nil {
			d, pre, idemKey, fp, parts = s.plan(c, rt, bodyErr)
			d = s.withExtra(d, c, rt.op)
		}
		s.noteEarly(k, c, now, rt != nil, d)
	}

	if fault.Overloaded != 0 {
		wait := overloadWait(fault)
		if k != nil {
			k.announce(waitAll(codeOverloaded), now, c.legs.down, wait)
		}
		return exchange{ans: withField(overloadedAnswer(c, fault), base)}
	}
	if k == nil {
		return exchange{ans: withField(c.fail(http.StatusUnauthorized, codeUnauthenticated, msg{"Der API-Schlüssel fehlt oder ist unbekannt.", "The API key is missing or unknown."}), base)}
	}
	if fault.refuses() {
		a, ok := s.faultAnswer(c, k, fault)
		if !ok {
			a = withField(a, base)
		}
		return exchange{ans: a}
	}
	if v := r.Header.Get("Bodo-Version"); v != "" && v != APIVersion {
		return exchange{ans: withField(c.badRequest(msg{"Die Version %q gibt es nicht; unterstützt wird %s.", "There is no version %q; %s is supported."}, v, APIVersion), base)}
	}
	if now.Before(k.lockedUntil) {
		s.noteRefusal(k, now, true)
		k.announce(waitAll(policyLockout), now, c.legs.down, k.lockedUntil.Sub(now))
		return exchange{ans: s.lockoutAnswer(c, k.lockedUntil)}
	}
	if rt == nil {
		if allow := s.allowed(r.URL); allow != nil {
			return exchange{ans: withField(c.methodNotAllowed(allow), base)}
		}
		return exchange{ans: withField(c.notFound(), base)}
	}

	s.advance(k, now)
	if ref := s.admit(k, now, d); ref != nil {
		a := s.refusalAnswer(c, ref)
		if ref.status != http.StatusTooManyRequests {
			return exchange{ans: withField(a, d)}
		}
		a.header.Set("RateLimit", s.refusedField(k, now, d, ref))
		s.noteRefusal(k, now, false)
		if ref.policy == policyParallel {
			k.announce(waitAll(policyParallel), now, c.legs.down, ref.wait)
		} else {
			k.announce(waitID(ref.policy, ref.part), now, c.legs.down, ref.wait)
		}
		return exchange{ans: a}
	}
	s.charge(k, now, d)
	k.stats.PointsAccepted += int(d.points)
	x := exchange{admitted: true}
	switch {
	case pre != nil:
		x.ans = *pre
	case rt.op.KeyRequired && idemKey == "":
		x.ans = c.fail(http.StatusBadRequest, codeIdemKeyRequired, msgKeyRequired)
	default:
		if idemKey != "" {
			x.idem = k.reserve(idemKey, fp, now)
		}
		if rt.op.Class == ops.ClassBatch {
			x.ans = s.runBatch(c, parts)
		} else {
			x.ans = s.dispatch(c, r.URL)
		}
	}
	k.egress.take(float64(x.ans.records))
	k.stats.Writes += x.ans.writes
	x.ans = withField(x.ans, d)
	return x
}

// plan works out what a routed call takes from the levels and, when no
// handler needs to run (a replay, a malformed request), its answer.
func (s *Server) plan(c *call, rt *route, bodyErr error) (d demand, pre *answer, idemKey, fp string, parts []batchPart) {
	op := rt.op
	d = opDemand(op, c.query.Get)
	if bodyErr != nil {
		a := c.badRequest(msg{"Der Body ist nicht lesbar oder größer als %d Bytes.", "The body is unreadable or larger than %d bytes."}, maxBody)
		if op.Class == ops.ClassBatch {
			d = demand{points: 1}
		}
		return d, &a, "", "", nil
	}
	if c.method == http.MethodPost || c.method == http.MethodPatch {
		if vals, ok := c.header["Idempotency-Key"]; ok {
			key := strings.Join(vals, ",")
			if !validIdemKey(key) {
				a := c.badRequest(msg{"Der Idempotency-Key muss 1 bis 255 Zeichen lang sein.", "The Idempotency-Key must be 1 to 255 characters long."})
				return d, &a, "", "", nil
			}
			fp = fingerprint(c.method, c.path, c.query, c.body)
			if e := c.key.lookup(key, c.now); e != nil {
				a := e.answerFor(c, fp)
				return demand{points: 1}, &a, "", "", nil
			}
			idemKey = key
		}
	}
	if op.Class == ops.ClassBatch {
		var errs []fieldError
		var err error
		if parts, errs, err = parseBatch(c.body); err != nil || errs != nil {
			a := c.invalid(errs)
			if err != nil {
				a = c.badRequest(msgBatchJSON)
			}
			return demand{points: 1}, &a, idemKey, fp, nil
		}
		d = s.batchDemand(c.key, c.now, parts)
	}
	return d, nil, idemKey, fp, parts
}

// withExtra adds what the call c of op takes from the enforced extra
// policies to d (a batch's parts were added by batchDemand).
func (s *Server) withExtra(d demand, c *call, op *ops.Operation) demand {
	s.extraTakes(&d, op, c.query.Get, c.path, d.points)
	return d
}

// recordReads are the operations whose answers count records against the
// egress level.
var recordReads = map[string]bool{
	"listContacts": true, "countContacts": true, "getContact": true,
	"listInvoices": true, "getInvoice": true, "getOperation": true, "listEvents": true,
}

func opDemand(op *ops.Operation, query func(string) string) demand {
	d := demand{points: float64(op.CostFor(query)), egress: recordReads[op.ID]}
	if op.Class.IsWrite() {
		d.writes = 1
	}
	if op.Class == ops.ClassDelete {
		d.deletes = 1
	}
	return d
}

// route is a registered operation.
type route struct {
	op *ops.Operation
	h  func(c *call, r *http.Request) answer
}

type callKey struct{}

func (s *Server) handle(pattern, opID string, h func(c *call, r *http.Request) answer) {
	op, ok := ops.ByID(opID)
	if !ok {
		panic("sandbox: operation " + opID + " is missing from ops.Table")
	}
	s.routes[pattern] = &route{op: op, h: h}
	s.mux.HandleFunc(pattern, func(_ http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(callKey{}).(*call); ok {
			c.ans = h(c, r)
		}
	})
}

// lookup finds the route of a method and a canonical path.
func (s *Server) lookup(method string, u *url.URL) *route {
	p := u.Path
	if p == "" || path.Clean(p) != p {
		return nil
	}
	_, pattern := s.mux.Handler(&http.Request{Method: method, URL: &url.URL{Path: p, RawPath: u.RawPath}})
	rt := s.routes[pattern]
	if rt == nil || rt.op.Method != method {
		return nil
	}
	return rt
}

// allowed lists the methods the path of u takes when it is a known path,
// nil when it is not.
func (s *Server) allowed(u *url.URL) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		if s.lookup(m, u) != nil {
			allow = append(allow, m)
		}
	}
	return allow
}

// dispatch runs the handler of c's route through the mux, which fills in the
// path values.
func (s *Server) dispatch(c *call, u *url.URL) answer {
	req := &http.Request{
		Method: c.method, URL: &url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery},
		Header: c.header, Host: "api.bodo-app.com", RequestURI: u.RequestURI(),
	}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	ctx := context.WithValue(context.Background(), callKey{}, c)
	c.ans = answer{}
	s.mux.ServeHTTP(discard{}, req.WithContext(ctx))
	if c.ans.status == 0 {
		return c.notFound()
	}
	return c.ans
}

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(int)             {}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err == nil && len(b) > maxBody {
		_, _ = io.Copy(io.Discard, r.Body)
		err = errors.New("body too large")
	}
	return b, err
}

func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
