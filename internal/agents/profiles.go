package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// stallWindow is how long calls may wait, while the server would accept one
// of them and none is sent, before the run counts a stall. A call that
// would come before a wait the server announced for it (early) does not
// count as one the server would accept: no client that keeps to the waits
// sends it.
const stallWindow = 10 * time.Second

// ProfileResult is one run of the workload against a server profile.
type ProfileResult struct {
	Profile        string
	Client         string
	Agents         int
	Duration       time.Duration
	Requests       int
	Points         int            // points the server accepted
	Allowance      int            // points the profile allows the key over the run (sandbox.Profile.AllowanceAt, AllowanceLeft)
	Refused        int            // 429 answers, the gateway's included
	GatewayRefused int            // 429 answers of the profile's gateway, which never reached the server
	RefusedBy      map[string]int // 429 answers by code and policy
	Lockouts       int
	Early          int             // requests sent before a wait the server announced was over
	EarlyBy        map[string]int  // by what announced the wait
	FirstEarly     []string        // the first few early requests, as the sandbox saw them
	Stalls         int             // windows of stallWindow in which calls waited, the server would have accepted one that would not come early, and none was sent
	StallsAt       []time.Duration // when each stall began, from the start of the run
	MaxFlight      int
	GaveUp         int
	Errors         map[string]int // failed calls by kind
	// OrgTaken is what both keys took of the org in each minute of the
	// run, against a greedy foreign load (sandbox.Server.OrgTakenByWindow);
	// nil otherwise.
	OrgTaken []float64
	// TargetGoodput and TargetRefused are the profile's own targets
	// (sandbox.Profile); zero means the issue's.
	TargetGoodput, TargetRefused float64
}

// Goodput is the share of the allowance the server accepted.
func (r ProfileResult) Goodput() float64 { return float64(r.Points) / float64(max(r.Allowance, 1)) }

// Rate429 is the share of requests answered 429.
func (r ProfileResult) Rate429() float64 { return float64(r.Refused) / float64(max(r.Requests, 1)) }

// goodputFloor is the least goodput a run like r must reach: its
// profile's own target, else 90 % of the allowance in the first minutes and
// 97 % over longer runs.
func (r ProfileResult) goodputFloor() float64 {
	switch {
	case r.TargetGoodput > 0:
		return r.TargetGoodput
	case r.Duration < 10*time.Minute:
		return 0.90
	}
	return 0.97
}

// Targets are what every profile must meet: goodput at least 97 % of the
// allowance over 60 minutes and 90 % over the first 2, 429s at most 0.5 %
// of requests, no lockout, no early request, no stall. TargetGoodput and
// TargetRefused, when positive, replace the goodput and 429 targets.
func (r ProfileResult) Targets() []string {
	var miss []string
	if floor := r.goodputFloor(); r.Goodput() < floor {
		miss = append(miss, fmt.Sprintf("goodput %.1f %% < %.0f %%", 100*r.Goodput(), 100*floor))
	}
	refused := 0.005
	if r.TargetRefused > 0 {
		refused = r.TargetRefused
	}
	if r.Rate429() > refused {
		miss = append(miss, fmt.Sprintf("429s %.2f %% > %.1f %%", 100*r.Rate429(), 100*refused))
	}
	if r.Lockouts > 0 {
		miss = append(miss, fmt.Sprintf("%d lockouts", r.Lockouts))
	}
	if r.Early > 0 {
		miss = append(miss, fmt.Sprintf("%d early requests %v", r.Early, r.EarlyBy))
	}
	if r.Stalls > 0 {
		miss = append(miss, fmt.Sprintf("%d stalls", r.Stalls))
	}
	return miss
}

// NewAPI builds the client under test for one run: rt reaches the sandbox,
// baseURL is the run's own.
type NewAPI func(rt http.RoundTripper, baseURL string) (API, error)

// SDKClient is NewAPI for bodo-go with the given options.
func SDKClient(opts ...bodo.Option) NewAPI {
	return func(rt http.RoundTripper, baseURL string) (API, error) {
		c, err := bodo.NewClient(append([]bodo.Option{
			bodo.WithAPIKey(sandbox.TestKey),
			bodo.WithBaseURL(baseURL),
			bodo.WithHTTPClient(&http.Client{Transport: rt}),
		}, opts...)...)
		if err != nil {
			return nil, err
		}
		return SDK{Client: c}, nil
	}
}

