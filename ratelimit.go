package bodo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// The lockout guard. The server locks a key for 5 minutes after more than 50
// refusals in 60 s; the client keeps the key's refusals, plus the attempts in
// flight that could still be refused, at or below half of that in any 60 s
// window, and holds further attempts on the key until the window clears.
const (
	refusalLimit  = 25
	refusalWindow = 60 * time.Second
)

// AIMD: each RATE_LIMITED halves the in-flight cap and the pacing rate,
// each OVERLOADED cuts them to overloadCut of what they were (at most one
// cut per cutSpacing); each quietInterval without one raises the cap by one
// call and the pace by paceStep of the key's rate. OVERLOADED cuts less: it
// speaks of the instance, not of the key's limits, and isolated ones (a few
// per cent of answers) would otherwise hold the pace at half for good.
const (
	cutSpacing    = time.Second
	rateLimitCut  = 0.5
	overloadCut   = 0.8
	quietInterval = 2 * time.Second
	paceStep      = 0.1
	minPace       = 0.05
	paceBurst     = 2 * time.Second
)

// observedRateTTL is how long a refill rate read off a RateLimit header
// (what the server says is left and when it is full again) overrides the
// documented rate of a level.
const observedRateTTL = 10 * time.Second

// minObservedReset is the shortest t a refill rate is read off: with t in
// whole seconds rounded up, the rate read off t >= 5 is at least 80 % of
// the true one.
const minObservedReset = 5

// maxWindowSeconds bounds a policy's window (w), so that no conversion to a
// time.Duration overflows: ten years, longer than any quota resets.
const maxWindowSeconds = 10 * 366 * 24 * 3600

// allLevels stands for every level in a quota block whose policy the client
// does not know: then every call of the key is held.
const allLevels = "*"

// The level names of the API.
const (
	levelKey       = "key"
	levelWrite     = "write"
	levelParallel  = "parallel"
	levelPrincipal = "principal"
	levelOrg       = "org"
	levelDelete    = "delete"
	levelDeleteDay = "delete-day"
	levelEgress    = "egress"
	policyLockout  = "lockout"
)

// documentedLevels are the levels of the API before any header says
// otherwise: quota per window, capacity, and for org the share one key may
// use.
func documentedLevels() map[string]*level {
	minute, hour := time.Minute, time.Hour
	ls := []*level{
		{name: levelKey, unit: "points", quota: 300, window: minute, capacity: 600, share: 1},
		{name: levelWrite, unit: "requests", quota: 60, window: minute, share: 1},
		{name: levelPrincipal, unit: "points", quota: 1200, window: minute, share: 1},
		{name: levelOrg, unit: "points", quota: 3000, window: minute, share: 0.5},
		{name: levelDelete, unit: "requests", quota: 10, window: minute, share: 1},
		{name: levelDeleteDay, unit: "requests", quota: 300, window: 24 * hour, share: 1, fixed: true},
		{name: levelEgress, unit: "records", quota: 10000, window: hour, share: 1, fixed: true},
	}
	m := map[string]*level{}
	for _, l := range ls {
		l.known, l.docQuota = true, l.quota
		l.tokens = l.size()
		m[l.name] = l
	}
	return m
}

// level is the client's model of one server level as a token bucket.
type level struct {
	name     string
	unit     string // points, requests, records
	quota    float64
	window   time.Duration
	capacity float64 // 0: the quota (times share)
	share    float64 // the part of the quota this key may use
	known    bool    // a level of the API (else learned from a header)
	docQuota float64 // the documented quota; capacity holds only while quota equals it
	fixed    bool    // a quota in fixed windows: its t is the time to the reset, not a refill
	seenMax  float64 // the most the server ever said was left: the bucket holds at least that

	tokens float64 // may be negative: owed after a refusal
	at     time.Time

	observedRate  float64 // points per second, from a RateLimit header
	observedUntil time.Time
}

func (l *level) size() float64 {
	size := l.quota * l.share
	if l.capacity > 0 && l.quota == l.docQuota {
		size = l.capacity
	}
	return max(size, l.seenMax)
}

// documented reports whether the level is the API's own, with the
// documented quota: only then is its size certain enough to refuse a call
// that can never fit it. Against a size learned from a header, a bigger call
// waits for a full bucket and then goes, so an odd header never wedges a key.
func (l *level) documented() bool { return l.known && l.quota == l.docQuota }

// need is what the call must find in the level before it goes.
func (l *level) need(amount float64) float64 {
	if l.documented() {
		return amount
	}
	return min(amount, l.size())
}

func (l *level) rate(now time.Time) float64 {
	if now.Before(l.observedUntil) {
		return l.observedRate
	}
	return l.grossRate()
}

// grossRate is the refill the quota grants, before what others take.
func (l *level) grossRate() float64 {
	if l.window <= 0 {
		return 0
	}
	return l.quota * l.share / l.window.Seconds()
}

