package budget

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The lockout guard. The server locks a key for 5 minutes after more than 50
// refusals in 60 s; the client keeps the key's refusals, plus the attempts in
// flight that could still be refused, at or below half of that in any 60 s
// window, and holds further attempts on the key until the window clears.
const (
	RefusalLimit  = 25
	RefusalWindow = 60 * time.Second
)

// Reasons a call waits, as WaitEvent and the hold errors name them (besides
// a level's name).
const (
	ReasonInFlight = "in-flight"
	ReasonPace     = "pace"
	ReasonGuard    = "refusal-guard"
	ReasonLockout  = Lockout
	ReasonServer   = "server-wait" // a wait the server asked of every call of the key
	ReasonStore    = "shared-store"
)

// Demand is what a call takes from one documented level.
type Demand struct {
	Level  string
	Amount float64
}

// Call is one call as the budget sees it. The caller fills the exported
// fields and passes the same Call to every Admit of the call's attempts.
type Call struct {
	Op       string   // operationId: learned policies are tied to operations
	Cost     float64  // points
	Demand   []Demand // what it takes from the documented levels
	Target   string   // method and path: a partitioned policy holds one target
	Budgeted bool     // false: only the lockout and the guard apply
	// MaxHold, when positive, is the longest wait the server asked of the
	// key that the call sits out: a lockout, a wait for every call of the
	// key, a refusal's wait on a level it takes from, or the shared
	// store's pause or refusal's wait (budgetstore.Grant.Refusal),
	// whichever process heard it. A longer one fails the
	// attempt at once with a HoldError that wraps ErrHoldTooLong.
	MaxHold time.Duration
	// PastLevels lets a budgeted call pass the pace and every level whose
	// word from the server is StaleAfter old (it still takes from them),
	// but not a level the server spoke of since or one a refusal holds:
	// the client's own status request, which asks whether a level the
	// model believes exhausted is, and must not be refused by a level the
	// server has just said is.
	PastLevels bool
	// Status marks a call that asks for the key's status (GET
	// /v1/rate_limit): ObserveStatus reads its answer against what landed
	// on each level after it was admitted.
	Status bool
	// OnSlow, when set, hears of the call once, when one of its attempts
	// has waited SlowAfter and is still held: from the waiting goroutine,
	// without the state's lock held, with the context of Admit.
	OnSlow func(context.Context, SlowWait)
	// OnHeld, when set, hears of the call whenever what holds it changes
	// (a level's name or a Reason constant); s.mu is not held. It returns a channel that closes when what it started to
	// put the model right (a status request) has ended, or nil: a call
	// whose deadline the model's wait would pass waits for it and looks
	// again instead of failing at once.
	OnHeld   func(reason string) <-chan struct{}
	heldSaid string // what OnHeld heard of last
	// landedAt is, for a Status call, what had landed on each level when
	// its last attempt was admitted.
	landedAt map[*level]float64

	kindKey      string // see kind
	attempts     int    // attempts admitted so far
	w            waiter
	slowSaid     bool   // OnSlow has heard of the call
	reported     *level // the egress level, when the last answer's RateLimit named it
	takes        []take
	takesBuf     [8]take // where takes live when they fit
	takesVersion int
	takesState   *State // the state whose levels takes holds
	ticket       Ticket
}

type take struct {
	l      *level
	amount float64
	mark   float64 // the level's admitted count before this take
	landed float64 // what had landed on the level when it was taken
}