var profileRunSeq atomic.Int64

// profileLatency is the latency of RunProfile's server: 30 ms a round
// trip, unless a test sets another for an experiment (BODO_LATENCY,
// latency_test.go).
var profileLatency = sandbox.WithLatency(30 * time.Millisecond)

// RunProfile runs n agents on the API newAPI builds against a server of
// profile p for d, and reports what the server saw. Behind a gateway the
// allowance is the gateway's requests at the run's mean cost of an accepted
// request (sandbox.Profile.AllowanceAt). Beside a Peer, n agents run on
// sandbox.SecondKey too, with a bodo-go client of their own (seed+1), and
// the allowance is what the principal leaves of their takes
// (sandbox.Profile.AllowanceBeside). seed makes the agents' choices
// and the server's seeded variations (sandbox.WithSeed) repeatable. It must
// run inside a testing/synctest bubble: it waits on virtual time.
func RunProfile(p sandbox.Profile, client string, newAPI NewAPI, n int, d time.Duration, seed uint64) (ProfileResult, error) {
	srv := p.New(profileLatency, sandbox.WithSeed(seed))
	stats := NewStats()
	refusals := &refusalCounter{by: map[string]int{}}
	api, err := newAPI(refusals.transport(stats.Transport(srv.Transport())), fmt.Sprintf("https://profile%d.test", profileRunSeq.Add(1)))
	if err != nil {
		return ProfileResult{}, err
	}
	tracked := &trackedAPI{API: api, calls: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	stalls := make(chan []time.Duration, 1)
	go func() { stalls <- watchStalls(ctx, srv, tracked) }()
	var peer sync.WaitGroup
	if p.Peer {
		api, err := SDKClient(bodo.WithAPIKey(sandbox.SecondKey), bodo.WithLogger(slog.New(slog.DiscardHandler)))(srv.Transport(), fmt.Sprintf("https://profile%d.test", profileRunSeq.Add(1)))
		if err != nil {
			return ProfileResult{}, err
		}
		peer.Go(func() { RunAPI(ctx, n, api, NewStats(), seed+1) })
	}
	RunAPI(ctx, n, tracked, stats, seed)
	peer.Wait()
	st := srv.Stats(sandbox.TestKey)
	counts := stats.Snapshot()
	allowance := p.AllowanceAt(d, float64(st.PointsAccepted)/float64(max(st.Accepted, 1)))
	var orgTaken []float64
	if p.Greedy {
		allowance, orgTaken = p.AllowanceLeft(d, srv.ForeignTaken()), srv.OrgTakenByWindow()
	}
	if p.Peer {
		allowance = p.AllowanceBeside(d, srv.Stats(sandbox.SecondKey).PointsAccepted)
	}
	r := ProfileResult{
		Profile: p.Name, Client: client, Agents: n, Duration: d,
		Requests: st.Requests + st.GatewayRefused, Points: st.PointsAccepted,
		Allowance: allowance,
		Refused:   counts.Status429, GatewayRefused: st.GatewayRefused, RefusedBy: refusals.snapshot(),
		Lockouts: st.Lockouts, Early: st.EarlyRequests, EarlyBy: maps.Clone(st.EarlyByPolicy), FirstEarly: st.FirstEarly,
		MaxFlight: st.MaxInFlight, GaveUp: counts.GaveUp, Errors: counts.Errors,
		TargetGoodput: p.TargetGoodput, TargetRefused: p.TargetRefused,
		OrgTaken: orgTaken,
	}
	r.StallsAt = <-stalls
	r.Stalls = len(r.StallsAt)
	time.Sleep(time.Minute) // the sandbox finishes what callers gave up on
	return r, nil
}

// watchStalls samples the run every second until ctx ends and returns when
// each window of stallWindow began in which no request reached the server
// while a call was in progress that the server would have accepted.
func watchStalls(ctx context.Context, srv *sandbox.Server, api *trackedAPI) []time.Duration {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	start := time.Now()
	last := srv.Stats(sandbox.TestKey).Requests
	idle := time.Duration(0)
	var stalls []time.Duration
	for {
		select {
		case <-ctx.Done():
			return stalls
		case <-tick.C:
		}
		now := srv.Stats(sandbox.TestKey).Requests
		sent := now != last
		last = now
		if sent || !api.acceptable(srv) {
			idle = 0
			continue
		}
		idle += time.Second
		if idle == stallWindow {
			stalls = append(stalls, time.Since(start)-stallWindow)
		}
	}
}

// trackedAPI records the calls in progress, by operation and query.
type trackedAPI struct {
	API
	mu    sync.Mutex
	calls map[string]int
}

func (t *trackedAPI) track(op string, q url.Values) func() {
	k := op + "?" + q.Encode()
	t.mu.Lock()
	t.calls[k]++
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		t.calls[k]--
		t.mu.Unlock()
	}
}