// refill brings the tokens up to now: at the rate read off a header while
// it was in force, at the quota's rate after.
func (l *level) refill(now time.Time) {
	if l.at.IsZero() {
		l.at = now
	}
	if !now.After(l.at) {
		return
	}
	gained := 0.0
	if l.at.Before(l.observedUntil) {
		until := l.observedUntil
		if now.Before(until) {
			until = now
		}
		gained += l.observedRate * until.Sub(l.at).Seconds()
		l.at = until
	}
	gained += l.grossRate() * now.Sub(l.at).Seconds()
	l.tokens = min(l.size(), l.tokens+gained)
	l.at = now
}

// wait is how long until n tokens are there; forever when nothing refills.
// While a rate read off a header is in force, the wait ends no later than
// that rate does, so that the caller looks again with the quota's rate.
func (l *level) wait(n float64, now time.Time) time.Duration {
	deficit := n - l.tokens
	if deficit <= 1e-9 {
		return 0
	}
	var d time.Duration
	if r := l.rate(now); r > 0 {
		d = durationOf(deficit / r)
	} else {
		d = forever
	}
	if now.Before(l.observedUntil) {
		d = min(d, l.observedUntil.Sub(now))
	}
	return d
}

func (l *level) fullIn(now time.Time) time.Duration { return l.wait(l.size(), now) }

const forever = time.Duration(math.MaxInt64)

func durationOf(seconds float64) time.Duration {
	if seconds >= forever.Seconds() {
		return forever
	}
	return time.Duration(math.Ceil(seconds * 1e9))
}

// demand is what one call takes from one level.
type demand struct {
	level  string
	amount float64
}

// demandOf returns what a call of op with the given query takes from each
// level: its cost from key, principal and org; one write for the write
// classes; one delete from delete and delete-day; and for reads the records
// it may return from egress (a list reserves its limit, settled after).
func demandOf(op *ops.Operation, query url.Values) []demand {
	cost := float64(op.CostFor(query.Get))
	d := make([]demand, 0, 6)
	d = append(d, demand{levelKey, cost}, demand{levelPrincipal, cost}, demand{levelOrg, cost})
	if op.Class.IsWrite() {
		d = append(d, demand{levelWrite, 1})
	}
	if op.Class == ops.ClassDelete {
		d = append(d, demand{levelDelete, 1}, demand{levelDeleteDay, 1})
	}
	switch op.Egress {
	case ops.EgressOne:
		d = append(d, demand{levelEgress, 1})
	case ops.EgressPage:
		limit := 20
		if n, err := strconv.Atoi(query.Get("limit")); err == nil {
			limit = min(max(n, 1), 100)
		}
		d = append(d, demand{levelEgress, float64(limit)})
	}
	return d
}

// addDemand adds d into sum, level by level.
func addDemand(sum []demand, d []demand) []demand {
	for _, x := range d {
		if i := slices.IndexFunc(sum, func(y demand) bool { return y.level == x.level }); i >= 0 {
			sum[i].amount += x.amount
		} else {
			sum = append(sum, x)
		}
	}
	return sum
}

// amountFor is what the call takes from l: its demand, or for a level the
// client learned from a header, what its unit implies.
func (cl *call) amountFor(l *level) float64 {
	for _, d := range cl.demand {
		if d.level == l.name {
			return d.amount
		}
	}
	if l.known {
		return 0
	}
	switch l.unit {
	case "points":
		return float64(cl.cost)
	case "requests":
		return 1
	}
	return 0
}

// levelTake is what a call takes from one level.
type levelTake struct {
	l      *level
	amount float64
}

// takesLocked returns the levels cl takes from and how much, worked out
// once per call and again only when a level was added since; s.mu is held.
func (s *keyState) takesLocked(cl *call) []levelTake {
	if cl.takes != nil && cl.takesVersion == s.levelsVersion {
		return cl.takes
	}
	takes := make([]levelTake, 0, len(s.levels))
	for _, l := range s.levels {
		if a := cl.amountFor(l); a > 0 {
			takes = append(takes, levelTake{l, a})
		}
	}
	cl.takes, cl.takesVersion = takes, s.levelsVersion
	return takes
}

// keyState is what the client knows of one API key on one host: the model of
// its levels, the AIMD state, the FIFO queue of waiting calls, the lockout
// guard and the exhausted quotas. Every Client in the process with the same
// key and host shares it.
type keyState struct {
	mu sync.Mutex

	levels        map[string]*level
	levelsVersion int // counts the levels added from headers
	parallel      int // the server's parallel quota
	inflight      int // budgeted attempts in flight
	demand        map[string]float64

	capLimit   float64 // AIMD cap on budgeted attempts in flight
	pace       float64 // AIMD share of the key's rate the client allows itself
	paceTokens float64
	paceAt     time.Time
	lastChange time.Time // of capLimit or pace
	lastCut    time.Time
	cuts       int

	queue       []*waiter
	pausedUntil time.Time // a lockout: nothing is sent before

	refusals []time.Time // 429 answers in the last refusalWindow, oldest first
	reserved int         // attempts in flight, each a possible refusal
	blocks   map[string]time.Time

	waits  int64
	waited time.Duration

	learned    bool     // an answer came: the headers, if the server sends them, are known
	lastPolicy []string // the RateLimit-Policy lines last applied

	shared          SharedBudget // nil: this process's budget only
	pendingReleases []SharedRelease
	sharedKey       string
	sharedRetryAt   time.Time // after a failure the store is tried again from then on
	sharedDown      bool
	logger          *slog.Logger
}