// State is the model of one API key on one host. Every client of the
// process with the same key and host shares it (see For).
type State struct {
	mu sync.Mutex

	id      string                // its key in the map of For; "" for a state of New
	retired atomic.Bool           // dropped from the map of For when idle (set with mu and the map's lock held)
	next    atomic.Pointer[State] // the state that replaced a retired one, last time it looked
	lastUse time.Time             // the last admission, answer or creation

	ident        identity     // whom the key belongs to; guarded by the lock of states
	identWanted  atomic.Bool  // a client should fetch ident (WantsIdentity)
	identRetryAt atomic.Int64 // not before then (unix nanoseconds), after a failure

	levels   map[string]*level
	order    []*level // levels in the order they were made, for stable iteration
	version  int      // counts the levels added
	parallel int      // the server's parallel quota
	inflight int      // budgeted attempts in flight

	pace     pace    // AIMD of what speaks of the key as a whole: its share of the key's rate and of the parallel slots
	meanCost float64 // the points of the calls admitted lately, on average (meanCostWeight)
	passed   meter   // the answers that came from the API, not from a limiter in front

	seq                    uint64
	waiting                int
	pauseGate, guardGate   gate
	paceGate, slotGate     gate
	storeGate              gate
	lockedUntil, heldUntil time.Time // a lockout (every call); the server's wait for the key (budgeted calls)
	read                   reading   // refusals whose answers are being read (Ticket.Reading)
	heldWhy                string

	refusals []time.Time // 429 answers in the last RefusalWindow, oldest first
	reserved int         // attempts in flight, each a possible refusal
	blocks   map[string]block

	waits  int64
	waited time.Duration

	learned    bool // slow start is over: an answer came, or SlowStartHold passed without one
	lastPolicy []string

	// The bounds on learned levels (bounds.go).
	learnedPolicies, partitions int
	overflowSaid, overflowDue   bool // an overflow was noted; it is still to be logged
	levelsSweptAt               time.Time
	slowStartAt                 time.Time     // when slow start let its call out alone (SlowStartHold)
	statusAt                    time.Time     // when StatusFor last started a status request
	statusDone                  chan struct{} // closes when that request ends; nil when none is on its way

	store
}

// block is an exhausted quota: until when, and for a policy the client has
// no model of, the one operation it refused.
type block struct {
	until time.Time
	op    string
	name  string
}

var states = struct {
	sync.Mutex
	m      map[string]*State
	hosts  map[string]map[*State]struct{} // the states of each host (identity.go)
	groups map[string]map[*State]struct{} // the states of each principal and org (identity.go)
}{m: map[string]*State{}, hosts: map[string]map[*State]struct{}{}, groups: map[string]map[*State]struct{}{}}

// IdleTTL is how long a state of For stays in the map without a call. It
// leaves it then only when nothing is pending: no call in flight or waiting,
// no lockout, server's wait or exhausted quota still running, no refusal in
// the guard's window and no release the shared store has not had. A key
// that comes back gets a new state, which learns the key's levels from the
// server's headers again; a State a Client still holds passes its calls on
// to the new one.
const IdleTTL = 10 * time.Minute

// sweepEvery is how often at most the map is swept for idle states.
const sweepEvery = time.Minute

// lastSweep is when the map was last swept, in Unix nanoseconds.
var lastSweep atomic.Int64

// For returns the shared state of apiKey on host. The map is keyed by a hash
// of the key, never the key itself.
func For(host, apiKey string) *State {
	now := time.Now()
	maybeSweep(now)
	return forID(host+"/"+KeyHash(apiKey), nil, now)
}

// KeyHash is the hex SHA-256 of apiKey, by which For tells keys apart.
func KeyHash(apiKey string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return hex.EncodeToString(sum[:])
}

// forID returns the state of id in the map, made when there is none; a new
// one uses from's shared store (see UseStore) when from is not nil.
func forID(id string, from *State, now time.Time) *State {
	states.Lock()
	defer states.Unlock()
	s := states.m[id]
	if s == nil {
		s = New()
		s.id, s.lastUse = id, now
		if from != nil {
			from.mu.Lock()
			s.store = store{shared: from.shared, sharedKey: from.sharedKey, logger: from.logger,
				storeSeq: from.storeSeq, member: from.member, members: from.members, share: from.share}
			from.mu.Unlock()
		}
		states.m[id] = s
		joinHostLocked(s)
	}
	return s
}

// live returns the state that holds s's key now: s, or when s was retired,
// the one in the map of For.
func (s *State) live() *State {
	if !s.retired.Load() {
		return s
	}
	if n := s.next.Load(); n != nil && !n.retired.Load() {
		return n
	}
	n := forID(s.id, s, time.Now())
	s.next.Store(n)
	return n
}

