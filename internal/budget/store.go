package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
)

// sharedRetry is how long the client uses its local budget after the store
// failed before a call tries the store again (the keeper looks sooner);
// sharedTimeout bounds each request to the store; sharedPoll is how often a
// call held by the store's in-flight cap asks again; keepEvery is how often
// the keeper renews the leases in flight, sends what failed before and,
// while the store is down, looks whether it is back.
const (
	sharedRetry   = 2 * time.Second
	sharedTimeout = 500 * time.Millisecond
	sharedPoll    = 20 * time.Millisecond
	leaseTTL      = 30 * time.Second
	keepEvery     = 500 * time.Millisecond
	probeEvery    = 100 * time.Millisecond // while the store is down

	// minDrain is the shortest drain (storeResult): time for two of the
	// keeper's looks, which find a failure that was a passing one.
	minDrain = 2*probeEvery + probeEvery/2

	// processTTL is how long the store counts a process it no longer
	// hears from among the key's processes.
	processTTL = 2 * time.Minute

	// rejoinWindow is how long a process that reached the store again
	// still keeps to its share as well: the others that were down with it
	// are back by then (their keepers look every keepEvery), and a store
	// that came back empty has had requests from them again.
	rejoinWindow = sharedRetry + sharedTimeout

	// A release or refund the store did not get is sent again until it
	// is pendingTTL old; at most maxPending are kept. One sent more than
	// staleAfter late no longer tells what is left of the levels.
	maxPending = 1024
	pendingTTL = 2 * time.Minute
	staleAfter = time.Second
)

// store is the shared-store side of a State.
type store struct {
	shared        budgetstore.Store // nil: this process's budget only
	sharedKey     string            // the key's name in the store
	sharedRetryAt time.Time         // when a call may try the store again; zero unless the store failed last
	logger        *slog.Logger      // where the store's outages and returns and the bounds' overflow are logged

	storeSeq     int                 // counts the stores given (UseStore): leases and pending requests name theirs by it
	member       string              // this state's name among the key's processes
	members      budgetstore.Members // what the store said last
	share        budgetstore.Members // what the fallback shares are worked out from (see shareLocked)
	drainUntil   time.Time           // no budgeted call goes on the local budget before (see storeResult)
	rejoinedAt   time.Time           // when the store came back after it failed (rejoinWindow)
	outageLogged bool                // the outage was logged, and its end is not yet
	outagePart   float64             // the part of the pooled levels this process takes now (level.parts.outage); 1: all

	leases      map[string]leaseRef // the leases of attempts in flight
	unleased    int                 // budgeted attempts in flight, or whose slots linger, that the store gave no lease
	lingering   int                 // leased attempts whose slots linger: the store drops their leases when the linger ends
	reservation reservation         // what the store was told of the slots held outside leases
	pending     []pendingOp         // what the store has not had yet
	keeping     bool                // the keeper runs
	kick        chan struct{}       // has the keeper look at once: an outage began, or a call waits for the store to hear of the share

	// The longest call that ended in this minute and in the one before.
	longest, longestPrev time.Duration
	longestAt            time.Time
}

// leaseRef is where a lease was taken: a client of the key may have given
// the key another store since.
type leaseRef struct {
	st  budgetstore.Store
	seq int           // the store's storeSeq
	key string        // the key's name in it
	ttl time.Duration // the lease's time to live, as the store granted it
}

// pendingOp is a release, or a refund when refund is set, that the store
// has not had; its ttl is unused.
type pendingOp struct {
	leaseRef
	rel    budgetstore.Release
	refund []budgetstore.Level
	at     time.Time // when it was due: after pendingTTL it is dropped
}

// UseStore makes s share its budget through st under key. Attempts in
// flight end in the store they were admitted by.
func (s *State) UseStore(st budgetstore.Store, key string, logger *slog.Logger) {
	s = s.lock()
	s.shared, s.sharedKey, s.logger = st, key, logger
	for _, l := range s.levels {
		l.pooled = st != nil
	}
	s.storeSeq++
	if s.member == "" {
		s.member = leaseID()
	}
	s.mu.Unlock()
}

// sharedActiveLocked reports whether s has a shared store it may try now.
func (s *State) sharedActiveLocked(now time.Time) bool {
	return s.shared != nil && !now.Before(s.sharedRetryAt)
}

// PanicError is a panic of the shared store, of the logger or of the
// client's status request, caught so that the key's budget stays usable:
// the call it happened in fails with it and leaves its queue, the others
// go on.
type PanicError struct {
	Where string // PanicStore, PanicLogger or PanicStatus
	Value any
}

