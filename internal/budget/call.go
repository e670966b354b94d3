package budget

import (
	"context"
	"strconv"
	"sync"
	"time"
)

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
	// key, a refusal's wait on a level it takes from, the moment of a
	// level's word that leaves the call too little until then (a
	// RateLimit t) when even a bucket refilling at the quota's rate would
	// hold it longer, or the shared store's pause or refusal's wait
	// (budgetstore.Grant.Refusal), whichever process was told it. A
	// longer one fails the attempt at once with a HoldError that wraps
	// ErrHoldTooLong.
	MaxHold time.Duration
	// PastLevels lets a budgeted call pass the pace and every level others
	// take from (other keys, other processes, or a learned policy) whose
	// word from the server is StaleAfter old (it still takes from them),
	// but not a level the server spoke of since or one a refusal holds:
	// the client's own status request, which asks whether a level the
	// model believes exhausted is, and must not be refused by a level the
	// server has just said is. A level of this key alone, whose every take
	// the model counts, holds it until the model has room for it.
	PastLevels bool
	// Status marks a call that asks for the key's status (GET
	// /v1/rate_limit): ObserveStatus reads its answer against what was charged
	// to each level after it was admitted.
	Status bool
	// OwnKey marks a write whose Idempotency-Key the caller chose: a replay
	// that answers its first attempt replays an earlier call's write, which
	// that call was charged for, and costs its point alone.
	OwnKey bool
	// OnSlow, when set, hears of the call once, when one of its attempts
	// has waited SlowAfter and is still held: from the waiting goroutine,
	// without the state's lock held, with the context of Admit.
	OnSlow func(context.Context, SlowWait)
	// OnHeld, when set, hears of the call whenever what holds it changes
	// (a level's name or a Reason constant), and when the level that holds
	// it is due a status, at most once per idleStatusEvery; s.mu is not
	// held. It returns a channel that closes when what it started to put
	// the model right (a status request) has ended, or nil: a call whose
	// deadline the model's wait would pass waits for it and looks again
	// instead of failing at once.
	OnHeld     func(reason string) <-chan struct{}
	heldReason string    // what the call was last held by (OnHeld hears of a change)
	heldAt     time.Time // when OnHeld was last called for the call
	// chargedAt is, for a Status call, what had been charged to each level when
	// its last attempt was admitted.
	chargedAt map[*level]float64

	kindKey      string // see kind
	kept         bool   // an earlier attempt that may have reached the server kept its take
	sentBefore   bool   // an earlier attempt may have reached the server
	w            waiter
	slowReported bool      // OnSlow was called for the call
	reported     *level    // the egress level, when the last answer's RateLimit named it
	others       sentCount // the State's open less this call, less its sent, at the attempt's admission (othersFrom)
	takes        []take
	takesBuf     [8]take // where takes live when they fit
	takesVersion int
	takesState   *State     // the state whose levels takes holds
	runs         []levelRun // the runs its attempt counts in (scopeSentLocked)
	runsBuf      [2]levelRun
	scoped       bool // its attempt counts in its runs
	flight       bool // its attempt passed the gates while slow start's flight took calls (slowStartDueLocked)
	ticket       Ticket
}

// take is what one admitted attempt takes from one level.
type take struct {
	l       *level
	amount  float64
	mark    float64 // what the level's attempts had taken before this one (charged and in flight)
	charged float64 // what had been charged to the level when it was taken
	freed   float64 // what the level's log had freed when it was taken (takeLog.freed)
	probe   bool    // the call the level's others wait for (level.sent)
	early   bool    // it went before the moment of the level's last word, on more than that word left (level.early)
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

// takesLocked returns the levels c takes from and how much: its documented
// demand, and the learned policies the server tied to its operation. It is
// worked out once per call, again only when a level was added since: into
// new storage while an attempt in flight holds the old takes, whose marks
// its answer is read against.
func (s *State) takesLocked(c *Call) []take {
	if c.takes != nil && c.takesVersion == s.version && c.takesState == s {
		return c.takes
	}
	takes := c.takes[:0]
	switch {
	case c.ticket.taken != nil && !c.ticket.ended:
		takes = make([]take, 0, len(c.takes)+1)
	case takes == nil || c.takesState != s:
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
	c.takes, c.takesVersion, c.takesState = takes, s.version, s
	return takes
}

// amountLocked is what c takes of l; 1 when it takes nothing of it.
func (s *State) amountLocked(c *Call, l *level) float64 {
	for _, t := range s.takesLocked(c) {
		if t.l == l {
			return t.amount
		}
	}
	return 1
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
	s         *State
	c         *Call
	taken     []take
	lease     string
	ref       leaseRef // the store the lease is in
	unleased  bool     // budgeted, admitted without a lease while the state had a store
	start     time.Time
	flight    bool // it went in slow start's flight
	once      sync.Once
	reading   bool      // its answer is a refusal being read (Reading)
	readUntil time.Time // the end of the wait that refusal's headers asked
	ended     bool      // Finish or Unanswered has run
}