// maybeSweep sweeps the map when it was last swept sweepEvery ago or more
// (or when the clock went back, as it does between synctest bubbles).
func maybeSweep(now time.Time) {
	last, n := lastSweep.Load(), now.UnixNano()
	if n-last < int64(sweepEvery) && n >= last || !lastSweep.CompareAndSwap(last, n) {
		return
	}
	sweep(now)
}

// sweep retires the states of the map that are idle (idleLocked) and drops
// them from it; a state busy at the moment is left for the next sweep.
func sweep(now time.Time) {
	states.Lock()
	defer states.Unlock()
	before := len(states.m)
	for id, s := range states.m {
		if !s.mu.TryLock() {
			continue
		}
		idle := s.idleLocked(now)
		if idle {
			s.retired.Store(true)
			delete(states.m, id)
		}
		s.mu.Unlock()
		if idle {
			leaveLocked(s)
		}
	}
	if n := len(states.m); n < before/4 {
		// A map keeps its tables when entries leave: copy what is left
		// into one of its size.
		m := make(map[string]*State, n)
		for id, s := range states.m {
			m[id] = s
		}
		states.m = m
	}
}

// idleLocked reports whether s has had no use for IdleTTL and holds nothing
// that forgetting it would lose: a call in flight or waiting, a lockout, a
// server's wait or an exhausted quota still running, a refusal in the
// guard's window, a release the shared store has not had.
func (s *State) idleLocked(now time.Time) bool {
	if s.waiting > 0 || s.reserved > 0 || s.inflight > 0 || len(s.pending) > 0 || len(s.leases) > 0 ||
		now.Sub(s.lastUse) < IdleTTL || now.Before(s.lockedUntil) || now.Before(s.heldUntil) {
		return false
	}
	s.pruneRefusalsLocked(now)
	if len(s.refusals) > 0 {
		return false
	}
	for _, b := range s.blocks {
		if now.Before(b.until) {
			return false
		}
	}
	for _, l := range s.order {
		if now.Before(l.holdUntil) {
			return false
		}
	}
	return true
}

// New returns a state of its own, with the documented levels.
func New() *State {
	s := &State{
		levels:   documentedLevels(),
		parallel: 6,
		pace:     newPace(),
		blocks:   map[string]block{},
	}
	for _, name := range []string{Key, Write, Principal, Org, Delete, DeleteDay, Egress} {
		s.order = append(s.order, s.levels[name])
	}
	s.pauseGate.name, s.guardGate.name = ReasonServer, ReasonGuard
	s.paceGate.name, s.slotGate.name, s.storeGate.name = ReasonPace, ReasonInFlight, ReasonStore
	return s
}

// Event says how long an admitted attempt waited and what held it last.
type Event struct {
	Wait   time.Duration
	Reason string
}

// SlowAfter is how long an attempt waits before Call.OnSlow hears of it.
const SlowAfter = 5 * time.Second

// SlowWait describes a call that has waited SlowAfter and is still held.
type SlowWait struct {
	Op     string
	Reason string        // what holds it: a level's name, or one of the Reason constants
	Waited time.Duration // how long the attempt has waited so far
	// Remaining is how much longer it should wait, for the calls ahead of
	// it and itself, as far as the model can tell; negative when it cannot
	// (a call held for a slot in flight waits for answers).
	Remaining time.Duration
	Behind    int // calls that wait behind it for the same thing
}

// Ticket is an admitted attempt; end it with Finish or Unanswered.
type Ticket struct {
	s        *State
	c        *Call
	taken    []take
	budgeted bool
	lease    string
	ref      leaseRef // the store the lease is in
	start    time.Time
	once     sync.Once
	reading  bool // its answer is a refusal being read (Reading)
	ended    bool // Finish or Unanswered has run
}

// HoldError is a call that was still held when its context ended or whose
// deadline falls before the earliest moment it could go.
type HoldError struct {
	Reason string        // what held it: a level, or one of the Reason constants
	Wait   time.Duration // the least it still had to wait; 0 when unknown
	Err    error         // the context's error
}

func (e *HoldError) Error() string { return "held by " + e.Reason + ": " + e.Err.Error() }

