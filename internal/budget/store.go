package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
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
	// that came back empty has heard from them again.
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
	sharedKey     string
	sharedRetryAt time.Time // when a call may try the store again; zero unless the store failed last
	logger        *slog.Logger

	storeSeq   int                 // counts the stores given (UseStore): leases and pending requests name theirs by it
	member     string              // this state's name among the key's processes
	members    budgetstore.Members // what the store said last
	share      budgetstore.Members // what the fallback shares are worked out from (see shareLocked)
	drainUntil time.Time           // no budgeted call goes on the local budget before (see storeResult)
	rejoinedAt time.Time
	outagePart float64 // the part of the pooled levels this process takes now (level.outagePart); 1: all

	leases  map[string]leaseRef // the leases of attempts in flight
	pending []pendingOp         // what the store has not had yet
	keeping bool                // the keeper runs
	kick    chan struct{}       // wakes the keeper out of its sleep when the store fails

	// The longest call that ended in this minute and in the one before.
	longest, longestPrev time.Duration
	longestAt            time.Time
}

// leaseRef is where a lease was taken: a client of the key may have given
// the key another store since.
type leaseRef struct {
	st  budgetstore.Store
	seq int // the store's storeSeq
	key string
	ttl time.Duration
}

// pendingOp is a release, or a refund when refund is set, that the store
// has not had; its ttl is unused.
type pendingOp struct {
	leaseRef
	rel    budgetstore.Release
	refund []budgetstore.Level
	at     time.Time
}

