package budget

import (
	"sync"
	"sync/atomic"
	"time"
)

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
	order    []*level  // levels in the order they were made, for stable iteration
	version  int       // counts the levels added
	parallel int       // the server's parallel quota
	inflight int       // budgeted attempts in flight
	sent     sentCount // budgeted attempts admitted so far
	open     sentCount // budgeted attempts not answered yet

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
	flight                      int           // calls of slow start's flight not answered yet
	flightLeft                  int           // the calls slow start's flight still takes: the cap at its first answer, less those it took
	flightHold                  time.Duration // how long at most the flight holds the calls after it once its last call went
	flightUntil                 time.Time     // the flight holds the calls after it until then at most
	statusAt                    time.Time     // when StatusFor last started a status request
	sentAt                      time.Time     // when the last budgeted call other than a status was admitted
	statusDone                  chan struct{} // closes when that request ends; nil when none is on its way
	statusLevel                 *level        // the level that request was about

	store
}

// New returns a state of its own, with the documented levels.
func New() *State {
	s := &State{parallel: 6, pace: newPace(), blocks: map[string]block{}}
	s.addDocumentedLevels()
	s.outagePart = 1
	return s
}