// ErrHoldTooLong is the Err of a HoldError whose wait, one the server asked
// of the key, is longer than the call's MaxHold.
var ErrHoldTooLong = errors.New("the server's wait is longer than the call waits")

func (e *HoldError) Unwrap() error { return e.Err }

// NeverFitsError is a call bigger than a documented level can ever hold.
type NeverFitsError struct {
	Level, Unit  string
	Amount, Size float64
}

func (e *NeverFitsError) Error() string { return "the call can never fit the " + e.Level + " level" }

// ExhaustedError is a call that an exhausted quota would refuse.
type ExhaustedError struct {
	Policy string // "" when the server named none the client knows
	Until  time.Time
}

func (e *ExhaustedError) Error() string { return "quota " + e.Policy + " exhausted" }

// takesLocked returns the levels c takes from and how much: its documented
// demand, and the learned policies the server tied to its operation. It is
// worked out once per call, again only when a level was added since.
func (s *State) takesLocked(c *Call) []take {
	if c.takes != nil && c.takesVersion == s.version && c.takesState == s {
		return c.takes
	}
	takes := c.takes[:0]
	if takes == nil || c.takesState != s {
		takes = c.takesBuf[:0]
	}
	for _, d := range c.Demand {
		if l := s.levels[d.Level]; l != nil && d.Amount > 0 {
			takes = append(takes, take{l: l, amount: d.Amount})
		}
	}
	for _, l := range s.order {
		if !l.known && l.applies(c.kind(), c.Target) {
			if a := l.amountFor(c.Cost); a > 0 {
				takes = append(takes, take{l: l, amount: a})
			}
		}
	}
	if takes == nil {
		takes = []take{}
	}
	c.takes, c.takesVersion, c.takesState = takes, s.version, s
	return takes
}

