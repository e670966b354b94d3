package budget

import (
	"net/http"
	"slices"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
)

// Codes of the problems the budget learns from.
const (
	codeRateLimited    = "RATE_LIMITED"
	codeOverloaded     = "OVERLOADED"
	codeQuotaExhausted = "QUOTA_EXHAUSTED"
)

// maxHold is the longest wait the budget takes from one answer: a reset
// further away is held this long, and the first call after asks again.
const maxHold = 24 * time.Hour

// Answer is what the server said to an attempt.
type Answer struct {
	Status int
	Header http.Header
	// Problem is the refusal or error of a non-2xx answer; nil otherwise.
	Problem *Problem
}

// Problem is what the budget reads of a problem answer.
type Problem struct {
	Code       string
	Policy     string
	RetryAfter time.Duration // the server's wait, when Hinted
	Hinted     bool
	ResetsAt   time.Time
}

// Finish ends an admitted attempt with its answer: it frees the slot, counts
// a refusal, gives back what a refused call was not charged, follows the
// RateLimit headers, holds the calls a refusal's wait concerns and cuts the
// AIMD state on a refusal that speaks of the key's rate.
func (t *Ticket) Finish(a Answer) { t.end(&a, false, false) }

// Unanswered ends an attempt that got no answer; sent says it may have
// reached the server, cancelled that the caller's context ended it. One
// that was sent keeps its slot in flight while the server may still be
// working on it (lingerLocked). One that was sent and not cancelled counts
// for the lockout guard as a refusal: the server may have refused it
// without the client ever reading that.
func (t *Ticket) Unanswered(sent, cancelled bool) { t.end(nil, sent, cancelled) }

func (t *Ticket) end(a *Answer, sent, cancelled bool) {
	t.once.Do(func() {
		s, c := t.s, t.c
		s.mu.Lock()
		now := time.Now()
		unknown := sent && !cancelled
		linger := time.Duration(0)
		if a == nil && sent && c.Budgeted {
			linger = s.lingerLocked(t, now)
		}
		rel := s.releaseFor(t, linger)
		s.reserved--
		s.lastUse = now
		refused := a != nil && a.Status == http.StatusTooManyRequests
		uncharged := refused || a != nil && a.Status == http.StatusServiceUnavailable
		if refused || unknown {
			s.refusals = append(s.refusals, now)
		}
		if a != nil && !(refused && (a.Problem == nil || a.Problem.Code == "")) {
			s.passed.add(t.start) // a limiter in front let it through (rule 6)
		}
		if c.Budgeted {
			s.open = s.open.minus(sentCount{1, c.Cost})
			if linger > 0 {
				time.AfterFunc(linger, s.freeSlot)
			} else {
				s.inflight--
			}
			// An error answer returns no records: what a read reserved of
			// egress is given back (a 304 is settled by the caller).
			noRecords := a != nil && a.Status >= http.StatusBadRequest
			replayed := a != nil && a.Status < http.StatusMultipleChoices && a.Header.Get("Idempotent-Replayed") == "true"
			replay := replayed && c.kept // the attempt that did the call is charged already
			if replayed && !c.kept {
				s.replayedLocked(t, now)
			}
			c.kept = c.kept || unknown || a != nil && !uncharged
			var took []budgetstore.Level
			for _, tk := range t.taken {
				l := tk.l
				l.inflight -= tk.amount
				l.answered(t.start, tk.probe, a != nil && !uncharged, c.Status, now)
				back := 0.0
				switch {
				case uncharged || noRecords && l.name == Egress:
					back = tk.amount
				case replay:
					back = replayBack(l, tk.amount)
				}
				if back > 0 {
					l.give(back)
					if replay {
						// A replay takes no turn of a level it is not counted on:
						// its turn goes back (the next refill caps it at the burst).
						l.pace.take(-back, now)
					}
					rel.refund(l, back, replay, now)
				}
				if used := tk.amount - back; used > 0 {
					l.log.add(now, t.start, used)
					l.charged += used
					if t.lease == "" && s.shared != nil {
						took = append(took, storeLevel(l, -used, now))
					}
				}
				l.gate.wakeHead()
			}
			s.tookLocallyLocked(took, now)
			leaveRuns(c, false, a != nil && a.Status >= http.StatusOK && a.Status < http.StatusMultipleChoices)
			s.slotGate.wakeHead()
		}
		s.guardGate.wakeHead()
		if a != nil {
			if !s.learned {
				s.openFlightLocked(t.start, now)
			}
			s.observeLocked(c, a.Header, now, rel, !uncharged)
			if a.Problem != nil {
				s.refusedLocked(c, t.start, a.Status, a.Problem, now, rel)
			}
		}
		s.landedLocked(t)
		t.endReadingLocked() // the answer's waits are in: requests held at their last moment look again
		overflow, logger := s.overflowDue, s.logger
		s.overflowDue = false
		s.releaseSharedLocked(rel, refused || unknown, now) // unlocks
		s.sayOverflow(overflow, logger)
	})
}

