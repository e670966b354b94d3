// Package budgetstore declares where a key's budget is kept when many
// processes share it: the Store interface that bodo.WithSharedBudget takes,
// and the requests and answers it carries. The client keeps the model of the
// key's levels and sends it with every request; a Store applies it
// atomically, so that agents on many machines keep within the key's limits
// together, as one process would.
//
// The module github.com/bodo-app/bodo-go/redisbudget implements it on Redis;
// implement it yourself only for another store, and read the contract on
// Store first.
package budgetstore

import (
	"context"
	"time"
)

// Store keeps the changing state of a key's budget (what each level
// holds, the calls in flight, the refusals of the lockout guard, the
// adaptive cap and pace, exhausted quotas and lockouts) where every process
// that uses the key sees it, so that agents on many machines share one
// budget instead of each backing off on its own. The client keeps the
// model (each level's rate and size, learned from the headers) and passes
// it with every request; the store applies it atomically.
//
// The module github.com/bodo-app/bodo-go/redisbudget implements it on Redis.
// A store must be safe for concurrent use and answer promptly: the client
// gives each request a short deadline and, when the store fails, falls back
// to a share of the key (see Members) until the store answers
// again. A request that failed may still have been carried out: Acquire
// and Release must be idempotent for a lease (a Release the client sends
// again, or one that arrives before the Acquire it ends, changes nothing
// more), because the client releases the lease of an Acquire whose answer
// it did not get and sends a failed Release again later.
type Store interface {
	// Acquire admits one attempt atomically, taking the levels' amounts
	// and holding a lease on a slot in flight, or says why not and how
	// long at least to wait. It counts req.Process among the processes
	// that use the key.
	Acquire(ctx context.Context, key string, req Acquire) (Grant, error)
	// Release ends an admitted attempt with what its answer taught. A
	// lease it does not know (released already, or not acquired yet) is
	// never admitted afterwards.
	Release(ctx context.Context, key string, rel Release) error
	// Refund gives back amounts a call reserved but did not use, to
	// what each level holds and off the newest takes of its log. A
	// negative Amount is taken instead, and logged: what a call admitted
	// while the store was unreachable took. Neither applies to a level
	// whose count the store began after it happened (Level.Ago), as a
	// store that lost its state and begins again does (Level.Taken).
	// It must be idempotent for a Level.ID: the client sends a failed
	// Refund again, and the first may have been carried out.
	Refund(ctx context.Context, key string, levels []Level) error
	// Renew extends the leases of attempts still in flight by their lease
	// time from now, and counts req.Process among the processes that use
	// the key, as Acquire does. A lease it no longer holds and had no
	// Release of (the store lost its state, or the lease ran out while
	// the process could not reach it) holds its slot in flight again:
	// its attempt still runs. A lease it had a Release of stays as the
	// Release left it (a Renew sent before the Release may come after).
	Renew(ctx context.Context, key string, req Renew) (Members, error)
}

// Level is one level in a Store request: the amount taken,
// given back or reported left, and the level's model. In Acquire, an
// Amount larger than Size is admitted when the level is full and leaves it
// in debt, as the local budget does: a call bigger than a level the server
// announced is not held for ever.
type Level struct {
	Name   string
	Amount float64
	// Rate is the level's continuous refill per second; zero for a level
	// that frees only in steps (a sliding log or a window), which frees
	// what its log (Quota, Window) frees, one unit at its Reset, and what
	// the answers say. Once a request gave a level Rate zero and a Window,
	// the store refills it for no one for a Window, whatever Rate other
	// requests give: processes learn a level's shape one by one.
	Rate float64
	Size float64 // what the level holds when full
	// Taken is how far below Size the process's model holds the level
	// now. A store with no count of the level (new, or back empty after
	// a restart) starts it at Size less Taken rather than full, and
	// trusts its log of takes (Quota, Window) only once a Left filled it
	// in or a Window passed.
	Taken float64
	// Ago, in a Refund and in a Release's Refund, is how long ago the
	// amount was given back, or taken while the store was unreachable. A
	// store that began its count of the level since does not apply it:
	// the count began from a process's model, which holds what was taken
	// until then (its own takes, and the others' as far as its part of the
	// level tells).
	Ago time.Duration
	// ID, in a Refund, names what is given back or taken: a store
	// applies an ID once, however often it comes (for at least the ten
	// minutes in which the client sends a failed Refund again). Empty:
	// applied every time.
	ID string

	// Quota and Window, when both positive, bound a level of this key
	// alone from below, as every shape of limiter grants: it holds at
	// least Quota less what was taken within the last Window (the takes
	// of released attempts, logged at their release, less what the
	// release gave back) and less what is in flight.
	Quota  float64
	Window time.Duration
	// Reset, in Left, is when the level frees more (RateLimit t, from
	// now): then it holds at least one unit more than Left left it, its
	// refill at Rate until then counting toward that unit.
	Reset time.Duration
	// Steps, in Left and Owe, says that the level frees in steps at the
	// moments the server names: the store refills it for no one until
	// Reset, the last such request's, whatever Rate other requests give,
	// and from then on as before.
	Steps bool
	// Hold, in Owe, is the refusal's wait: no call that takes from the
	// level is admitted for that long from now.
	Hold time.Duration

	// Pace, when positive, is the rate per second at which the calls
	// that take from the level may go, over all processes: the client
	// spreads a level that frees in steps over its window, and slows one
	// that refused. Burst is what the pace lets go at once; a call
	// bigger than Burst goes when the pace has Burst, into debt.
	Pace  float64
	Burst float64
}