// Admit lets one attempt of c go. It refuses at once, without sending, a
// call that a known exhausted quota would refuse or that can never fit a
// documented level; otherwise it waits until every gate of the call lets it
// go: the server's waits, the lockout guard, and for a budgeted call each
// level it takes from, the pace and the in-flight cap (or the shared
// store). When ctx's deadline falls before the earliest moment it could go,
// it fails at once. A state that left the map of For (IdleTTL) passes the
// call on to the key's state there.
func (s *State) Admit(ctx context.Context, c *Call) (*Ticket, Event, error) {
	s = s.live()
	s.mu.Lock()
	if s.retired.Load() { // retired since live looked
		s.mu.Unlock()
		return s.Admit(ctx, c)
	}
	now := time.Now()
	start := now
	if c.Budgeted {
		for _, t := range s.takesLocked(c) {
			if t.l.documented() && t.amount > t.l.fitSize() {
				s.mu.Unlock()
				return nil, Event{}, &NeverFitsError{Level: t.l.name, Unit: t.l.unit, Amount: t.amount, Size: t.l.fitSize()}
			}
		}
	}
	w := &c.w
	s.seq++
	w.seq, w.at, w.c = s.seq, nil, c
	s.waiting++
	var slow *time.Timer // fires when the attempt has waited SlowAfter, for c.OnSlow
	fail := func(err error) (*Ticket, Event, error) {
		w.leave()
		s.waiting--
		s.mu.Unlock()
		if slow != nil {
			slow.Stop()
		}
		return nil, Event{}, err
	}
	var reason string
	var wait time.Duration
	var waitFrom time.Time // when wait was worked out
	for {
		if ctx.Err() != nil {
			return fail(&HoldError{Reason: reason, Err: ctxErr(ctx)})
		}
		if err := s.blockedLocked(c, now); err != nil {
			return fail(err)
		}
		g, d, why := s.holdLocked(c, now)
		lease, refusal := "", false
		if g == nil && s.sharedActiveLocked(now) {
			var err error
			lease, d, why, refusal, err = s.acquireSharedLocked(c, now)
			now = time.Now()
			if err != nil {
				return fail(err)
			}
			if why == "" && lease == "" {
				continue // the store failed: the local budget decides
			}
			if why != "" {
				g = &s.storeGate
			}
		}
		if g == nil {
			passed := w.at
			if passed != nil && passed.head() == w {
				passed = nil
			}
			s.takeLocked(c, now)
			if passed != nil {
				passed.wakeHead() // it passed the first waiter, which looks again (and lets the next try)
			}
			var waited time.Duration
			if reason != "" { // held at least once, not merely slowed by a store's round trip
				waited = now.Sub(start)
				s.waits++
				s.waited += waited
			}
			c.ticket = Ticket{s: s, c: c, taken: c.takes, budgeted: c.Budgeted, lease: lease, ref: s.leases[lease], start: now}
			s.lastUse = now
			s.mu.Unlock()
			if slow != nil {
				slow.Stop()
			}
			maybeSweep(now)
			return &c.ticket, Event{Wait: waited, Reason: reason}, nil
		}
		reason, wait, waitFrom = why, d, now
		if asked, ok := s.serverWaitLocked(g, d, why, refusal, now); ok && c.MaxHold > 0 && asked > c.MaxHold {
			return fail(&HoldError{Reason: why, Wait: asked, Err: ErrHoldTooLong})
		}
		var statusDue time.Time // when it asks again for the status, held all along
		if c.OnHeld != nil && g.level != nil {
			statusDue = s.reaskDueLocked(g.level)
		}
		// It says what holds it when that changes, and again when the
		// level that holds it is due a status (reaskDueLocked): the
		// first status may have come too early to show the level
		// refilling, and the calls that wait all along need the next.
		sayHeld := c.OnHeld != nil && (c.heldSaid != why || !statusDue.IsZero() && !now.Before(statusDue))
		c.heldSaid = why
		if deadline, ok := ctx.Deadline(); ok && wait != forever && deadline.Sub(now) < wait {
			if sayHeld {
				// It waits for the status out of every queue, so that it
				// holds no one back, the status request least of all.
				w.leave()
				s.mu.Unlock()
				if asked := c.OnHeld(why); asked != nil {
					select {
					case <-asked:
					case <-ctx.Done():
					}
					s.mu.Lock()
					now = time.Now()
					continue
				}
				s.mu.Lock()
			}
			return fail(&HoldError{Reason: why, Wait: wait, Err: context.DeadlineExceeded})
		}
		if w.wake == nil {
			w.wake = make(chan struct{}, 1)
		}
		select {
		case <-w.wake: // what it said is in the state just read
		default:
		}
		w.enter(g)
		head := g.head() == w
		timerWait := wait
		if head && g.level != nil && len(g.q.ws) > 1 {
			// A cheap call behind may fit before the first does: look
			// again whenever the level frees something, and let the
			// waiters behind try to pass (level.backfills).
			timerWait = min(timerWait, g.level.nextFree(now))
			if w.promisedBy == g.level {
				// When its promise runs out, what was held back to keep
				// it may go: look again then.
				if d := w.promised.Add(w.slack).Sub(now); d > 0 {
					timerWait = min(timerWait, d+time.Millisecond)
				}
			}
			g.wakeBehind()
		}
		if d, held := s.slowStartDueLocked(now); head && g == &s.slotGate && held {
			timerWait = min(timerWait, d)
		}
		if head && !statusDue.IsZero() {
			next := statusDue
			if !next.After(now) {
				next = now.Add(statusEvery) // it asks now: the next is due then
			}
			timerWait = min(timerWait, next.Sub(now))
		}
		s.mu.Unlock()
		if sayHeld {
			c.OnHeld(why)
		}

		var timer *time.Timer
		var timeout <-chan time.Time
		if head && timerWait > 0 && timerWait != forever {
			timer = time.NewTimer(timerWait)
			timeout = timer.C
		}
		var speak <-chan time.Time
		if c.OnSlow != nil && !c.slowSaid {
			if slow == nil {
				slow = time.NewTimer(start.Add(SlowAfter).Sub(now))
			}
			speak = slow.C
		}
	held:
		for {
			select {
			case <-w.wake:
			case <-timeout:
			case <-ctx.Done():
			case <-speak:
				// Still held: say so once, then go on waiting for what
				// the attempt waited for.
				speak = nil
				s.mu.Lock()
				c.slowSaid = true
				sw := s.slowLocked(c, reason, wait, waitFrom, start)
				s.mu.Unlock()
				c.OnSlow(ctx, sw)
				continue
			}
			break held
		}
		if timer != nil {
			timer.Stop()
		}
		s.mu.Lock()
		now = time.Now()
	}
}