// replayPoints is what the API charges for an idempotent replay.
const replayPoints = 1

// replayBack is what a retry answered by an idempotent replay gives back of
// amount, its take from l: the replay costs replayPoints and is no write,
// so it keeps replayPoints of a level that counts points and nothing of
// the levels that count writes and deletes. The attempt whose answer was
// lost did the call, and keeps its take. A policy the client learned keeps
// what it took: what it counts of a replay is the server's.
func replayBack(l *level, amount float64) float64 {
	switch {
	case l.unit == "points":
		return max(0, amount-replayPoints)
	case l.name == Write || l.name == Delete || l.name == DeleteDay:
		return amount
	}
	return 0
}

// replayedLocked counts what the server charged for the attempt of a call
// whose answer is a replay when no earlier attempt that may have reached
// the server kept its take: something sent the request before, unseen
// (a RoundTripper of the caller's that resends; package bodo holds back
// net/http's own resends), and the server charged that request in full and
// the replay besides. The attempt took the call's cost; the replay's point
// is taken now from the levels it counts points on.
func (s *State) replayedLocked(t *Ticket, now time.Time) {
	for _, tk := range t.taken {
		if l := tk.l; l.unit == "points" {
			l.take(replayPoints, now)
			l.charged += replayPoints
			l.log.add(now, t.start, replayPoints)
		}
	}
}

// chargedSince is what was charged to l after c's last attempt was admitted,
// less c's own take when the server charged it: answers to calls sent at
// once arrive in any order, and a call admitted earlier may have reached
// the server later. A Status call knows it of every level (chargedAt),
// other calls of the levels they take from; known is false for a level
// the call took nothing from.
func (c *Call) chargedSince(l *level, charged bool) (since float64, known bool) {
	took := false
	for _, t := range c.takes {
		if t.l == l {
			took = true
			d := l.charged - t.charged
			if charged {
				d -= t.amount
			}
			since += max(0, d)
		}
	}
	mark, ok := c.chargedAt[l]
	if ok && !took {
		since = max(0, l.charged-mark)
	}
	return since, took || ok
}