// UseStore makes s share its budget through st under key. Attempts in
// flight end in the store they were admitted by.
func (s *State) UseStore(st budgetstore.Store, key string, logger *slog.Logger) {
	s = s.live()
	s.mu.Lock()
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

// PanicError is a panic of the shared store or of the logger, caught so
// that the key's budget stays usable: the call it happened in fails with
// it, the others go on.
type PanicError struct {
	Where string // "shared store" or "logger"
	Value any
}

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
// after a failure rejoins, logged too. The logging happens outside the
// lock; a logger that panics is the error returned.
func (s *State) storeResult(err error, members *budgetstore.Members) error {
	s.mu.Lock()
	now := time.Now()
	var msg string
	level := slog.LevelInfo
	var attrs []slog.Attr
	switch {
	case err != nil:
		if s.sharedRetryAt.IsZero() {
			// The drain: the calls the store admitted on others' shares
			// end by then, and a single request that failed (a reply late
			// past its deadline) is found out by the keeper's next look
			// (keepInterval) before any call goes on the share.
			s.drainUntil = now.Add(max(minDrain, s.rollLongestLocked(now)))
			// A sleeping keeper looks at once, and every probeEvery from
			// then on: the store may be back before the drain ends.
			select {
			case s.kickLocked() <- struct{}{}:
			default:
			}
			level, msg = slog.LevelWarn, "bodo: shared budget unreachable, using this process's share of the budget until it is back"
			attrs = append(attrs, slog.String("error", err.Error()), slog.Int("processes", s.share.Processes))
		}
		s.sharedRetryAt = now.Add(sharedRetry)
		s.startKeeperLocked()
	default:
		if !s.sharedRetryAt.IsZero() {
			s.rejoinedAt = now
			msg = "bodo: shared budget reachable again"
			s.slotGate.wakeHead()
			s.guardGate.wakeHead()
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
	_, lerr := safely("logger", func() (struct{}, error) {
		logger.LogAttrs(context.Background(), level, msg, attrs...)
		return struct{}{}, nil
	})
	return lerr
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

// fallbackShare is what one process may use of the key while it cannot
// count on the store: its slots in flight and its part of the lockout
// guard's refusals (its part of the key's rate is the pace's ceiling).
type fallbackShare struct {
	on       bool
	slots    int
	refusals int
}

// shareOf is the part of total that falls to the process at rank of n: the
// parts of all ranks add up to total.
func shareOf(total, n, rank int) int {
	return (rank+1)*total/n - rank*total/n
}

// shareLocked is the share of the key this process keeps to now. It
// applies while the store is down and for rejoinWindow after it is back,
// when the key has more than one process: each takes its part of the
// parallel quota and of the guard's refusals by its place among the
// processes the store last counted, and of the key's rate by its part of
// the slots. So no number of processes exceeds the key's limits while they
// cannot see each other. The processes counted are those of the last
// answer before the outage; the count shrinks only processTTL after a
// rejoin, since a store that came back empty counts the processes anew.
func (s *State) shareLocked(now time.Time) fallbackShare {
	limited := s.shared != nil && (!s.sharedActiveLocked(now) || now.Before(s.rejoinedAt.Add(rejoinWindow)))
	if !limited && s.members.Processes > 0 &&
		(s.members.Processes >= s.share.Processes || now.Sub(s.rejoinedAt) > processTTL) {
		s.share = s.members
	}
	n := s.share.Processes
	if !limited || n <= 1 {
		s.pace.ceiling = 0
		s.partLocked(1, now)
		return fallbackShare{}
	}
	rank := min(max(s.share.Rank, 0), n-1)
	sh := fallbackShare{on: true, slots: shareOf(s.parallel, n, rank), refusals: shareOf(RefusalLimit, n, rank)}
	s.pace.ceiling = float64(sh.slots) / float64(max(s.parallel, 1))
	s.partLocked(s.pace.ceiling, now)
	return sh
}

// partLocked gives every pooled level the process's part p of it: the
// others that lost the store read the same word and take their parts. A
// part starts from the last word on the level, less what this process took
// since: the refill since then the other processes may have taken, and
// the store, which counted their takes, can no longer say. They took no
// more than the level held: it starts at zero at the least, or at the
// level's debt.
func (s *State) partLocked(p float64, now time.Time) {
	if p == s.outagePart {
		return
	}
	whole := s.outagePart == 1
	s.outagePart = p
	for _, l := range s.levels {
		if l.pooled {
			if whole && p < 1 {
				l.refill(now)
				l.tokens = max(l.tokens-l.unconfirmed, min(l.tokens, 0))
				l.unconfirmed = 0
			}
			l.outagePart = p
		}
	}
}

// reprobeLocked is how long a call held only by the fallback share waits
// before it looks again: until the store may be tried again, or the
// rejoin window ends.
func (s *State) reprobeLocked(now time.Time) time.Duration {
	d := s.sharedRetryAt.Sub(now)
	if end := s.rejoinedAt.Add(rejoinWindow).Sub(now); end > 0 && s.sharedRetryAt.IsZero() {
		d = end
	}
	return max(d, sharedPoll)
}

// storeLevel is l's model for the store: a level that showed it frees in
// steps (level.steps) frees only by its log, its moment and the answers,
// as the local budget has it; any other refills at its rate, since the
// processes that share a level learn its shape one by one, and one that
// took a level for a bucket's would stop the refill the others count on.
// A level the contract gives a capacity beyond its quota (the key's
// bucket) refills too: a process that first hears of it after others
// drained it below its quota reads the bucket's t as a step's. A level of
// this key alone is bounded by its log (level.logAvailable). It holds the
// documented capacity, or what the server showed it to hold.
func storeLevel(l *level, amount float64, now time.Time) budgetstore.Level {
	sl := budgetstore.Level{Name: l.name, Amount: amount, Size: l.fitSize()}
	sl.Taken = takenOf(l, sl.Size, now)
	if !l.steps || l.refills() || l.documentedBucket() {
		sl.Rate = l.rate(now)
	}
	if !l.shared && l.window > 0 && l.quota > 0 {
		sl.Quota, sl.Window = l.quota*l.share, l.window
	}
	return sl
}

// pacedLevel is storeLevel with the level's pace while it paces calls (it
// spreads them, or a refusal cut its share), as the local budget has it:
// what an Acquire takes.
func pacedLevel(l *level, amount float64, now time.Time) budgetstore.Level {
	sl := storeLevel(l, amount, now)
	l.pace.adapt(now)
	rate := l.paceRate(now)
	if l.pace.spreadOnly(now) && l.documentedBucket() {
		// The store refills it as a bucket (storeLevel): a steps reading
		// of a drained bucket spreads nothing.
		return sl
	}
	logged := l.pace.spread && sl.Quota > 0 && sl.Rate == 0
	if logged {
		// The store slows the spread and lowers its burst as the key's
		// log requires (what is left over the time until its oldest take
		// leaves), from the takes of every process; this process's log
		// holds its own.
		rate = l.grossRate()
	}
	if l.pace.paces(now) && rate > 0 && !math.IsInf(rate, 0) {
		sl.Pace, sl.Burst = l.pace.now()*rate, l.pace.burst(rate)
		if logged {
			sl.Burst = max(sl.Burst, spreadBurst*l.size())
		}
	}
	return sl
}

// acquireSharedLocked asks the store to admit c; s.mu is released during the
// request. It returns the lease when admitted, else why not and how long at
// least to wait, and whether the wait is one a refusal asked for
// (budgetstore.Grant.Refusal). A store that fails returns no lease and no reason: the
// caller falls back to the local budget, and the lease, which the store may
// have granted all the same, is released once the store answers again. A
// quota the store knows to be exhausted is the local refusal error, and so
// is a panic of the store or of the logger.
func (s *State) acquireSharedLocked(c *Call, now time.Time) (string, time.Duration, string, bool, error) {
	takes := s.takesLocked(c)
	levels := make([]budgetstore.Level, 0, len(takes))
	for _, t := range takes {
		levels = append(levels, pacedLevel(t.l, t.amount, now))
	}
	req := budgetstore.Acquire{
		Lease:         leaseID(),
		LeaseTTL:      leaseTTL,
		Levels:        levels,
		Cost:          c.Cost,
		KeyRate:       s.levels[Key].rate(now),
		MaxInFlight:   s.parallel,
		RefusalLimit:  RefusalLimit,
		RefusalWindow: RefusalWindow,
		Unbudgeted:    !c.Budgeted,
		Process:       s.member,
		ProcessTTL:    processTTL,
	}
	ref := leaseRef{st: s.shared, seq: s.storeSeq, key: s.sharedKey}
	s.mu.Unlock()
	grant, err := safely("shared store", func() (budgetstore.Grant, error) {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		return ref.st.Acquire(ctx, ref.key, req)
	})
	logErr := s.storeResult(err, &grant.Members)
	s.mu.Lock()
	now = time.Now()
	if err != nil || logErr != nil && grant.Admitted {
		// The store may have run it: end the lease there.
		s.keepLocked(pendingOp{leaseRef: ref, rel: budgetstore.Release{Lease: req.Lease, RefusalWindow: RefusalWindow, MaxInFlight: s.parallel}, at: now})
	}
	_, panicked := err.(*PanicError)
	switch {
	case panicked:
		return "", 0, "", false, err
	case err != nil || logErr != nil:
		return "", 0, "", false, logErr
	case grant.Admitted:
		ref.ttl = grant.LeaseTTL
		if ref.ttl <= 0 {
			ref.ttl = req.LeaseTTL
		}
		if s.leases == nil {
			s.leases = map[string]leaseRef{}
		}
		s.leases[req.Lease] = ref
		s.startKeeperLocked()
		s.heldLocked(req.Levels, grant.Levels, now)
		return req.Lease, 0, "", false, nil
	case grant.Reason == "quota":
		s.blocks[grant.Policy] = block{until: grant.Until, name: grant.Policy}
		if err := s.blockedLocked(c, now); err != nil {
			return "", 0, "", false, err
		}
		return "", sharedPoll, "quota", false, nil // the store knows a level this process has not learned yet
	case grant.Wait <= 0:
		return "", sharedPoll, grant.Reason, false, nil
	}
	return "", grant.Wait, grant.Reason, grant.Refusal, nil
}

// heldLocked keeps each pooled level that an admitted attempt took from
// (asked) no higher than the store said it holds after the take (held)
// plus the take, which the attempt's admission takes off the model next:
// the model then counts the other processes' takes too, and a share of it
// when the store fails (part) is a share of what the key has left. The
// store's figure is a word on the level, as an answer's r is (unconfirmed).
// Grants read in another order than the store gave them may take a call of
// this process off twice; that errs low, and the next word sets it right.
// A figure the store could not have meant (not a number, or more in debt
// than the level's size) is passed over.
func (s *State) heldLocked(asked, held []budgetstore.Level, now time.Time) {
	for _, h := range held {
		l := s.levels[h.Name]
		if l == nil || !l.pooled || math.IsNaN(h.Amount) || math.IsInf(h.Amount, 0) || h.Amount < -l.fitSize() {
			continue
		}
		for _, a := range asked {
			if a.Name == h.Name {
				l.refill(now)
				l.unconfirmed = 0
				l.cap(h.Amount + a.Amount)
			}
		}
	}
}

// tookLocallyLocked has the keeper tell the store what a call admitted on
// this process's share, while the store was down, took of each level: a
// Refund of negative amounts, sent once the store answers. The store
// refilled those levels meanwhile for every process, and would admit the
// others into what this one took.
func (s *State) tookLocallyLocked(took []budgetstore.Level, now time.Time) {
	if len(took) > 0 {
		s.keepLocked(pendingOp{leaseRef: leaseRef{st: s.shared, seq: s.storeSeq, key: s.sharedKey}, refund: took, at: now})
	}
}

func (s *State) keepLocked(op pendingOp) {
	if len(s.pending) >= maxPending {
		s.pending = s.pending[1:] // the oldest: the store frees its lease by itself
	}
	s.pending = append(s.pending, op)
	s.startKeeperLocked()
}

func (s *State) startKeeperLocked() {
	if s.keeping || len(s.leases) == 0 && len(s.pending) == 0 {
		return
	}
	s.keeping = true
	go s.keep()
}

// kickLocked is the channel that kicks the keeper.
func (s *State) kickLocked() chan struct{} {
	if s.kick == nil {
		s.kick = make(chan struct{}, 1)
	}
	return s.kick
}

// keep is the keeper: while attempts hold leases or the store has not had
// a release or refund, it renews the leases every keepEvery (a call longer
// than the lease time keeps its slot) and sends what the store has not had
// (a release that failed frees its slot when the store is back, not when
// its lease runs out). Its requests tell the store that this process is
// alive, and show when a store that was down is back. It never holds a
// caller: it runs on its own, and ends when nothing is left to do.
func (s *State) keep() {
	for s.keepOnce() {
	}
}

// keepInterval is how long the keeper sleeps: keepEvery, or a third of the
// shortest lease time when that is shorter, and probeEvery while the store
// is down, so that a failure that was a passing one ends before the drain;
// and the channel that cuts the sleep short.
func (s *State) keepInterval() (time.Duration, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := keepEvery
	if !s.sharedRetryAt.IsZero() {
		d = probeEvery
	}
	for _, l := range s.leases {
		d = min(d, l.ttl/3)
	}
	return max(d, 10*time.Millisecond), s.kickLocked()
}

// keepOnce sleeps keepInterval, or until kicked, then renews the leases and sends what is
// pending; it reports whether the keeper goes on.
func (s *State) keepOnce() bool {
	d, kick := s.keepInterval()
	sleep := time.NewTimer(d)
	select {
	case <-sleep.C:
	case <-kick:
		sleep.Stop()
	}
	s.mu.Lock()
	if len(s.leases) == 0 && len(s.pending) == 0 {
		s.keeping = false
		s.mu.Unlock()
		return false
	}
	type renewal struct {
		leaseRef
		req budgetstore.Renew
	}
	renew := map[int]*renewal{}
	for id, l := range s.leases {
		r := renew[l.seq]
		if r == nil {
			r = &renewal{leaseRef: l, req: budgetstore.Renew{Process: s.member, ProcessTTL: processTTL, LeaseTTL: l.ttl}}
			renew[l.seq] = r
		}
		r.req.Leases = append(r.req.Leases, id)
		r.req.LeaseTTL = min(r.req.LeaseTTL, l.ttl)
	}
	cur := s.storeSeq
	if renew[cur] == nil && s.shared != nil {
		renew[cur] = &renewal{leaseRef: leaseRef{st: s.shared, key: s.sharedKey}, req: budgetstore.Renew{Process: s.member, ProcessTTL: processTTL}}
	}
	s.mu.Unlock()

	up := map[int]bool{}
	for w, r := range renew {
		m, err := safely("shared store", func() (budgetstore.Members, error) {
			ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
			defer cancel()
			return r.st.Renew(ctx, r.key, r.req)
		})
		up[w] = err == nil
		if w == cur {
			_ = s.storeResult(err, &m) // a logger that panics fails no call here
		}
	}
	s.mu.Lock()
	pending := s.pending
	s.pending = nil
	now := time.Now()
	for _, op := range pending {
		s.takenNowLocked(op.refund, now)
		s.takenNowLocked(op.rel.Refund, now)
	}
	s.mu.Unlock()
	var failed []pendingOp
	for _, op := range pending {
		now = time.Now()
		if now.Sub(op.at) > pendingTTL {
			continue
		}
		if ok, tried := up[op.seq]; tried && !ok {
			failed = append(failed, op)
			continue
		}
		err := s.send(op, now)
		up[op.seq] = err == nil
		if err != nil {
			failed = append(failed, op)
			if op.seq == cur {
				_ = s.storeResult(err, nil)
			}
		}
	}
	s.mu.Lock()
	s.pending = append(failed, s.pending...)
	if len(s.pending) > maxPending {
		s.pending = s.pending[len(s.pending)-maxPending:]
	}
	s.mu.Unlock()
	select {
	case <-kick: // it has just looked: a failure it found waits probeEvery
	default:
	}
	return true
}

// send sends a kept release or refund. The refusal of a release counts
// from when it came; what a release said of the levels is left out when it
// is stale.
func (s *State) send(op pendingOp, now time.Time) error {
	_, err := safely("shared store", func() (struct{}, error) {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		late := now.Sub(op.at)
		if op.refund != nil {
			return struct{}{}, op.st.Refund(ctx, op.key, ago(op.refund, late))
		}
		rel := op.rel
		rel.Refund = ago(rel.Refund, late)
		if rel.Refused {
			rel.RefusedAgo = late
		}
		rel.Linger = max(rel.Linger-late, 0)
		if late > staleAfter {
			rel.Left, rel.Owe, rel.Cut = nil, nil, false
		}
		return struct{}{}, op.st.Release(ctx, op.key, rel)
	})
	return err
}

// takenNowLocked brings Taken of kept levels up to the model's now: a
// store that begins its count of a level with one of them begins it
// where the model is, past the takes it will not apply (Level.Ago).
func (s *State) takenNowLocked(levels []budgetstore.Level, now time.Time) {
	for i := range levels {
		if l := s.levels[levels[i].Name]; l != nil {
			levels[i].Taken = takenOf(l, levels[i].Size, now)
		}
	}
}

// takenOf is how far below size the model holds l.
func takenOf(l *level, size float64, now time.Time) float64 {
	return min(max(size-l.wholeLeft(now), 0), size)
}

func ago(levels []budgetstore.Level, late time.Duration) []budgetstore.Level {
	out := make([]budgetstore.Level, len(levels))
	for i, l := range levels {
		l.Ago = late
		out[i] = l
	}
	return out
}

// release collects what an attempt with a lease tells the store; its
// methods do nothing on a nil release (no lease).
type release struct {
	budgetstore.Release
	ref leaseRef
}

// releaseFor starts the release of t's lease, if it has one, with the
// linger of its slot, and notes how long t's call took (the drain,
// storeResult).
func (s *State) releaseFor(t *Ticket, linger time.Duration) *release {
	now := time.Now()
	s.rollLongestLocked(now)
	s.longest = max(s.longest, now.Sub(t.start))
	if t.lease == "" {
		return nil
	}
	delete(s.leases, t.lease)
	return &release{Release: budgetstore.Release{Lease: t.lease, Linger: linger, RefusalLimit: RefusalLimit, RefusalWindow: RefusalWindow}, ref: t.ref}
}

// refund gives amount of l back; with turn, with the level's pace, whose
// turn goes back too.
func (r *release) refund(l *level, amount float64, turn bool, now time.Time) {
	if r != nil && turn {
		r.Refund = append(r.Refund, pacedLevel(l, amount, now))
	} else if r != nil {
		r.Refund = append(r.Refund, storeLevel(l, amount, now))
	}
}

func (r *release) left(l *level, remaining float64, reset time.Duration, now time.Time) {
	if r != nil {
		sl := storeLevel(l, remaining, now)
		sl.Reset = max(reset, 0)
		r.Left = append(r.Left, sl)
	}
}

func (r *release) owe(l *level, owe float64, hold time.Duration, now time.Time) {
	if r != nil {
		sl := storeLevel(l, owe, now)
		sl.Hold = max(hold, 0)
		r.Owe = append(r.Owe, sl)
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

// releaseSharedLocked sends rel to the store its lease came from; it
// unlocks s.mu.
func (s *State) releaseSharedLocked(rel *release, refused bool, now time.Time) {
	if rel == nil {
		s.mu.Unlock()
		return
	}
	rel.Refused, rel.MaxInFlight = refused, s.parallel
	s.sendLocked(pendingOp{leaseRef: rel.ref, rel: rel.Release, at: now}, now)
}

// refundSharedLocked gives amount of l back in the store that admitted c's
// last attempt; it unlocks s.mu. An attempt admitted on the local budget
// took nothing there.
func (s *State) refundSharedLocked(c *Call, l *level, amount float64, now time.Time) {
	if c.ticket.lease == "" {
		s.mu.Unlock()
		return
	}
	s.sendLocked(pendingOp{leaseRef: c.ticket.ref, refund: []budgetstore.Level{storeLevel(l, amount, now)}, at: now}, now)
}

// sendLocked sends op now; it unlocks s.mu. While op's store is the
// current one and down, or when the send fails, the keeper sends it later,
// so that the slot it frees and what it teaches are not lost for a lease
// time. A failure counts against the store only while that is current.
func (s *State) sendLocked(op pendingOp, now time.Time) {
	if op.seq == s.storeSeq && !s.sharedActiveLocked(now) {
		s.keepLocked(op)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if err := s.send(op, now); err != nil {
		s.mu.Lock()
		s.keepLocked(op)
		current := op.seq == s.storeSeq
		s.mu.Unlock()
		if current {
			_ = s.storeResult(err, nil)
		}
	}
}

func leaseID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