// What panicked (PanicError.Where).
const (
	PanicStore  = "shared store"
	PanicLogger = "logger"
	PanicStatus = "status request" // the client's, asked for a call the model holds (Call.OnHeld)
)

// Error says what panicked and with what.
func (e *PanicError) Error() string { return fmt.Sprintf("the %s panicked: %v", e.Where, e.Value) }

func safely[T any](where string, f func() (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Where: where, Value: p}
		}
	}()
	return f()
}

// storeResult records how a request to the store went; s.mu must not be
// held. A failure switches to the local budget for sharedRetry: the first
// of an outage starts the drain, the longest call this process saw end in
// the last minute or two (at least minDrain), and is logged. A success
// after a failure rejoins, logged too. A failure within rejoinWindow of
// rejoining, while the process still keeps to its share, is the same
// outage: a store whose Renew answers and whose Acquire fails makes no
// call drain again and again, nor the log tell of it twenty times a
// second. The logging happens outside the lock; a logger that panics is
// the error returned. The first failure of an outage has the keeper look
// at once, unless the keeper found it (byKeeper) and the store has had
// what this process holds: then it looks again probeEvery later.
func (s *State) storeResult(err error, members *budgetstore.Members, byKeeper bool) error {
	s.mu.Lock()
	now := time.Now()
	var msg string
	level := slog.LevelInfo
	var attrs []slog.Attr
	first := false
	switch {
	case err != nil:
		if s.sharedRetryAt.IsZero() && (s.rejoinedAt.IsZero() || now.Sub(s.rejoinedAt) >= rejoinWindow) {
			// The drain: the calls the store admitted on others' shares
			// end by then, and a single request that failed (a reply late
			// past its deadline) is found out by the keeper's next look
			// (keepInterval) before any call goes on the share. The store
			// holds the share only once a request carries it: the drain
			// runs from then too (reservationDoneLocked).
			s.drainUntil = now.Add(s.drainLocked(now))
			s.redrainLocked()
			first = true
			level, msg = slog.LevelWarn, "bodo: shared budget unreachable, using this process's share of the budget until it is back"
			s.outageLogged = true
			attrs = append(attrs, slog.String("error", err.Error()), slog.Int("processes", s.share.Processes))
		}
		s.sharedRetryAt = now.Add(sharedRetry)
		// The keeper looks at once, and every probeEvery from then on:
		// the store may be back before the drain ends. One that is
		// looking looks again at once; so does one whose own request
		// failed, built before the outage without the share, when a
		// share is to be sent.
		if first && (!byKeeper || s.reservation.sent < s.reservedLocked(now)) {
			s.kickKeeperLocked()
		}
		s.startKeeperLocked()
	default:
		if !s.sharedRetryAt.IsZero() {
			s.rejoinedAt = now
			if s.outageLogged {
				msg, s.outageLogged = "bodo: shared budget reachable again", false
			}
			s.slotGate.wakeHead()
			s.guardGate.wakeHead()
			s.paceGate.wakeHead()
			for _, l := range s.order { // held by the share, which the store's word replaces
				l.gate.wakeHead()
			}
		}
		s.sharedRetryAt = time.Time{}
		if members != nil && members.Processes > 0 {
			s.members = *members
			s.shareLocked(now)
		}
	}
	logger := s.logger
	s.mu.Unlock()
	if msg == "" || logger == nil {
		return nil
	}
	_, lerr := safely(PanicLogger, func() (struct{}, error) {
		logger.LogAttrs(context.Background(), level, msg, attrs...)
		return struct{}{}, nil
	})
	return lerr
}

// drainLocked is how long a process that went on its share holds every
// call: until a call as long as the longest that ended lately would have
// ended, at least minDrain and at most leaseTTL, the longest a slot lingers
// (lingerLocked): a process that saw a call of half an hour end lately
// does not stall its key for half an hour at its next outage.
func (s *State) drainLocked(now time.Time) time.Duration {
	return min(max(minDrain, s.rollLongestLocked(now)), leaseTTL)
}

// rollLongestLocked starts a new minute of the longest call seen to end
// once a minute has passed, keeping the last minute's unless two have, and
// returns the longest of the two minutes.
func (s *State) rollLongestLocked(now time.Time) time.Duration {
	if now.Sub(s.longestAt) >= time.Minute {
		s.longestPrev, s.longest = s.longest, 0
		if now.Sub(s.longestAt) >= 2*time.Minute {
			s.longestPrev = 0
		}
		s.longestAt = now
	}
	return max(s.longest, s.longestPrev)
}

func leaseID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
