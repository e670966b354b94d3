package budget

import (
	"net/http"
	"slices"
	"time"
)

// observeLocked follows the server's RateLimit-Policy (quota, window and
// unit of each policy; an unknown policy becomes a level of its own that
// binds no call yet) and RateLimit (what remains of the levels it names: the
// server's word, less what is still in flight; a member naming a learned
// policy ties it to the call's operation, or with a pk to the call's
// target). A missing or malformed field changes nothing.
func (s *State) observeLocked(c *Call, h http.Header, now time.Time, rel *release, charged bool) {
	s.slowStart.learned = true
	if now.Sub(s.bounds.sweptAt) >= levelSweepEvery || now.Before(s.bounds.sweptAt) {
		s.dropIdleLevelsLocked(now)
	}
	if lines := h[fieldRateLimitPolicy]; !fieldTooLong(lines) && !slices.Equal(lines, s.lastPolicy) {
		// Servers send the same policies on every answer: parse them
		// only when they change.
		s.lastPolicy = slices.Clone(lines)
		s.applyPoliciesLocked(parsePolicyHeader(h), now)
	}
	var buf [2]limitHeader
	for _, r := range parseLimitInto(h, buf[:0]) {
		r.reset = min(r.reset, maxSeconds)
		l := s.levels[r.name]
		if r.partition != "" && (l == nil || !l.known) {
			l = s.partitionLocked(r.name, r.partition, c.Target, now)
		}
		if l == nil || r.remaining <= 0 && r.reset <= 0 {
			// Nothing left yet full now: the field contradicts itself.
			continue
		}
		remaining := float64(r.remaining)
		switch {
		case l.known:
		case r.partition != "":
			if l.tie(c.kind()) { // a partition is the target's own
				s.version++
			}
		case l.witness(c.kind(), l.amountFor(c.Cost), remaining, s.othersLocked(l, c), now):
			s.version++
		}
		if l.name == Egress {
			c.reported = l
		}
		chargedSince, known := c.chargedSince(l, charged)
		pending := l.inflight + chargedSince // what the server may not have counted yet
		l.observe(remaining, remaining, chargedSince, c.freedSince(l, now), r.reset, !known, now)
		l.reported = reported{remaining: remaining, reset: time.Duration(max(r.reset, 0)) * time.Second, at: now, others: s.othersFrom(c)}
		l.said(now)
		l.learnDepth(remaining, r.reset, now)
		l.learnShape(remaining, r.reset, now)
		l.learnSteps(remaining, r.reset)
		l.learnGain(remaining, pending, now)
		rel.left(l, remaining, l.reported.reset, now)
		if r.reset >= minObservedReset && remaining < l.size() && l.shared {
			// What others take shows as a slower refill than the quota's:
			// never assume a faster one (of a level of this key alone, a
			// longer t says it holds more than the model has seen). t is
			// whole seconds, rounded up, so a short one says little. It is
			// when the whole level is full again, not this key's share of
			// it (org: half): the refill it implies is of the whole.
			full := max(l.size(), l.quota)
			l.observedRate = min((full-remaining)/float64(r.reset), l.grossRate())
			l.observedUntil = now.Add(ObservedRateTTL)
		}
		if owe, ok := l.keepOwe(remaining, now); ok {
			rel.owe(l, owe, l.holdUntil.Sub(now), now)
		}
		l.gate.wakeHead()
	}
}

// setParallelLocked takes quota, the server's parallel quota, for the
// slots in flight; a quota of 0 or less is none.
func (s *State) setParallelLocked(quota float64) {
	if quota > 0 {
		s.parallel = int(min(quota, 1<<20))
		s.slotGate.wakeHead()
	}
}

// applyPoliciesLocked takes the quotas, windows and units a RateLimit-Policy
// announced. parallel (or any concurrent-requests policy of that name) sets
// the in-flight limit; a quota of 0, or a new policy without a window, is
// not modelled: it would hold its calls forever.
func (s *State) applyPoliciesLocked(policies []policyHeader, now time.Time) {
	for _, p := range policies {
		p.window = min(p.window, maxSeconds)
		if p.name == Parallel || p.unit == "concurrent-requests" {
			if p.name == Parallel {
				s.setParallelLocked(float64(p.quota))
			}
			continue
		}
		if p.quota <= 0 {
			continue
		}
		l := s.levels[p.name]
		if l == nil {
			if p.window <= 0 || !s.roomLocked(false, now) {
				continue
			}
			l = newLevel(p.name)
			l.tokens, l.at = float64(p.quota), now
			s.addLevelLocked(p.name, l, now)
		}
		l.usedAt = now
		l.refill(now)
		if float64(p.quota) != l.docQuota || p.window > 0 && time.Duration(p.window)*time.Second != l.window {
			l.endPrior() // another plan: the contract's capacity is not its
		}
		l.quota = float64(p.quota)
		if !l.known || p.unit != "requests" {
			l.unit = p.unit // a level of the API keeps its unit unless a header names another than the default
		}
		if p.window > 0 {
			l.window = time.Duration(p.window) * time.Second
		}
		l.cap(l.size())
		l.gate.wakeHead()
	}
}

// addLevelLocked adds l to s's levels as id, counted against the bounds on
// learned levels; l is shared, since nothing says whose calls it counts.
func (s *State) addLevelLocked(id string, l *level, now time.Time) {
	l.usedAt, l.shared = now, true
	l.reported.others = s.othersFrom(nil)
	if l.pooled = s.shared != nil; l.pooled {
		l.parts.outage = s.outagePart
	}
	s.countLevelLocked(l, 1)
	s.levels[id] = l
	s.order = append(s.order, l)
	s.version++
}

// targetPartitionLocked returns the partition of the learned policy name
// that holds target, nil when none does.
func (s *State) targetPartitionLocked(name, target string) *level {
	for _, l := range s.order {
		if l.partition != "" && l.name == name && l.target == target {
			return l
		}
	}
	return nil
}

// partitionLocked returns the level of one partition of a learned policy,
// made from the announced policy when it is new: it holds the calls to
// target only. A new pk for a target that has a partition of the policy
// moves that partition to it: a target is in one partition of a policy.
// Past MaxPartitions a new one is nil.
func (s *State) partitionLocked(name, pk, target string, now time.Time) *level {
	id := name + "\x00" + pk
	if l := s.levels[id]; l != nil {
		return l
	}
	if l := s.targetPartitionLocked(name, target); l != nil {
		delete(s.levels, name+"\x00"+l.partition)
		l.partition = pk
		s.levels[id] = l
		return l
	}
	base := s.levels[name]
	if base == nil || base.window <= 0 || !s.roomLocked(true, now) {
		return nil
	}
	l := newLevel(name)
	l.unit, l.quota, l.window = base.unit, base.quota, base.window
	l.partition, l.target = pk, target
	l.tokens = l.quota
	s.addLevelLocked(id, l, now)
	return l
}