// sharedRetry is how long the client uses its local budget after the shared
// store failed before it tries the store again; sharedTimeout bounds each
// request to the store; sharedPoll is how often a call held by the shared
// in-flight cap asks again.
const (
	sharedRetry   = 2 * time.Second
	sharedTimeout = 500 * time.Millisecond
	sharedPoll    = 20 * time.Millisecond
	leaseTTL      = 30 * time.Second

	maxPendingReleases = 1024
)

// useShared makes s share its budget through b.
func (s *keyState) useShared(b SharedBudget, key string, logger *slog.Logger) {
	s.mu.Lock()
	s.shared, s.sharedKey, s.logger = b, key, logger
	s.mu.Unlock()
}

// sharedActiveLocked reports whether the shared store is to be asked now.
func (s *keyState) sharedActiveLocked(now time.Time) bool {
	return s.shared != nil && !now.Before(s.sharedRetryAt)
}

// sharedResult records how a request to the store went: a failure switches
// to the local budget for sharedRetry (logged once per outage), a success
// after a failure rejoins (logged too). s.mu is held.
func (s *keyState) sharedResultLocked(err error, now time.Time) {
	switch {
	case err != nil:
		s.sharedRetryAt = now.Add(sharedRetry)
		if !s.sharedDown {
			s.sharedDown = true
			s.logger.LogAttrs(context.Background(), slog.LevelWarn, "bodo: shared budget unreachable, using this process's budget until it is back",
				slog.String("error", err.Error()))
		}
	case s.sharedDown:
		s.sharedDown = false
		s.logger.LogAttrs(context.Background(), slog.LevelInfo, "bodo: shared budget reachable again")
	}
}

// sharedLevelsLocked is cl's demand with each level's model, for the store.
func (s *keyState) sharedLevelsLocked(cl *call, now time.Time) []SharedLevel {
	var out []SharedLevel
	for _, t := range s.takesLocked(cl) {
		out = append(out, SharedLevel{Name: t.l.name, Amount: t.amount, Rate: t.l.rate(now), Size: t.l.size()})
	}
	return out
}

// waiter is a call's place in the queue. Only the head of the queue, and
// calls outside the budget, are woken when something changes: the others
// can go only once they are the head.
type waiter struct {
	wake     chan struct{} // made when the call first waits
	budgeted bool
}

