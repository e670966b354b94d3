package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"
)

// Store keeps the changing state of a key's budget where every process that
// uses the key sees it; package bodo adapts its public SharedBudget to it.
type Store interface {
	Acquire(ctx context.Context, key string, req StoreAcquire) (StoreGrant, error)
	Release(ctx context.Context, key string, rel StoreRelease) error
	Refund(ctx context.Context, key string, levels []StoreLevel) error
}

// StoreLevel is one level in a store request: the amount taken, given back
// or reported left, and the level's model as a bucket.
type StoreLevel struct {
	Name   string
	Amount float64
	Rate   float64
	Size   float64
}

// StoreAcquire asks the store to admit one attempt.
type StoreAcquire struct {
	Lease         string
	LeaseTTL      time.Duration
	Levels        []StoreLevel
	Cost          float64
	KeyRate       float64
	MaxInFlight   int
	RefusalLimit  int
	RefusalWindow time.Duration
	Unbudgeted    bool
}

// StoreGrant is the store's answer.
type StoreGrant struct {
	Admitted bool
	Wait     time.Duration
	Reason   string
	Policy   string
	Until    time.Time
}

// StoreRelease is what an ended attempt tells the store.
type StoreRelease struct {
	Lease         string
	Refused       bool
	Cut           bool
	CutFactor     float64
	Refund        []StoreLevel
	Left          []StoreLevel
	Owe           []StoreLevel
	PausedUntil   time.Time
	RefusalLimit  int
	RefusalWindow time.Duration
	MaxInFlight   int
	Block         string
	BlockUntil    time.Time
}

// sharedRetry is how long the client uses its local budget after the store
// failed before it tries the store again; sharedTimeout bounds each request
// to the store; sharedPoll is how often a call held by the store's in-flight
// cap asks again.
const (
	sharedRetry   = 2 * time.Second
	sharedTimeout = 500 * time.Millisecond
	sharedPoll    = 20 * time.Millisecond
	leaseTTL      = 30 * time.Second

	maxPendingReleases = 1024
)

// store is the shared-store side of a State.
type store struct {
	shared          Store // nil: this process's budget only
	sharedKey       string
	sharedRetryAt   time.Time
	sharedDown      bool
	pendingReleases []StoreRelease
	logger          *slog.Logger
}

// UseStore makes s share its budget through st under key.
func (s *State) UseStore(st Store, key string, logger *slog.Logger) {
	s = s.live()
	s.mu.Lock()
	s.shared, s.sharedKey, s.logger = st, key, logger
	s.mu.Unlock()
}

func (s *State) sharedActiveLocked(now time.Time) bool {
	return s.shared != nil && !now.Before(s.sharedRetryAt)
}