// slowLocked describes c, held since start: reason and wait are what
// holdLocked said at waitFrom. Held by a level, c is said to wait for the
// level of its call it waits for longest, for what the calls ahead of it in
// its queue and it need of that level; of levels it waits for equally long,
// the one of its class (write, delete, egress) rather than the points.
func (s *State) slowLocked(c *Call, reason string, wait time.Duration, waitFrom, start time.Time) SlowWait {
	now := time.Now()
	w := &c.w
	sw := SlowWait{Op: c.Op, Reason: reason, Waited: now.Sub(start), Remaining: -1}
	g := w.at
	if g == nil {
		return sw
	}
	for _, o := range g.q.ws {
		if o.seq > w.seq {
			sw.Behind++
		}
	}
	if g.level == nil {
		if wait != forever {
			sw.Remaining = max(wait-now.Sub(waitFrom), 0)
		}
		return sw
	}
	longest := time.Duration(0)
	for _, t := range c.takes {
		l := t.l
		need := l.need(t.amount)
		for _, o := range g.q.ws {
			if o.seq < w.seq && o.c != nil {
				for _, ot := range o.c.takes {
					if ot.l == l {
						need += l.need(ot.amount)
					}
				}
			}
		}
		l.refill(now)
		d := l.wait(need, now)
		if d == forever && l.grossRate() > 0 {
			d = durationOf(max(need-l.available(now), 0) / l.grossRate())
		}
		if d != forever {
			d = max(d, l.holdUntil.Sub(now))
		}
		if d > 0 && d >= longest {
			longest, sw.Reason = d, l.name
		}
	}
	if longest != forever {
		sw.Remaining = longest // 0: it goes as soon as it looks again
	}
	return sw
}

// holdLocked returns the first gate that holds c now, how long at least it
// must wait there (forever when only a release or an answer can help) and
// why; nil when c may go (or, with the shared store active, may ask it).
func (s *State) holdLocked(c *Call, now time.Time) (*gate, time.Duration, string) {
	w := &c.w
	pausedUntil := s.lockedUntil
	why := ReasonLockout
	if c.Budgeted && s.heldUntil.After(pausedUntil) {
		pausedUntil, why = s.heldUntil, s.heldWhy
	}
	if now.Before(pausedUntil) || s.pauseGate.ahead(w) {
		return &s.pauseGate, max(pausedUntil.Sub(now), 0), why
	}
	s.pruneRefusalsLocked(now)
	share := s.shareLocked(now)
	guard := RefusalLimit
	if share.on {
		guard = share.refusals
	}
	if len(s.refusals)+s.reserved >= guard || s.guardGate.ahead(w) {
		d := forever
		if len(s.refusals)+s.reserved < guard {
			d = 0
		} else if len(s.refusals) > 0 {
			d = s.refusals[0].Add(RefusalWindow).Sub(now)
		}
		if share.on {
			d = min(d, s.reprobeLocked(now))
		}
		return &s.guardGate, d, ReasonGuard
	}
	if !c.Budgeted {
		return nil, 0, ""
	}
	if s.sharedActiveLocked(now) {
		if s.storeGate.ahead(w) {
			return &s.storeGate, 0, ReasonStore
		}
		if _, held := s.slowStartDueLocked(now); held || s.slotGate.ahead(w) {
			return &s.slotGate, forever, ReasonInFlight
		}
		if share.on && s.inflight >= share.slots {
			return &s.slotGate, s.reprobeLocked(now), ReasonInFlight
		}
		return nil, 0, ""
	}
	if share.on && now.Before(s.drainUntil) {
		return &s.slotGate, s.drainUntil.Sub(now), ReasonInFlight
	}
	s.adaptLocked(now)
	for _, t := range s.takesLocked(c) {
		l := t.l
		l.refill(now)
		d := max(l.holdUntil.Sub(now), 0)
		if c.PastLevels && d == 0 && now.Sub(l.seenAt) >= StaleAfter {
			continue
		}
		if d == 0 {
			d = l.wait(l.need(t.amount), now)
		}
		why := l.name
		if d == 0 {
			if l.pace.adapt(now) {
				l.gate.wakeHead()
			}
			rate := l.rate(now)
			if l.pace.spread, l.pace.minBurst = l.spreads(), spreadBurst*l.size(); l.pace.spread {
				rate = l.spreadRate(now)
			}
			if d = l.pace.wait(l.need(t.amount), rate, now); d > 0 {
				why = ReasonPace // the level's pace, not what the level holds: no status would help
			}
		}
		if d > 0 || l.gate.ahead(w) && !l.backfills(l.gate.head(), t.amount, now) {
			if w.at != &l.gate {
				w.need = l.need(t.amount)
			}
			return &l.gate, d, why
		}
	}
	if !c.PastLevels {
		amount, rate := s.paceUnitLocked(c, now)
		d := s.pace.wait(amount, rate, now)
		if until := s.levels[Key].observedUntil; d > 0 && now.Before(until) {
			d = min(d, until.Sub(now)) // the rate changes then: look again
		}
		if d > 0 || s.paceGate.ahead(w) {
			return &s.paceGate, d, ReasonPace
		}
	}
	return s.slotLocked(w, share, now)
}

