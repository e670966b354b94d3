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

	levels   map[string]*level // by policy name; a partition by name, NUL, pk
	order    []*level          // levels in the order they were made, for stable iteration
	version  int               // counts the levels added
	parallel int               // the server's parallel quota
	inflight int               // budgeted attempts in flight
	sent     sentCount         // budgeted attempts admitted so far
	open     sentCount         // budgeted attempts not answered yet

	pace     pace    // AIMD of what speaks of the key as a whole: its share of the key's rate and of the parallel slots
	meanCost float64 // the points of the calls admitted lately, on average (meanCostWeight)
	passed   meter   // the answers that came from the API, not from a limiter in front

	seq         uint64    // numbers the admissions, for arrival order in the gates' queues
	waiting     int       // calls in Admit
	lockGate    gate      // the calls a lockout holds (gate_pause.go)
	serverGate  gate      // the budgeted calls the server's wait holds (gate_pause.go)
	guardGate   gate      // the calls the refusal guard holds (gate_guard.go)
	paceGate    gate      // the calls the key's pace holds (gate_pace.go)
	slotGate    gate      // the calls waiting for a slot in flight (gate_slots.go)
	storeGate   gate      // the calls waiting for the shared store (gate_store.go)
	lockedUntil time.Time // a lockout: no call goes before
	heldUntil   time.Time // the server's wait for the key: no budgeted call goes before
	read        reading   // refusals whose answers are being read (Ticket.Reading)

	refusals []time.Time      // 429 answers in the last RefusalWindow, oldest first
	reserved int              // attempts in flight, each a possible refusal
	blocks   map[string]block // exhausted quotas, by policy; one with no known scope by policy, NUL, operation (exhausted.go)

	waits  int64         // calls that waited, so far
	waited time.Duration // how long they waited in all

	slowStart  slowStart     // the first call alone, then a flight on its answer (gate_slots.go)
	lastPolicy []string      // the last RateLimit-Policy field, as it came
	bounds     learnedBounds // what bounds the learned levels (bounds.go)
	status     statusRequest // the status requests StatusFor makes (status.go)

	store
}

// New returns a state of its own, with the documented levels.
func New() *State {
	s := &State{parallel: 6, pace: newPace(), blocks: map[string]block{}}
	s.addDocumentedLevels()
	s.outagePart, s.kick = 1, make(chan struct{}, 1)
	return s
}