// acceptable reports whether the server would accept one of the calls in
// progress now, and it would not come early.
func (t *trackedAPI) acceptable(srv *sandbox.Server) bool {
	t.mu.Lock()
	keys := slices.Collect(maps.Keys(t.calls))
	counts := maps.Clone(t.calls)
	t.mu.Unlock()
	for _, k := range keys {
		if counts[k] <= 0 {
			continue
		}
		op, raw, _ := strings.Cut(k, "?")
		q, _ := url.ParseQuery(raw)
		if srv.WouldAccept(sandbox.TestKey, op, q) && !srv.WouldComeEarly(sandbox.TestKey, op, q) {
			return true
		}
	}
	return false
}

func listQuery(p *bodo.ListContactsParams) url.Values {
	q := url.Values{}
	if p == nil {
		return q
	}
	if v, ok := p.Limit.Get(); ok {
		q.Set("limit", fmt.Sprint(v))
	}
	if v, ok := p.Q.Get(); ok {
		q.Set("q", v)
	}
	return q
}

func (t *trackedAPI) GetContact(ctx context.Context, id string) (*bodo.Contact, error) {
	defer t.track("getContact", nil)()
	return t.API.GetContact(ctx, id)
}

func (t *trackedAPI) ListContacts(ctx context.Context, p *bodo.ListContactsParams) (*bodo.ContactList, error) {
	defer t.track("listContacts", listQuery(p))()
	return t.API.ListContacts(ctx, p)
}

func (t *trackedAPI) CountContacts(ctx context.Context, p *bodo.CountContactsParams) (*bodo.ContactCount, error) {
	q := url.Values{}
	if p != nil && p.Q.IsSet() {
		q.Set("q", p.Q.Value())
	}
	defer t.track("countContacts", q)()
	return t.API.CountContacts(ctx, p)
}

func (t *trackedAPI) CreateContact(ctx context.Context, body bodo.ContactCreate) (*bodo.Contact, error) {
	defer t.track("createContact", nil)()
	return t.API.CreateContact(ctx, body)
}

func (t *trackedAPI) UpdateContact(ctx context.Context, id string, body bodo.ContactUpdate) (*bodo.Contact, error) {
	defer t.track("updateContact", nil)()
	return t.API.UpdateContact(ctx, id, body)
}

func (t *trackedAPI) DeleteContact(ctx context.Context, id string) error {
	defer t.track("deleteContact", nil)()
	return t.API.DeleteContact(ctx, id)
}

func (t *trackedAPI) CreateInvoice(ctx context.Context, body bodo.InvoiceCreate) (*bodo.Invoice, error) {
	defer t.track("createInvoice", nil)()
	return t.API.CreateInvoice(ctx, body)
}

func (t *trackedAPI) PayInvoice(ctx context.Context, id string) (*bodo.Invoice, error) {
	defer t.track("payInvoice", nil)()
	return t.API.PayInvoice(ctx, id)
}

// refusalCounter counts 429 answers by their problem's code and policy (a
// 429 without a problem as "Too Many Requests").
type refusalCounter struct {
	mu sync.Mutex
	by map[string]int
}

func (c *refusalCounter) transport(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests {
			return resp, err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var p struct{ Code, Policy string }
		_ = json.Unmarshal(body, &p)
		if p.Code == "" { // a bare 429, as a gateway answers
			p.Code = http.StatusText(resp.StatusCode)
		}
		c.mu.Lock()
		c.by[p.Code+" "+p.Policy]++
		c.mu.Unlock()
		return resp, nil
	})
}

func (c *refusalCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.by)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