// serverWaitLocked returns how long g holds a call for a wait the server
// asked of the key, given d and why from holdLocked or the shared store
// (refusal: the store's wait is a refusal's); false when what holds it is
// the client's own model (a level's tokens, the pace, the slots, the
// guard).
func (s *State) serverWaitLocked(g *gate, d time.Duration, why string, refusal bool, now time.Time) (time.Duration, bool) {
	switch {
	case g == &s.pauseGate, g == &s.storeGate && (why == ReasonLockout || refusal):
		return d, true
	case g.level != nil && now.Before(g.level.holdUntil):
		return g.level.holdUntil.Sub(now), true
	}
	return 0, false
}

// SlowStartHold is how long the call out alone in slow start (no answer
// yet) holds the key's other calls: then slow start ends as an answer ends
// it, and calls go up to the adaptive cap (at most the parallel quota), so
// that calls that never get an answer hold the others for SlowStartHold at
// most, however many there are.
const SlowStartHold = 30 * time.Second

// slowStartDueLocked reports whether slow start holds calls because the
// call let out alone has not been answered, and how long until it ends.
func (s *State) slowStartDueLocked(now time.Time) (time.Duration, bool) {
	if s.learned || s.inflight == 0 {
		return 0, false
	}
	d := s.slowStartAt.Add(SlowStartHold).Sub(now)
	return d, d > 0
}

// slotLocked holds w while the calls in flight are at the adaptive cap, or
// at the slots of the fallback share while that applies.
func (s *State) slotLocked(w *waiter, share fallbackShare, now time.Time) (*gate, time.Duration, string) {
	limit := s.pace.capOf(s.parallel)
	if !s.learned {
		limit = 1 // slow start: one call until an answer has shown the server's policies
		if _, held := s.slowStartDueLocked(now); !held && s.inflight > 0 {
			s.learned = true // out SlowStartHold unanswered: it ends as an answer would
			limit = s.pace.capOf(s.parallel)
		}
	}
	if share.on && s.inflight >= share.slots {
		return &s.slotGate, s.reprobeLocked(now), ReasonInFlight
	}
	if s.inflight >= limit || s.slotGate.ahead(w) {
		return &s.slotGate, forever, ReasonInFlight
	}
	return nil, 0, ""
}