// sharedResultLocked records how a request to the store went: a failure
// switches to the local budget for sharedRetry (logged once per outage), a
// success after a failure rejoins (logged too).
func (s *State) sharedResultLocked(err error, now time.Time) {
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

// storeLevel is l's model for the store: a bucket that refills at its
// quota's rate (or the rate the server showed) and holds the documented
// capacity, or what the server showed it to hold. The store models every
// level as a bucket; what is left is capped by the server's r (Left) and
// by refusals (Owe) as answers come.
func storeLevel(l *level, amount float64, now time.Time) StoreLevel {
	return StoreLevel{Name: l.name, Amount: amount, Rate: l.rate(now), Size: l.fitSize()}
}

// acquireSharedLocked asks the store to admit c; s.mu is released during the
// request. It returns the lease when admitted, else why not and how long at
// least to wait. A store that fails returns no lease and no reason: the
// caller falls back to the local budget. A quota the store knows to be
// exhausted is the local refusal error.
func (s *State) acquireSharedLocked(ctx context.Context, c *Call, now time.Time) (string, time.Duration, string, error) {
	takes := s.takesLocked(c)
	levels := make([]StoreLevel, 0, len(takes))
	for _, t := range takes {
		levels = append(levels, storeLevel(t.l, t.amount, now))
	}
	req := StoreAcquire{
		Lease:         leaseID(),
		LeaseTTL:      leaseTTL,
		Levels:        levels,
		Cost:          c.Cost,
		KeyRate:       s.levels[Key].rate(now),
		MaxInFlight:   s.parallel,
		RefusalLimit:  RefusalLimit,
		RefusalWindow: RefusalWindow,
		Unbudgeted:    !c.Budgeted,
	}
	st, key := s.shared, s.sharedKey
	s.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
	grant, err := st.Acquire(rctx, key, req)
	cancel()
	s.mu.Lock()
	now = time.Now()
	s.sharedResultLocked(err, now)
	if err == nil && len(s.pendingReleases) > 0 {
		s.flushReleasesLocked(st, key)
	}
	switch {
	case err != nil:
		return "", 0, "", nil
	case grant.Admitted:
		return req.Lease, 0, "", nil
	case grant.Reason == "quota":
		s.blocks[grant.Policy] = block{until: grant.Until, name: grant.Policy}
		if err := s.blockedLocked(c, now); err != nil {
			return "", 0, "", err
		}
		return "", sharedPoll, "quota", nil // the store knows a level this process has not learned yet
	case grant.Wait <= 0:
		return "", sharedPoll, grant.Reason, nil
	}
	return "", grant.Wait, grant.Reason, nil
}

// flushReleasesLocked sends the releases kept while the store was down;
// s.mu is released meanwhile. Those that fail stay for later.
func (s *State) flushReleasesLocked(st Store, key string) {
	pending := s.pendingReleases
	s.pendingReleases = nil
	s.mu.Unlock()
	for i, rel := range pending {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		err := st.Release(ctx, key, rel)
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

// release collects what an attempt with a lease tells the store; its
// methods do nothing on a nil release (no lease).
type release struct{ StoreRelease }

func (s *State) releaseFor(t *Ticket) *release {
	if t.lease == "" {
		return nil
	}
	return &release{StoreRelease{Lease: t.lease, RefusalLimit: RefusalLimit, RefusalWindow: RefusalWindow}}
}

func (r *release) refund(l *level, amount float64, now time.Time) {
	if r != nil {
		r.Refund = append(r.Refund, storeLevel(l, amount, now))
	}
}

func (r *release) left(l *level, remaining float64, now time.Time) {
	if r != nil {
		r.Left = append(r.Left, storeLevel(l, remaining, now))
	}
}

func (r *release) owe(l *level, owe float64, now time.Time) {
	if r != nil {
		r.Owe = append(r.Owe, storeLevel(l, owe, now))
	}
}

func (r *release) pause(until time.Time) {
	if r != nil {
		r.PausedUntil = later(r.PausedUntil, until)
	}
}

func (r *release) cut(factor float64) {
	if r != nil {
		r.Cut, r.CutFactor = true, factor
	}
}

func (r *release) block(policy string, until time.Time) {
	if r != nil {
		r.Block, r.BlockUntil = policy, until
	}
}

// releaseSharedLocked sends rel to the store, or keeps it while the store is
// down; it unlocks s.mu.
func (s *State) releaseSharedLocked(rel *release, refused bool, now time.Time) {
	if rel == nil {
		s.mu.Unlock()
		return
	}
	rel.Refused, rel.MaxInFlight = refused, s.parallel
	if !s.sharedActiveLocked(now) {
		// The store is down: keep the release for when it is back, so its
		// slot and what it taught are not lost for a lease time.
		if len(s.pendingReleases) < maxPendingReleases {
			s.pendingReleases = append(s.pendingReleases, rel.StoreRelease)
		}
		s.mu.Unlock()
		return
	}
	st, key := s.shared, s.sharedKey
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	err := st.Release(ctx, key, rel.StoreRelease)
	cancel()
	s.mu.Lock()
	s.sharedResultLocked(err, time.Now())
	s.mu.Unlock()
}

// refundSharedLocked gives amount of l back in the store too; it unlocks
// s.mu.
func (s *State) refundSharedLocked(l *level, amount float64, now time.Time) {
	if !s.sharedActiveLocked(now) {
		s.mu.Unlock()
		return
	}
	st, key := s.shared, s.sharedKey
	levels := []StoreLevel{storeLevel(l, amount, now)}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	err := st.Refund(ctx, key, levels)
	cancel()
	s.mu.Lock()
	s.sharedResultLocked(err, time.Now())
	s.mu.Unlock()
}

// leaseID is a random id for a lease in a shared store.
func leaseID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