// observeLocked follows the server's RateLimit-Policy (quota, window and
// unit of each policy; an unknown policy becomes a level of its own that
// binds no call yet) and RateLimit (what remains of the levels it names: the
// server's word, less what is still in flight; a member naming a learned
// policy ties it to the call's operation, or with a pk to the call's
// target). A missing or malformed field changes nothing.
func (s *State) observeLocked(c *Call, h http.Header, now time.Time, rel *release, charged bool) {
	s.learned = true
	if h == nil {
		return
	}
	if now.Sub(s.levelsSweptAt) >= levelSweepEvery || now.Before(s.levelsSweptAt) {
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
		case l.witness(c.kind(), remaining, s.othersLocked(l, c)):
			s.version++
		}
		if l.name == Egress {
			c.reported = l
		}
		chargedSince, known := c.chargedSince(l, charged)
		pending := l.inflight + chargedSince // what the server may not have counted yet
		l.observe(remaining, remaining, chargedSince, r.reset, !known, now)
		l.reported = reported{remaining: remaining, reset: time.Duration(min(max(r.reset, 0), maxWindowSeconds)) * time.Second, at: now, others: s.othersFrom(c)}
		l.moment, l.momentFreed, l.momentGained = now.Add(l.reported.reset), l.log.freed, 0
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

// applyPoliciesLocked takes the quotas, windows and units a RateLimit-Policy
// announced. parallel (or any concurrent-requests policy of that name) sets
// the in-flight limit; a quota of 0, or a new policy without a window, is
// not modelled: it would hold its calls forever.
func (s *State) applyPoliciesLocked(policies []policyHeader, now time.Time) {
	for _, p := range policies {
		if p.name == Parallel || p.unit == "concurrent-requests" {
			if p.name == Parallel && p.quota > 0 {
				s.parallel = int(min(p.quota, 1<<20))
				s.slotGate.wakeHead()
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
			l.window = time.Duration(min(p.window, maxWindowSeconds)) * time.Second
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
		l.outagePart = s.outagePart
	}
	s.countLevelLocked(l, 1)
	s.levels[id] = l
	s.order = append(s.order, l)
	s.version++
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
	for _, l := range s.order {
		if l.partition != "" && l.name == name && l.target == target {
			delete(s.levels, name+"\x00"+l.partition)
			l.partition = pk
			s.levels[id] = l
			return l
		}
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

// refusedLocked learns from a refusal of c's attempt admitted at sent. Its
// wait binds every call it concerns: a lockout, an OVERLOADED, a parallel
// refusal or a refusal that names no level holds every call of the key,
// for at most MaxLockout or MaxServerWait; one that is not the API's own
// holds no other call; a refusal on a level holds the calls that take from
// that level, and the level owes what the call lacked until then. A
// refusal slows what it speaks of (AIMD, pace.go): one naming a level cuts
// that level's pace, any other the key's pace and in-flight cap; a
// RATE_LIMITED (or unknown 429) halves them, an OVERLOADED (or unknown
// 503) cuts them less. QUOTA_EXHAUSTED blocks its policy until it resets:
// for a policy the client has no model of, the refused operation only.
func (s *State) refusedLocked(c *Call, sent time.Time, status int, p *Problem, now time.Time, rel *release) {
	if p.Code == codeQuotaExhausted {
		s.blockLocked(c, p, now, rel)
		return
	}
	if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
		return
	}
	overload := p.Code == codeOverloaded || p.Code != codeRateLimited && status == http.StatusServiceUnavailable
	kind := rateLimited
	switch {
	case overload:
		kind = overloaded
	case p.Code == "" && !p.Hinted:
		kind = hintless
	}
	wait := min(p.RetryAfter, MaxServerWait)
	if !p.Hinted {
		wait = 0
	}
	var l *level // the level the refusal names
	switch {
	case p.Code == "":
		// Not the API's own answer: its wait binds only the call that got
		// it (see MaxServerWait).
	case p.Policy == Lockout:
		if p.Hinted {
			s.lockedUntil = later(s.lockedUntil, now.Add(min(wait, MaxLockout)))
			rel.pause(s.lockedUntil)
		}
	case !overload && p.Policy != "" && p.Policy != Parallel:
		l = s.refusingLevelLocked(c, p.Policy, now)
		if l != nil && c.Status && l == s.statusLevel {
			l.statusRefusedLocked()
		}
		if l != nil && p.Hinted {
			l.refill(now)
			l.holdUntil = later(l.holdUntil, now.Add(wait))
			amount := 1.0
			for _, t := range s.takesLocked(c) {
				if t.l == l {
					amount = t.amount
				}
			}
			if l.prior && wait.Seconds() > priorWaitSlack*amount/l.grossRate()+0.05 {
				l.endPrior() // a longer wait than the contract's bucket asks of any call
			}
			// The level holds the call's need when the wait ends: one
			// that refills owes the rest of the wait's refill too.
			owe := l.need(amount)
			if l.refills() {
				owe -= l.refillUntil(now, now.Add(wait))
			}
			l.cap(owe)
			l.promised = l.need(amount)
			l.unconfirmed = 0
			l.seenAt = now
			rel.owe(l, owe, wait, now)
		}
	default:
		if p.Hinted {
			s.heldUntil = later(s.heldUntil, now.Add(wait))
			rel.pause(s.heldUntil)
		}
	}
	if l != nil {
		l.pace.cut(kind, sent, wait, l.rate(now), 0, now)
		return
	}
	rate, passed := s.levels[Key].rate(now), 0.0
	if kind == hintless {
		rate, passed = rate/max(s.meanCost, 1), s.passed.rate(now) // its pace counts requests (paceUnitLocked)
		if sent.Sub(s.passed.from) > meterWindow {
			s.passed.from = sent // empty then and now: what was sent between and passed is its rate
		}
	}
	if s.pace.cut(kind, sent, wait, rate, passed, now) {
		rel.cut(kind.cut())
	}
}

// priorWaitSlack is how much longer than the contract's bucket needs to
// refill a whole call a refusal's wait may be before it ends the prior:
// that bucket never asks a call to wait longer, but the wait is rounded.
const priorWaitSlack = 1.25

// refusingLevelLocked returns the level a RATE_LIMITED named, made when
// the policy was never announced (it then holds the refused kind of call);
// nil past MaxLearnedPolicies. A learned policy a refusal names is tied to
// the refused kind of call at once.
func (s *State) refusingLevelLocked(c *Call, policy string, now time.Time) *level {
	l := s.levels[policy]
	if l == nil {
		if !s.roomLocked(false, now) {
			return nil
		}
		l = newLevel(policy)
		s.addLevelLocked(policy, l, now)
	}
	l.usedAt = now
	if !l.known {
		if l.tie(c.kind()) {
			s.version++
		}
		if l.evidence == nil {
			l.evidence = map[string]int{}
		}
		l.evidence[c.kind()] = 2 * tieAfter
	}
	return l
}

// blockLocked records an exhausted quota until its resetsAt (or, without
// one, its Retry-After).
func (s *State) blockLocked(c *Call, p *Problem, now time.Time, rel *release) {
	until := p.ResetsAt
	if until.IsZero() && p.Hinted {
		until = now.Add(p.RetryAfter)
	}
	if until.IsZero() {
		return
	}
	until = sooner(until, now.Add(maxHold))
	b := block{until: until, name: p.Policy}
	policy := p.Policy
	if l := s.levels[policy]; l == nil || !l.known && !l.ops[c.kind()] {
		b.op = c.Op // a policy without a model of its scope: the operation it refused
		policy = policy + "\x00" + c.Op
	}
	if cur, ok := s.blocks[policy]; !ok || until.After(cur.until) {
		s.blocks[policy] = b
	}
	if b.op == "" {
		rel.block(policy, until)
	}
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Settle gives back amount of a level that c's answered attempt reserved
// but did not use (the records a list did not return). When the answer's
// RateLimit named the level, what is left is the server's word already and
// only the key's own log is corrected.
func (s *State) Settle(c *Call, name string, amount float64) {
	if amount <= 0 {
		return
	}
	s = s.live()
	s.mu.Lock()
	now := time.Now()
	l := s.levels[name]
	if l == nil {
		s.mu.Unlock()
		return
	}
	l.refill(now)
	l.log.refund(amount)
	if c.reported == l {
		s.mu.Unlock()
		return
	}
	l.give(min(amount, max(l.size()-l.tokens, 0)))
	l.gate.wakeHead()
	s.refundSharedLocked(c, l, amount, now) // unlocks
}