// takeLocked admits c: it leaves its queue and takes its demand.
func (s *State) takeLocked(c *Call, now time.Time) {
	c.w.leave()
	s.waiting--
	s.reserved++
	if !c.Budgeted {
		return
	}
	s.inflight++
	if !s.learned && s.inflight == 1 {
		s.slowStartAt = now
	}
	c.reported = nil
	c.attempts++
	takes := s.takesLocked(c)
	for i := range takes {
		t := &takes[i]
		t.mark, t.landed = t.l.admitted, t.l.landed
		t.l.admitted += t.amount
		t.l.tokens -= t.amount
		t.l.sinceSeen += t.amount
		t.l.inflight += t.amount
		t.l.pace.take(t.l.need(t.amount), now)
		t.l.usedAt = now
	}
	amount, _ := s.paceUnitLocked(c, now)
	s.pace.take(amount, now)
	if s.meanCost == 0 {
		s.meanCost = c.Cost
	}
	s.meanCost += (c.Cost - s.meanCost) * meanCostWeight
	if c.Status {
		c.landedAt = make(map[*level]float64, len(s.levels))
		for _, l := range s.levels {
			c.landedAt[l] = l.landed
		}
	}
}

// pruneRefusalsLocked drops the refusals older than the guard's window.
func (s *State) pruneRefusalsLocked(now time.Time) {
	cut := 0
	for cut < len(s.refusals) && now.Sub(s.refusals[cut]) >= RefusalWindow {
		cut++
	}
	if cut > 0 {
		s.refusals = s.refusals[cut:]
	}
}

// blockedLocked returns the local refusal of a call that would hit an
// exhausted quota.
func (s *State) blockedLocked(c *Call, now time.Time) error {
	for id, b := range s.blocks {
		if !now.Before(b.until) {
			delete(s.blocks, id)
			continue
		}
		if b.op != "" {
			if b.op != c.Op {
				continue
			}
		} else if !slices.ContainsFunc(s.takesLocked(c), func(t take) bool { return t.l.name == b.name }) {
			continue
		}
		return &ExhaustedError{Policy: b.name, Until: b.until}
	}
	return nil
}

// Settle gives back amount of a level that c's answered attempt reserved
// but did not use (the records a list did not return). When the answer's
// RateLimit named the level, what is left is the server's word already and
// only the key's own log is corrected.
func (s *State) Settle(c *Call, name string, amount float64) {
	if amount <= 0 {
		return
	}
	s = s.live()
	s.mu.Lock()
	now := time.Now()
	l := s.levels[name]
	if l == nil {
		s.mu.Unlock()
		return
	}
	l.refill(now)
	l.log.refund(amount)
	if c.reported == l {
		s.mu.Unlock()
		return
	}
	l.tokens = min(max(l.size(), l.tokens), l.tokens+amount)
	l.sinceSeen -= amount
	l.gate.wakeHead()
	s.refundSharedLocked(c, l, amount, now) // unlocks
}

// ctxErr is why ctx ended: ctx.Err(), and its cause as well when that is
// another error (context.WithTimeoutCause), so that errors.Is finds both.
func ctxErr(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}

// meanCostWeight is the weight of each admitted call in State.meanCost.
const meanCostWeight = 0.05

// paceUnitLocked is what c takes from the key's pace, and the pace's rate
// at a share of 1: the call's points at the key level's rate, or while a
// limiter that gave no hint may be in front, one request at the rate of
// requests that the key level's rate allows calls of the mean cost. Such
// a limiter most likely counts requests, and a burst of cheap calls is a
// burst to it.
func (s *State) paceUnitLocked(c *Call, now time.Time) (amount, rate float64) {
	rate = s.levels[Key].rate(now)
	if s.pace.hintless.IsZero() || now.Sub(s.pace.hintless) >= hintlessFor {
		return c.Cost, rate
	}
	return 1, rate / max(s.meanCost, 1)
}

// adaptLocked raises the key's pace and those of its levels by a step per
// quiet interval since their last change; a raised one wakes its waiters.
func (s *State) adaptLocked(now time.Time) {
	if s.pace.adapt(now) {
		s.slotGate.wakeHead()
		s.paceGate.wakeHead()
	}
}

// kind is what a learned policy is tied to: the operation and the call's
// cost, which tells calls of one operation apart where the API charges them
// differently (a list with a search q and one without).
func (c *Call) kind() string {
	if c.kindKey == "" {
		c.kindKey = c.Op + "@" + strconv.FormatFloat(c.Cost, 'g', -1, 64)
	}
	return c.kindKey
}