func (w *waiter) notify() {
	if w.wake != nil {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

var keyStates = struct {
	sync.Mutex
	m map[string]*keyState
}{m: map[string]*keyState{}}

// stateFor returns the shared state of apiKey on host. The map is keyed by a
// hash of the key, never the key itself.
func stateFor(host, apiKey string) *keyState {
	sum := sha256.Sum256([]byte(apiKey))
	id := host + "/" + hex.EncodeToString(sum[:])
	keyStates.Lock()
	defer keyStates.Unlock()
	s := keyStates.m[id]
	if s == nil {
		s = &keyState{
			levels:   documentedLevels(),
			parallel: 6,
			capLimit: 6,
			pace:     1,
			demand:   map[string]float64{},
			blocks:   map[string]time.Time{},
		}
		keyStates.m[id] = s
	}
	return s
}

// signal wakes the head of the queue and the calls outside the budget;
// s.mu is held.
func (s *keyState) signal() {
	for i, w := range s.queue {
		if i == 0 || !w.budgeted {
			w.notify()
		}
	}
}

// ticket is an admitted attempt; the client ends it with finish.
type ticket struct {
	s        *keyState
	cl       *call
	taken    []levelTake // what the attempt took, given back to the same levels
	budgeted bool
	lease    string // the shared store's lease, if the store admitted it
	once     sync.Once
}

// WaitEvent describes a call that waited for the budget, for WithOnWait.
type WaitEvent struct {
	Operation string        // operationId
	Class     string        // x-bodo-class
	Wait      time.Duration // how long it waited before it was sent
	// Reason is what held it last: a level's name, "in-flight" (the
	// adaptive cap on calls in flight), "pace" (the adaptive pacing),
	// "queue" (calls ahead of it), "refusal-guard" or "lockout".
	Reason string
}

// admit lets one attempt of cl go. It refuses at once, without sending, a
// call that a known exhausted quota would refuse or that can never fit a
// level; otherwise it waits, first come first served, until the budget (when
// budgeted), the adaptive cap and the lockout guard let the attempt go.
// When ctx's deadline falls before the earliest moment it could go, it
// fails at once.
func (s *keyState) admit(ctx context.Context, cl *call, budgeted bool) (*ticket, WaitEvent, error) {
	s.mu.Lock()
	now := time.Now()
	start := now
	if budgeted {
		for _, t := range s.takesLocked(cl) {
			if t.amount > t.l.size() && t.l.documented() {
				s.mu.Unlock()
				return nil, WaitEvent{}, neverFits(cl, t.l, t.amount)
			}
		}
	}
	w := &cl.waiter
	w.budgeted = budgeted
	s.queue = append(s.queue, w)
	var reason string
	for {
		if ctx.Err() != nil {
			s.leaveLocked(w)
			s.mu.Unlock()
			return nil, WaitEvent{}, fmt.Errorf("%w: %w", heldError(cl, reason, 0), ctxErr(ctx))
		}
		if err := s.blockedLocked(cl, now); err != nil {
			s.leaveLocked(w)
			s.mu.Unlock()
			return nil, WaitEvent{}, err
		}
		shared := s.sharedActiveLocked(now)
		wait, why := s.waitLocked(w, cl, budgeted, !shared, now)
		lease := ""
		if why == "" && shared {
			var err error
			lease, wait, why, err = s.acquireSharedLocked(ctx, cl, budgeted, now)
			now = time.Now()
			if err != nil {
				s.leaveLocked(w)
				s.mu.Unlock()
				return nil, WaitEvent{}, err
			}
			if why == "" && lease == "" {
				continue // the store failed: the local budget decides
			}
		}
		if why == "" {
			s.takeLocked(w, cl, budgeted)
			var waited time.Duration
			if reason != "" { // held at least once, not merely slowed by a store's round trip
				waited = now.Sub(start)
			}
			if waited > 0 {
				s.waits++
				s.waited += waited
			}
			cl.ticket = ticket{s: s, cl: cl, taken: cl.taken, budgeted: budgeted, lease: lease}
			s.mu.Unlock()
			return &cl.ticket, WaitEvent{Operation: cl.op.ID, Class: string(cl.op.Class), Wait: waited, Reason: reason}, nil
		}
		reason = why
		if deadline, ok := ctx.Deadline(); ok && wait != forever && deadline.Sub(now) < wait {
			s.leaveLocked(w)
			s.mu.Unlock()
			return nil, WaitEvent{}, fmt.Errorf("%w: %w", heldError(cl, why, wait), context.DeadlineExceeded)
		}
		if w.wake == nil {
			w.wake = make(chan struct{}, 1)
		}
		select {
		case <-w.wake: // what it said is in the state just read
		default:
		}
		head := s.queue[0] == w || !budgeted
		s.mu.Unlock()

		var timer *time.Timer
		var timeout <-chan time.Time
		if head && wait > 0 && wait != forever {
			timer = time.NewTimer(wait)
			timeout = timer.C
		}
		select {
		case <-w.wake:
		case <-timeout:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		s.mu.Lock()
		now = time.Now()
		if ctx.Err() != nil {
			s.leaveLocked(w)
			s.mu.Unlock()
			return nil, WaitEvent{}, fmt.Errorf("%w: %w", heldError(cl, reason, wait), ctxErr(ctx))
		}
	}
}

// acquireSharedLocked asks the shared store to admit cl; s.mu is held and
// released during the request. It returns the lease when admitted, else
// why not and how long at least to wait (a store that holds the call until
// a release is polled every sharedPoll). A store that fails returns no
// lease and no reason: the caller falls back to the local budget. A quota
// the store knows to be exhausted is the local refusal error.
func (s *keyState) acquireSharedLocked(ctx context.Context, cl *call, budgeted bool, now time.Time) (string, time.Duration, string, error) {
	req := SharedAcquire{
		Lease:         leaseID(),
		LeaseTTL:      leaseTTL,
		Levels:        s.sharedLevelsLocked(cl, now),
		Cost:          float64(cl.cost),
		KeyRate:       s.levels[levelKey].rate(now),
		MaxInFlight:   s.parallel,
		RefusalLimit:  refusalLimit,
		RefusalWindow: refusalWindow,
		Unbudgeted:    !budgeted,
	}
	store, key := s.shared, s.sharedKey
	s.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
	grant, err := store.Acquire(rctx, key, req)
	cancel()
	s.mu.Lock()
	now = time.Now()
	s.sharedResultLocked(err, now)
	if err == nil && len(s.pendingReleases) > 0 {
		s.flushReleasesLocked(store, key)
	}
	switch {
	case err != nil:
		return "", 0, "", nil
	case grant.Admitted:
		return req.Lease, 0, "", nil
	case grant.Reason == "quota":
		s.blocks[grant.Policy] = grant.Until
		if err := s.blockedLocked(cl, now); err != nil {
			return "", 0, "", err
		}
		return "", sharedPoll, "quota", nil // the store knows a level this process has not learned yet
	case grant.Wait <= 0:
		return "", sharedPoll, grant.Reason, nil
	}
	return "", grant.Wait, grant.Reason, nil
}

// flushReleasesLocked sends the releases kept while the store was down;
// s.mu is held and released meanwhile. Those that fail stay for later.
func (s *keyState) flushReleasesLocked(store SharedBudget, key string) {
	pending := s.pendingReleases
	s.pendingReleases = nil
	s.mu.Unlock()
	for i, rel := range pending {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		err := store.Release(ctx, key, rel)
		cancel()
		if err != nil {
			pending = pending[i:]
			s.mu.Lock()
			s.pendingReleases = append(pending, s.pendingReleases...)
			return
		}
	}
	s.mu.Lock()
}

// pruneRefusalsLocked drops the refusals older than the guard's window;
// s.mu is held.
func (s *keyState) pruneRefusalsLocked(now time.Time) {
	cut := 0
	for cut < len(s.refusals) && now.Sub(s.refusals[cut]) >= refusalWindow {
		cut++
	}
	s.refusals = s.refusals[cut:]
}

// waitLocked says whether w may go now (why is "") or else how long at
// least it must wait (a lower bound; forever when only a release can help)
// and what holds it. A budgeted call waits its turn in the queue and, when
// local is set, for the local model; otherwise the shared store decides.
func (s *keyState) waitLocked(w *waiter, cl *call, budgeted, local bool, now time.Time) (time.Duration, string) {
	var wait time.Duration
	why := ""
	hold := func(d time.Duration, reason string) {
		if why == "" || d > wait {
			wait, why = d, reason
		}
	}
	s.pruneRefusalsLocked(now)
	if len(s.refusals)+s.reserved >= refusalLimit {
		d := forever
		if len(s.refusals) > 0 {
			d = s.refusals[0].Add(refusalWindow).Sub(now)
		}
		hold(d, "refusal-guard")
	}
	if now.Before(s.pausedUntil) {
		hold(s.pausedUntil.Sub(now), policyLockout)
	}
	if !budgeted {
		return wait, why
	}
	if s.queue[0] != w {
		hold(0, "queue")
	}
	if !s.learned && s.inflight > 0 {
		// Slow start: until the first answer has shown the server's
		// policies (if it sends them), one call at a time.
		hold(0, "in-flight")
	}
	if !local {
		return wait, why
	}
	s.adaptLocked(now)
	for _, t := range s.takesLocked(cl) {
		t.l.refill(now)
		if d := t.l.wait(t.l.need(t.amount), now); d > 0 {
			hold(d, t.l.name)
		}
	}
	if s.pace < 1 {
		s.refillPaceLocked(now)
		// A call needs its cost, or a full burst when it costs more: the
		// pace then runs into debt, so an expensive call is never starved.
		if deficit := min(float64(cl.cost), s.paceBurstLocked(now)) - s.paceTokens; deficit > 1e-9 {
			hold(durationOf(deficit/s.paceRateLocked(now)), "pace")
		}
	}
	if s.inflight >= int(s.capLimit) {
		hold(0, "in-flight")
	}
	return wait, why
}

// takeLocked admits w: it leaves the queue and takes its demand.
func (s *keyState) takeLocked(w *waiter, cl *call, budgeted bool) {
	s.leaveLocked(w)
	s.reserved++
	if !budgeted {
		return
	}
	s.inflight++
	cl.taken = s.takesLocked(cl)
	for _, t := range cl.taken {
		t.l.tokens -= t.amount
		s.demand[t.l.name] += t.amount
	}
	if s.pace < 1 {
		s.paceTokens -= float64(cl.cost)
	}
}

// leaveLocked takes w out of the queue and wakes the others.
func (s *keyState) leaveLocked(w *waiter) {
	if i := slices.Index(s.queue, w); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
	}
	s.signal()
}

// finish ends an admitted attempt with its answer (resp nil for a
// connection failure; apiErr for a non-2xx answer): it frees the slot,
// counts a refusal, gives back what a refused call was not charged, follows
// the RateLimit headers and cuts the AIMD state on RATE_LIMITED or
// OVERLOADED.
func (t *ticket) finish(resp *http.Response, apiErr *Error) { t.end(resp, apiErr, false) }

// finishUnanswered ends an attempt that got no answer. One that may have
// reached the server counts for the lockout guard as a refusal: the server
// may have refused it without the client ever reading that.
func (t *ticket) finishUnanswered(mayHaveArrived bool) { t.end(nil, nil, mayHaveArrived) }

func (t *ticket) end(resp *http.Response, apiErr *Error, unknown bool) {
	t.once.Do(func() {
		s, cl := t.s, t.cl
		s.mu.Lock()
		now := time.Now()
		var rel *SharedRelease
		if t.lease != "" {
			rel = &SharedRelease{Lease: t.lease, RefusalLimit: refusalLimit, RefusalWindow: refusalWindow}
		}
		s.reserved--
		refused := resp != nil && resp.StatusCode == http.StatusTooManyRequests
		if refused || unknown {
			s.refusals = append(s.refusals, now)
		}
		if t.budgeted {
			s.inflight--
			uncharged := refused || apiErr != nil && apiErr.Code == CodeOverloaded
			for _, tk := range t.taken {
				l, a := tk.l, tk.amount
				s.demand[l.name] -= a
				if uncharged {
					l.tokens += a
					if rel != nil {
						rel.Refund = append(rel.Refund, SharedLevel{Name: l.name, Amount: a, Rate: l.rate(now), Size: l.size()})
					}
				}
			}
		}
		if resp != nil && s.observeLocked(resp.Header, now, rel) {
			cl.egressReported = true // what is left of egress is the server's word now: no settling on top
		}
		if apiErr != nil {
			s.refusedLocked(cl, apiErr, now, rel)
		}
		s.signal()
		if rel == nil {
			s.mu.Unlock()
			return
		}
		rel.Refused, rel.MaxInFlight = refused || unknown, s.parallel
		if !s.sharedActiveLocked(now) {
			// The store is down: keep the release for when it is back, so
			// its slot and what it taught are not lost for a lease time.
			if len(s.pendingReleases) < maxPendingReleases {
				s.pendingReleases = append(s.pendingReleases, *rel)
			}
			s.mu.Unlock()
			return
		}
		store, key := s.shared, s.sharedKey
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		err := store.Release(ctx, key, *rel)
		cancel()
		s.mu.Lock()
		s.sharedResultLocked(err, time.Now())
		s.mu.Unlock()
	})
}

// refund gives back amount of level that a call reserved but did not use
// (the records a list did not return).
func (s *keyState) refund(name string, amount float64) {
	if amount <= 0 {
		return
	}
	s.mu.Lock()
	now := time.Now()
	l := s.levels[name]
	if l == nil {
		s.mu.Unlock()
		return
	}
	l.refill(now)
	l.tokens = min(l.size(), l.tokens+amount)
	s.signal()
	if !s.sharedActiveLocked(now) {
		s.mu.Unlock()
		return
	}
	store, key := s.shared, s.sharedKey
	levels := []SharedLevel{{Name: name, Amount: amount, Rate: l.rate(now), Size: l.size()}}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	err := store.Refund(ctx, key, levels)
	cancel()
	s.mu.Lock()
	s.sharedResultLocked(err, time.Now())
	s.mu.Unlock()
}

// observeLocked follows the server's RateLimit-Policy (quota, window and
// unit of each policy; an unknown policy becomes a level of its own) and
// RateLimit (what remains: the model never holds more than the server says
// is left, less what is still in flight; and the time until full gives the
// refill rate the server really grants, never more than the quota's). A
// quota that differs from the documented one voids the documented capacity:
// the bucket is then taken to hold its quota, or the most the server ever
// said was left. A missing or malformed field changes nothing, and neither
// does a policy the client could only model as never refilling (a quota of
// 0, or a new policy without a window).
func (s *keyState) observeLocked(h http.Header, now time.Time, rel *SharedRelease) (egressReported bool) {
	s.learned = true
	var policies []policyHeader
	if lines := h.Values("RateLimit-Policy"); !slices.Equal(lines, s.lastPolicy) {
		// Servers send the same policies on every answer: parse them
		// only when they change.
		s.lastPolicy = slices.Clone(lines)
		policies = parsePolicyHeader(h)
	}
	for _, p := range policies {
		if p.name == levelParallel || p.unit == "concurrent-requests" {
			if p.name == levelParallel && p.quota > 0 {
				// An uncut cap follows the quota up and down; a cut one
				// stays below it.
				if s.capLimit >= float64(s.parallel) {
					s.capLimit = float64(p.quota)
				}
				s.parallel = int(p.quota)
				s.capLimit = min(s.capLimit, float64(s.parallel))
			}
			continue
		}
		if p.quota <= 0 {
			continue // a quota of nothing would hold every call forever: no model of it
		}
		l := s.levels[p.name]
		if l == nil {
			if p.window <= 0 {
				continue // without a window nothing says how it refills: no model of it
			}
			l = &level{name: p.name, share: 1, tokens: float64(p.quota), at: now}
			s.levels[p.name] = l
			s.levelsVersion++
		}
		l.refill(now)
		l.quota = float64(p.quota)
		if !l.known || p.unit != "requests" {
			l.unit = p.unit // a level of the API keeps its unit unless a header names another than the default
		}
		if p.window > 0 {
			l.window = time.Duration(min(p.window, maxWindowSeconds)) * time.Second
		}
		l.tokens = min(l.tokens, l.size())
	}
	for _, r := range parseLimitHeader(h) {
		l := s.levels[r.name]
		if l == nil {
			continue
		}
		egressReported = egressReported || r.name == levelEgress
		l.refill(now)
		l.seenMax = max(l.seenMax, float64(r.remaining))
		left := float64(r.remaining) - s.demand[r.name]
		l.tokens = min(l.tokens, left)
		if rel != nil {
			rel.Left = append(rel.Left, SharedLevel{Name: l.name, Amount: float64(r.remaining), Rate: l.rate(now), Size: l.size()})
		}
		if r.reset >= minObservedReset && float64(r.remaining) < l.size() && !l.fixed {
			// What others take shows as a slower refill than the quota's:
			// never assume a faster one. t is whole seconds, rounded up,
			// so a short one says little: a nearly full bucket, t=1, may
			// be a millisecond from full.
			l.observedRate = min((l.size()-float64(r.remaining))/float64(r.reset), l.grossRate())
			l.observedUntil = now.Add(observedRateTTL)
		}
	}
	return egressReported
}

// refusedLocked learns from a refusal: a lockout pauses the key; a
// RATE_LIMITED level owes what the server says the call lacks until its
// retry; RATE_LIMITED and OVERLOADED cut the AIMD state; QUOTA_EXHAUSTED
// blocks its policy until it resets.
func (s *keyState) refusedLocked(cl *call, e *Error, now time.Time, rel *SharedRelease) {
	cut := 0.0
	switch e.Code {
	case CodeRateLimited:
		if e.Policy == policyLockout {
			s.pausedUntil = now.Add(e.RetryAfter)
			if rel != nil {
				rel.PausedUntil = s.pausedUntil
			}
		} else if l := s.levels[e.Policy]; l != nil && e.hinted {
			l.refill(now)
			owe := max(cl.amountFor(l), 1) - l.rate(now)*e.RetryAfter.Seconds()
			l.tokens = min(l.tokens, owe)
			if rel != nil {
				rel.Owe = append(rel.Owe, SharedLevel{Name: l.name, Amount: owe, Rate: l.rate(now), Size: l.size()})
			}
		}
		cut = rateLimitCut
	case CodeOverloaded:
		cut = overloadCut
	case "":
		switch e.Status {
		case http.StatusTooManyRequests:
			cut = rateLimitCut
		case http.StatusServiceUnavailable:
			cut = overloadCut
		}
	case CodeQuotaExhausted:
		if policy, until, ok := s.blockLocked(e, now); ok && rel != nil {
			rel.Block, rel.BlockUntil = policy, until
		}
	}
	if cut > 0 {
		s.cutLocked(now, cut)
		if rel != nil {
			rel.Cut, rel.CutFactor = true, cut
		}
	}
}

// cutLocked multiplies the in-flight cap and the pace by factor, at most
// once per cutSpacing so that one burst of refusals counts once.
func (s *keyState) cutLocked(now time.Time, factor float64) {
	if now.Sub(s.lastCut) < cutSpacing && !s.lastCut.IsZero() {
		return
	}
	s.adaptLocked(now)
	wasFull := s.pace >= 1
	s.capLimit = max(1, math.Floor(s.capLimit*factor))
	s.pace = max(minPace, s.pace*factor)
	if wasFull {
		s.paceTokens, s.paceAt = s.paceBurstLocked(now), now
	}
	s.lastCut, s.lastChange = now, now
	s.cuts++
}

// adaptLocked raises the cap and the pace by one step per quiet interval
// since the last change, up to the model's limits.
func (s *keyState) adaptLocked(now time.Time) {
	if s.lastChange.IsZero() {
		s.lastChange = now
		return
	}
	steps := int(now.Sub(s.lastChange) / quietInterval)
	if steps <= 0 {
		return
	}
	s.refillPaceLocked(now)
	s.capLimit = min(float64(s.parallel), s.capLimit+float64(steps))
	s.pace = min(1, s.pace+paceStep*float64(steps))
	s.lastChange = s.lastChange.Add(time.Duration(steps) * quietInterval)
}

func (s *keyState) paceRateLocked(now time.Time) float64 {
	return s.pace * s.levels[levelKey].rate(now)
}

// paceBurstLocked is what the pace lets through at once: paceBurst's worth
// of the paced rate, and at least one point.
func (s *keyState) paceBurstLocked(now time.Time) float64 {
	return max(s.paceRateLocked(now)*paceBurst.Seconds(), 1)
}

func (s *keyState) refillPaceLocked(now time.Time) {
	if now.After(s.paceAt) {
		s.paceTokens = min(s.paceBurstLocked(now), s.paceTokens+s.paceRateLocked(now)*now.Sub(s.paceAt).Seconds())
		s.paceAt = now
	}
}

func neverFits(cl *call, l *level, amount float64) *Error {
	return &Error{
		Operation: cl.op.ID,
		Status:    http.StatusTooManyRequests,
		Title:     "Can never fit",
		Detail:    fmt.Sprintf("the call needs %g %s of the %s level, which holds at most %g", amount, l.unit, l.name, l.size()),
		Policy:    l.name,
		Local:     true,
		permanent: true,
		Request:   redactedRequest(cl.req),
	}
}

func heldError(cl *call, why string, wait time.Duration) *Error {
	detail := fmt.Sprintf("held by %s", why)
	switch why {
	case "refusal-guard":
		detail = fmt.Sprintf("the key had %d refusals in the last %v; the client holds its calls until the window clears, so the server does not lock the key", refusalLimit, refusalWindow)
	case policyLockout:
		detail = "the key is locked out; the client sends nothing until the lockout ends"
	}
	e := &Error{
		Operation: cl.op.ID,
		Status:    http.StatusTooManyRequests,
		Code:      CodeRateLimited,
		Title:     "Held by the client",
		Detail:    detail,
		Policy:    why,
		Local:     true,
		Request:   redactedRequest(cl.req),
	}
	if wait != forever {
		e.RetryAfter = wait
	}
	return e
}

// blockedLocked returns the local refusal of a call that would hit an
// exhausted quota; s.mu is held.
func (s *keyState) blockedLocked(cl *call, now time.Time) error {
	for policy, until := range s.blocks {
		if !now.Before(until) {
			delete(s.blocks, policy)
			continue
		}
		if policy != allLevels && !slices.ContainsFunc(s.takesLocked(cl), func(t levelTake) bool { return t.l.name == policy }) {
			continue
		}
		return &Error{
			Operation:  cl.op.ID,
			Status:     http.StatusTooManyRequests,
			Code:       CodeQuotaExhausted,
			Title:      "Quota exhausted",
			Detail:     fmt.Sprintf("the %s quota is used up until %s; the client does not send calls that would hit it", policyName(policy), until.UTC().Format(time.RFC3339)),
			Policy:     policy,
			ResetsAt:   until,
			RetryAfter: until.Sub(now),
			Local:      true,
			Request:    redactedRequest(cl.req),
		}
	}
	return nil
}

func policyName(p string) string {
	if p == allLevels {
		return "key's"
	}
	return fmt.Sprintf("%q", p)
}

// blockLocked records an exhausted quota from a QUOTA_EXHAUSTED answer, until
// its resetsAt (or, without one, its Retry-After).
func (s *keyState) blockLocked(e *Error, now time.Time) (string, time.Time, bool) {
	until := e.ResetsAt
	if until.IsZero() && e.hinted {
		until = now.Add(e.RetryAfter)
	}
	if until.IsZero() {
		return "", time.Time{}, false
	}
	// A reset further away than any wait the client takes from a server is
	// held for maxHint; the first call after it asks the server again.
	if limit := now.Add(maxHint); until.After(limit) {
		until = limit
	}
	policy := e.Policy
	if l := s.levels[policy]; l == nil {
		policy = allLevels
	}
	if until.After(s.blocks[policy]) {
		s.blocks[policy] = until
	}
	return policy, until, true
}

// Budget is the client's local view of its key's budget: no call is made.
// Use Client.RateLimit for the server's own view.
type Budget struct {
	Levels      []BudgetLevel
	InFlight    int     // budgeted calls of this key in flight in this process
	InFlightCap int     // the adaptive cap on them
	Pace        float64 // the share of the key's rate the client allows itself now (1 = all)
	Cuts        int     // how often RATE_LIMITED or OVERLOADED cut cap and pace
	Waiting     int     // calls waiting for the budget now
	Waits       int64   // calls that waited so far
	Waited      time.Duration
	Refusals    int       // 429 answers in the last 60 s
	PausedUntil time.Time // the end of a lockout the server reported, if any
}

// BudgetLevel is the client's model of one server level.
type BudgetLevel struct {
	Name      string
	Unit      string // points, requests or records
	Quota     int    // per Window, for this key
	Window    time.Duration
	Capacity  int
	Remaining float64       // what the client believes is left (may be negative after a refusal)
	FullIn    time.Duration // until the level is full again
}

// Budget returns the local view of the key's budget, shared by every Client
// of this process that uses the same key on the same host.
func (c *Client) Budget() Budget {
	s := c.state
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.adaptLocked(now)
	s.pruneRefusalsLocked(now)
	b := Budget{
		InFlight:    s.inflight,
		InFlightCap: int(s.capLimit),
		Pace:        s.pace,
		Cuts:        s.cuts,
		Waiting:     len(s.queue),
		Waits:       s.waits,
		Waited:      s.waited,
		Refusals:    len(s.refusals),
		PausedUntil: s.pausedUntil,
	}
	for _, l := range s.levels {
		l.refill(now)
		full := l.fullIn(now)
		if full == forever {
			full = 0
		}
		b.Levels = append(b.Levels, BudgetLevel{
			Name: l.name, Unit: l.unit, Quota: int(l.quota * l.share), Window: l.window,
			Capacity: int(l.size()), Remaining: l.tokens, FullIn: full,
		})
	}
	slices.SortFunc(b.Levels, func(x, y BudgetLevel) int { return strings.Compare(x.Name, y.Name) })
	return b
}
