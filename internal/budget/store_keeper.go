package budget

import (
	"context"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
)

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
	if s.keeping || len(s.leases) == 0 && len(s.pending) == 0 && !s.reservingLocked(time.Now()) {
		return
	}
	s.keeping = true
	go s.keep()
}

// kickKeeperLocked has a sleeping keeper look at once, and one that is
// looking look again as soon as it is done.
func (s *State) kickKeeperLocked() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
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
	return max(d, 10*time.Millisecond), s.kick
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
	if len(s.leases) == 0 && len(s.pending) == 0 && !s.reservingLocked(time.Now()) {
		s.keeping = false
		s.keeperEndedLocked()
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
	if r := renew[cur]; r != nil {
		r.req.Reservation = s.reservationLocked(time.Now())
	}
	s.mu.Unlock()

	up := map[int]bool{}
	for w, r := range renew {
		m, err := safely(PanicStore, func() (budgetstore.Members, error) {
			ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
			defer cancel()
			return r.st.Renew(ctx, r.key, r.req)
		})
		up[w] = err == nil
		if w == cur {
			_ = s.storeResult(err, &m, true) // a logger that panics fails no call here
		}
	}
	s.mu.Lock()
	if r := renew[cur]; r != nil {
		s.reservationDoneLocked(r.req.Reservation, time.Now())
		if up[cur] {
			s.reservationStoredLocked(r.req.Reservation)
		}
	}
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
				_ = s.storeResult(err, nil, true)
			}
		}
	}
	s.mu.Lock()
	s.pending = append(failed, s.pending...)
	if len(s.pending) > maxPending {
		s.pending = s.pending[len(s.pending)-maxPending:]
	}
	s.mu.Unlock()
	return true
}

// send sends a kept release or refund. The refusal of a release counts
// from when it came; what a release said of the levels is left out when it
// is stale.
func (s *State) send(op pendingOp, now time.Time) error {
	_, err := safely(PanicStore, func() (struct{}, error) {
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
		rel.Owe = owedNow(rel.Owe, late, late > staleAfter)
		if late > staleAfter {
			rel.Left, rel.Cut = nil, false
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

// owedNow is what a release's Owe says late: each refusal's wait, less
// late, and the wait's end is the server's moment, which binds every
// process however late it comes. Stale, it no longer caps what a level
// holds (that is the answers' since), only holds it.
func owedNow(owe []budgetstore.Level, late time.Duration, stale bool) []budgetstore.Level {
	var out []budgetstore.Level
	for _, l := range owe {
		if stale {
			if l.Hold <= late {
				continue // nothing left of it to hold
			}
			l.Amount = l.Size
		}
		l.Hold = max(l.Hold-late, 0)
		out = append(out, l)
	}
	return out
}

func ago(levels []budgetstore.Level, late time.Duration) []budgetstore.Level {
	out := make([]budgetstore.Level, len(levels))
	for i, l := range levels {
		l.Ago = late
		out[i] = l
	}
	return out
}
