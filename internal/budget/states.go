package budget

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

var states = struct {
	sync.Mutex
	m      map[string]*State
	hosts  map[string]map[*State]struct{} // the states of each host (identity.go)
	groups map[string]map[*State]struct{} // the states of each principal and org (identity.go)
	peak   int                            // the most states m held since it was last copied
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
			s.shared, s.sharedKey, s.logger = from.shared, from.sharedKey, from.logger
			s.storeSeq, s.member, s.members, s.share = from.storeSeq, from.member, from.members, from.share
			s.reservation.seq = from.reservation.seq // the store keeps the latest reservation of the member
			from.mu.Unlock()
			for _, l := range s.levels {
				l.pooled = s.shared != nil
			}
		}
		states.m[id] = s
		joinHostLocked(s)
	}
	return s
}

// live returns the state that holds s's key now: s, or when s was retired,
// the one in the map of For. That one uses s's shared store when it has
// none: another client of the key and host, made without a store, may have
// made it after s retired, and every client of the key and host uses the
// store one of them was given (UseStore).
func (s *State) live() *State {
	if !s.retired.Load() {
		return s
	}
	if n := s.next.Load(); n != nil && !n.retired.Load() {
		return n
	}
	n := forID(s.id, s, time.Now())
	s.mu.Lock()
	st, key, logger := s.shared, s.sharedKey, s.logger
	s.mu.Unlock()
	n.mu.Lock()
	adopt := st != nil && n.shared == nil
	n.mu.Unlock()
	if adopt {
		n.UseStore(st, key, logger)
	}
	s.next.Store(n)
	return n
}

// lock locks the state that stands for s now (live) and returns it: one
// that a sweep retired while this waited for its lock is passed over.
func (s *State) lock() *State {
	for {
		s = s.live()
		s.mu.Lock()
		if !s.retired.Load() {
			return s
		}
		s.mu.Unlock()
	}
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
	states.peak = max(states.peak, len(states.m))
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
	if n := len(states.m); n < states.peak/4 {
		// A map keeps its tables when entries leave, also over many
		// sweeps: copy what is left into one of its size.
		m := make(map[string]*State, n)
		maps.Copy(m, states.m)
		states.m, states.peak = m, n
	}
}

// idleLocked reports whether s has had no use for IdleTTL and holds nothing
// that forgetting it would lose: a call in flight or waiting, a lockout, a
// server's wait or an exhausted quota still running, a refusal in the
// guard's window, a release the shared store has not had, a keeper that
// still has to tell the store something (store_keeper.go).
func (s *State) idleLocked(now time.Time) bool {
	if s.waiting > 0 || s.reserved > 0 || s.inflight > 0 || len(s.pending) > 0 || len(s.leases) > 0 || s.keeping ||
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
