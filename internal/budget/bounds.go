package budget

import (
	"context"
	"log/slog"
	"time"
)

// The bounds on what answers can make the model learn, so that a hostile or
// broken server costs each key at most a constant: a RateLimit or
// RateLimit-Policy field longer than MaxFieldBytes (all its lines together)
// is ignored; a key learns at most MaxLearnedPolicies policies the API does
// not document and at most MaxPartitions partitions (pk) of them, and a
// policy or partition past the cap is ignored (logged once per key); a
// learned level that no call has used and the server has not named for
// LevelIdleTTL is dropped, and comes back when the server names it again. A
// policy's name or unit (qu) longer than MaxNameBytes, in a header member, a
// refusal or a shared store's answer, is no name: the member is skipped, the
// refusal names no level.
const (
	MaxFieldBytes      = 8 << 10
	MaxNameBytes       = 128
	MaxLearnedPolicies = 64
	MaxPartitions      = 256
	LevelIdleTTL       = 10 * time.Minute
)

// learnedBounds is what a key counts against the bounds on learned levels.
type learnedBounds struct {
	policies      int       // learned policies the API does not document
	partitions    int       // partitions (pk) of them
	overflowNoted bool      // a policy or partition past a bound was noted
	overflowDue   bool      // and is still to be logged (logOverflow)
	sweptAt       time.Time // when the idle learned levels were last dropped
}

// The bounds on the waits an answer makes the key's calls sit out. A lockout
// lasts 5 minutes (bodo-api.md), so its wait is held at most MaxLockout;
// any other wait of a refusal at most MaxServerWait, the longest window of
// a level the API refuses with a wait (egress, an hour): a longer quota
// (delete-day) is QUOTA_EXHAUSTED, which blocks until its resetsAt (at most
// maxHold). A 429 or 503 that is not the API's own (no problem with a code:
// a proxy, a load balancer) holds no other call: its wait binds only the
// call that got it, since it speaks for whatever answered, not for the key.
const (
	MaxLockout    = 5 * time.Minute
	MaxServerWait = time.Hour
)

// levelSweepEvery is how often at most answers look for idle learned levels.
const levelSweepEvery = time.Minute

// UseLogger gives s a logger for what it says once (an overflow of its
// bounds) when it has none yet; a shared store's logger takes its place.
func (s *State) UseLogger(logger *slog.Logger) {
	s = s.lock()
	defer s.mu.Unlock()
	if s.logger == nil {
		s.logger = logger
	}
}

// fieldTooLong reports whether a field's lines together pass MaxFieldBytes.
func fieldTooLong(lines []string) bool {
	n := 0
	for _, l := range lines {
		if n += len(l); n > MaxFieldBytes {
			return true
		}
	}
	return false
}

// roomLocked reports whether s may learn one more level of the kind of l (a
// partition or a policy), dropping idle ones first when it is full. Past the
// cap it notes an overflow, which the answer's end logs once.
func (s *State) roomLocked(partition bool, now time.Time) bool {
	count, limit := &s.bounds.policies, MaxLearnedPolicies
	if partition {
		count, limit = &s.bounds.partitions, MaxPartitions
	}
	if *count >= limit {
		s.dropIdleLevelsLocked(now)
	}
	if *count < limit {
		return true
	}
	if !s.bounds.overflowNoted {
		s.bounds.overflowNoted, s.bounds.overflowDue = true, true
	}
	return false
}

// countLevelLocked counts a learned level added (n = 1) or dropped (-1).
func (s *State) countLevelLocked(l *level, n int) {
	switch {
	case l.known:
	case l.partition != "":
		s.bounds.partitions += n
	default:
		s.bounds.policies += n
	}
}

// dropIdleLevelsLocked drops the learned levels that no call has used and
// the server has not named for LevelIdleTTL, with nothing in flight, no
// call waiting and no refusal's wait running. A policy still announced in
// RateLimit-Policy is read again from the next answer.
func (s *State) dropIdleLevelsLocked(now time.Time) {
	s.bounds.sweptAt = now
	kept := s.order[:0]
	for _, l := range s.order {
		if l.known || now.Sub(l.usedAt) < LevelIdleTTL || l.inflight != 0 || len(l.gate.q.ws) > 0 || now.Before(l.holdUntil) {
			kept = append(kept, l)
			continue
		}
		id := l.name
		if l.partition != "" {
			id = l.name + "\x00" + l.partition
		}
		delete(s.levels, id)
		s.countLevelLocked(l, -1)
	}
	clear(s.order[len(kept):])
	if len(kept) < len(s.order) { // some were dropped
		s.version++
		s.lastPolicy = nil
	}
	s.order = kept
}

// logOverflow logs, once per key, that an answer named more policies or
// partitions than the key learns; s.mu is not held.
func (s *State) logOverflow(due bool, logger *slog.Logger) {
	if !due || logger == nil {
		return
	}
	_, _ = safely(PanicLogger, func() (struct{}, error) {
		logger.LogAttrs(context.Background(), slog.LevelWarn, "bodo: the server named more rate-limit policies or partitions than the client models; the rest are ignored",
			slog.Int("max_policies", MaxLearnedPolicies), slog.Int("max_partitions", MaxPartitions))
		return struct{}{}, nil
	})
}