// Acquire is one attempt asking to be admitted.
type Acquire struct {
	Lease    string        // unique id of the attempt
	LeaseTTL time.Duration // a lease not released by then is freed (a crashed process frees its slots)
	Levels   []Level       // what the attempt takes
	Cost     float64       // its points, for the pace
	KeyRate  float64       // the key level's rate: the pace is a share of it
	// MaxInFlight is the parallel quota: the most attempts in flight over
	// all processes, and the ceiling of the adaptive cap.
	MaxInFlight   int
	RefusalLimit  int           // the lockout guard: refusals plus leases in any window
	RefusalWindow time.Duration // its window
	Unbudgeted    bool          // only the guard, the lockout and exhausted quotas apply
	// Process names the client's budget of the key in this process; the
	// store counts the processes it heard from within ProcessTTL.
	Process    string
	ProcessTTL time.Duration
	// Reservation is what Process holds in flight outside leases: its
	// Slots count against MaxInFlight for every other process's
	// attempts, its Calls for its own as well.
	Reservation Reservation
}

// Reservation is what a process holds of the parallel quota outside
// leases: the calls it admitted on its share of the key (Members) while it
// could not count on the store, and, while it keeps to that share, the
// rest of the share, which it may take at any moment without asking. A
// store counts in flight, when it decides on an Acquire, the Slots of
// every other process and the Calls of the one asking, until TTL after
// the reservation came, so that a process that lost the store alone (its
// replies late or lost) and the processes that still reach it stay within
// MaxInFlight together, also once it is back. Of the reservations of one
// process it keeps the one of the highest Seq: its requests may arrive in
// another order than they were sent. A zero Seq gives none.
type Reservation struct {
	Slots int // all it holds outside leases
	Calls int // of Slots, its calls in flight without a lease
	Seq   uint64
	TTL   time.Duration
}

// Grant is the answer to Acquire.
type Grant struct {
	Admitted bool
	// Wait is the least time before asking again when not admitted; zero
	// means until a slot in flight is released.
	Wait   time.Duration
	Reason string // what holds the attempt: a level, "in-flight", "pace", "refusal-guard", "lockout", "quota"
	// Refusal says that the wait is one a refusal asked for: the level that
	// holds the attempt owes what a refused call lacked (Release.Owe), as
	// the server asked. The client then holds the call no longer than it
	// sits out any wait the server asked of the key.
	Refusal bool
	// Policy and Until name an exhausted quota (Reason "quota"): the call
	// is refused until then.
	Policy string
	Until  time.Time
	// LeaseTTL is the lease time the store gave; zero means the one asked.
	// The client renews the lease of a call still in flight well before.
	LeaseTTL time.Duration
	// Levels, when admitted, is what each level the attempt took from
	// holds after the take (Amount; negative in debt), over all
	// processes. The client keeps its model of the level no higher, so
	// that its share when the store fails is a share of what is left,
	// not of what this process alone would have left. A store may leave
	// it empty; the client then keeps what it counted itself.
	Levels []Level
	Members
}

// Members is what a store says of the processes that use a key: how
// many it heard from within the ProcessTTL asked, and the place of the one
// asking among them in a fixed order (0 to Processes-1). While the store
// is unreachable each process keeps to its share of the key by that place,
// so that the shares of all add up to the key's limits.
type Members struct {
	Processes int
	Rank      int
}

// Renew asks to keep the leases of attempts still in flight.
type Renew struct {
	Process     string        // as in Acquire
	ProcessTTL  time.Duration // as in Acquire
	Leases      []string      // the leases to extend
	LeaseTTL    time.Duration // by how long from now
	Reservation Reservation   // as in Acquire
}

// Release is what an answered (or failed) attempt tells the store.
type Release struct {
	Lease   string
	Refused bool // a 429: counts for the lockout guard
	// RefusedAgo is how long ago the refusal came, for a release sent
	// late: it counts from then, and not at all once RefusalWindow ago.
	RefusedAgo time.Duration
	Cut        bool // RATE_LIMITED or OVERLOADED: cut the cap and the pace
	// Linger keeps the attempt's slot taken that much longer: it got no
	// answer, and the server may still be working on it.
	Linger time.Duration
	// CutFactor is what they are multiplied by (0 means one half).
	CutFactor float64
	// Refund is given back: the server did not charge a refused call,
	// or charged a replay less than the call reserved. A level with a
	// Pace gives back as much of its pace's turn as well: a replay, or a
	// call refused with a wait for every call of the key, took no turn
	// of a level it was not counted on.
	Refund []Level
	// Left is what the server said is left of each level (RateLimit r).
	// Less what is still in flight, it caps what the level holds; less
	// what other attempts were charged after this one was admitted as
	// well (the server may or may not have counted that), it is the least
	// the level holds.
	Left []Level
	// Owe caps each level at Amount, which may be negative, and holds it
	// for Hold: after a RATE_LIMITED the level owes what the call lacked
	// until its retry. A wait it causes meanwhile is a Refusal.
	Owe           []Level
	PausedUntil   time.Time // a lockout: nothing is admitted before
	RefusalLimit  int
	RefusalWindow time.Duration
	MaxInFlight   int
	Block         string    // an exhausted quota's policy ("*" for one the client does not know)
	BlockUntil    time.Time // and when it resets
	// Process and Reservation are as in Acquire: the process's
	// reservation once the attempt ended, given with the release, so
	// that a slot it keeps to its share of does not pass to another
	// process in between.
	Process     string
	Reservation Reservation
}
