package bodo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/bodo-app/bodo-go/internal/budget"
)

// SharedBudget keeps the changing state of a key's budget (what each level
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
// to a share of the key (see SharedGrant.Processes) until the store answers
// again. A request that failed may still have been carried out: Acquire
// and Release must be idempotent for a lease (a Release the client sends
// again, or one that arrives before the Acquire it ends, changes nothing
// more), because the client releases the lease of an Acquire whose answer
// it did not get and sends a failed Release again later.
type SharedBudget interface {
	// Acquire admits one attempt atomically, taking the levels' amounts
	// and holding a lease on a slot in flight, or says why not and how
	// long at least to wait. It counts req.Process among the processes
	// that use the key.
	Acquire(ctx context.Context, key string, req SharedAcquire) (SharedGrant, error)
	// Release ends an admitted attempt with what its answer taught. A
	// lease it does not know (released already, or not acquired yet) is
	// never admitted afterwards.
	Release(ctx context.Context, key string, rel SharedRelease) error
	// Refund gives back amounts a call reserved but did not use.
	Refund(ctx context.Context, key string, levels []SharedLevel) error
	// Renew extends the leases of attempts still in flight by their lease
	// time from now (a lease it does not hold stays gone), and counts
	// req.Process among the processes that use the key, as Acquire does.
	Renew(ctx context.Context, key string, req SharedRenew) (SharedMembers, error)
}

// SharedLevel is one level in a SharedBudget request: the amount taken,
// given back or reported left, and the level's model. In Acquire, an
// Amount larger than Size is admitted when the level is full and leaves it
// in debt, as the local budget does: a call bigger than a level the server
// announced is not held for ever.
type SharedLevel struct {
	Name   string
	Amount float64
	Rate   float64 // refill per second
	Size   float64 // what the level holds when full
}

// SharedAcquire is one attempt asking to be admitted.
type SharedAcquire struct {
	Lease    string        // unique id of the attempt
	LeaseTTL time.Duration // a lease not released by then is freed (a crashed process frees its slots)
	Levels   []SharedLevel // what the attempt takes
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
}

// SharedGrant is the answer to SharedAcquire.
type SharedGrant struct {
	Admitted bool
	// Wait is the least time before asking again when not admitted; zero
	// means until a slot in flight is released.
	Wait   time.Duration
	Reason string // what holds the attempt: a level, "in-flight", "pace", "refusal-guard", "lockout", "quota"
	// Policy and Until name an exhausted quota (Reason "quota"): the call
	// is refused until then.
	Policy string
	Until  time.Time
	// LeaseTTL is the lease time the store gave; zero means the one asked.
	// The client renews the lease of a call still in flight well before.
	LeaseTTL time.Duration
	SharedMembers
}

// SharedMembers is what a store says of the processes that use a key: how
// many it heard from within the ProcessTTL asked, and the place of the one
// asking among them in a fixed order (0 to Processes-1). While the store
// is unreachable each process keeps to its share of the key by that place,
// so that the shares of all add up to the key's limits.
type SharedMembers struct {
	Processes int
	Rank      int
}

// SharedRenew asks to keep the leases of attempts still in flight.
type SharedRenew struct {
	Process    string        // as in SharedAcquire
	ProcessTTL time.Duration // as in SharedAcquire
	Leases     []string      // the leases to extend
	LeaseTTL   time.Duration // by how long from now
}

// SharedRelease is what an answered (or failed) attempt tells the store.
type SharedRelease struct {
	Lease   string
	Refused bool // a 429: counts for the lockout guard
	// RefusedAgo is how long ago the refusal came, for a release sent
	// late: it counts from then, and not at all once RefusalWindow ago.
	RefusedAgo time.Duration
	Cut        bool // RATE_LIMITED or OVERLOADED: cut the cap and the pace
	// CutFactor is what they are multiplied by (0 means one half).
	CutFactor float64
	// Refund is given back: the server did not charge a refused call.
	Refund []SharedLevel
	// Left caps each level at what the server said is left (RateLimit r),
	// less what is still in flight.
	Left []SharedLevel
	// Owe caps each level at Amount, which may be negative: after a
	// RATE_LIMITED the level owes what the call lacked until its retry.
	Owe           []SharedLevel
	PausedUntil   time.Time // a lockout: nothing is admitted before
	RefusalLimit  int
	RefusalWindow time.Duration
	MaxInFlight   int
	Block         string    // an exhausted quota's policy ("*" for one the client does not know)
	BlockUntil    time.Time // and when it resets
}

// WithSharedBudget shares the key's budget with every process that uses
// the same store, for example redisbudget.New(rdb). All Clients of this
// process on the same key and host use it from then on.
func WithSharedBudget(b SharedBudget) Option {
	return clientOption(func(s *clientSettings) error {
		s.shared = b
		return nil
	})
}

// sharedKey names a key's state in a shared store: the host and a hash of
// the API key, never the key itself.
func sharedKey(host, apiKey string) string {
	sum := sha256.Sum256([]byte("bodo-go shared budget\x00" + apiKey))
	return host + ":" + hex.EncodeToString(sum[:16])
}

// sharedStore adapts a SharedBudget to the budget's Store.
type sharedStore struct{ b SharedBudget }

func (s sharedStore) Acquire(ctx context.Context, key string, req budget.StoreAcquire) (budget.StoreGrant, error) {
	g, err := s.b.Acquire(ctx, key, SharedAcquire{
		Lease: req.Lease, LeaseTTL: req.LeaseTTL, Levels: sharedLevels(req.Levels), Cost: req.Cost, KeyRate: req.KeyRate,
		MaxInFlight: req.MaxInFlight, RefusalLimit: req.RefusalLimit, RefusalWindow: req.RefusalWindow, Unbudgeted: req.Unbudgeted,
		Process: req.Process, ProcessTTL: req.ProcessTTL,
	})
	return budget.StoreGrant{Admitted: g.Admitted, Wait: g.Wait, Reason: g.Reason, Policy: g.Policy, Until: g.Until,
		LeaseTTL: g.LeaseTTL, Members: budget.StoreMembers(g.SharedMembers)}, err
}

func (s sharedStore) Renew(ctx context.Context, key string, req budget.StoreRenew) (budget.StoreMembers, error) {
	m, err := s.b.Renew(ctx, key, SharedRenew(req))
	return budget.StoreMembers(m), err
}

func (s sharedStore) Release(ctx context.Context, key string, rel budget.StoreRelease) error {
	return s.b.Release(ctx, key, SharedRelease{
		Lease: rel.Lease, Refused: rel.Refused, RefusedAgo: rel.RefusedAgo, Cut: rel.Cut, CutFactor: rel.CutFactor,
		Refund: sharedLevels(rel.Refund), Left: sharedLevels(rel.Left), Owe: sharedLevels(rel.Owe),
		PausedUntil: rel.PausedUntil, RefusalLimit: rel.RefusalLimit, RefusalWindow: rel.RefusalWindow,
		MaxInFlight: rel.MaxInFlight, Block: rel.Block, BlockUntil: rel.BlockUntil,
	})
}

func (s sharedStore) Refund(ctx context.Context, key string, levels []budget.StoreLevel) error {
	return s.b.Refund(ctx, key, sharedLevels(levels))
}

func sharedLevels(ls []budget.StoreLevel) []SharedLevel {
	if ls == nil {
		return nil
	}
	out := make([]SharedLevel, len(ls))
	for i, l := range ls {
		out[i] = SharedLevel(l)
	}
	return out
}
