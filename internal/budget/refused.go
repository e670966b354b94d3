package budget

import (
	"net/http"
	"time"
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

// isOverload reports whether a refusal speaks of the instance, not of a
// limit: an OVERLOADED, or a 503 of the API not coded RATE_LIMITED.
func isOverload(status int, p *Problem) bool {
	return p.Code == codeOverloaded || p.Code != codeRateLimited && status == http.StatusServiceUnavailable
}

// namesALevel reports whether an API refusal's wait binds only the calls
// that take from the level it names: one naming a level other than
// parallel or the lockout, and not speaking of the instance. Any other
// refusal of the API holds every call of the key.
func namesALevel(status int, p *Problem) bool {
	return !isOverload(status, p) && p.Policy != "" && p.Policy != Parallel && p.Policy != Lockout
}

// refusedLocked learns from a refusal of c's attempt admitted at sent,
// which took taken. Its wait binds every call it concerns: a lockout, an
// OVERLOADED, a parallel refusal or a refusal that names no level holds
// every call of the key, for at most MaxLockout or MaxServerWait; one that
// is not the API's own holds no other call; a refusal on a level holds the
// calls that take from that level, and the level owes what the call lacked
// until then; one of a call that went early on a learned policy shows that
// it frees in steps (level.learnEarly). A
// refusal slows what it speaks of (AIMD, pace.go): one naming a level cuts
// that level's pace, any other the key's pace and in-flight cap; a
// RATE_LIMITED (or unknown 429) halves them, an OVERLOADED (or unknown
// 503) cuts them less. QUOTA_EXHAUSTED blocks its policy until it resets:
// for a policy the client has no model of, the refused operation only.
func (s *State) refusedLocked(c *Call, taken []take, sent time.Time, status int, p *Problem, now time.Time, rel *release) {
	if p.Code == codeQuotaExhausted {
		s.blockLocked(c, p, now, rel)
		return
	}
	if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
		return
	}
	overload := isOverload(status, p)
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
	case namesALevel(status, p):
		l = s.refusingLevelLocked(c, p.Policy, now)
		if l != nil && c.Status && l == s.status.level {
			l.statusRefusedLocked()
		}
		for _, t := range taken {
			if t.l == l && t.early && l.learnEarly(now) {
				rel.resay(l, now) // the refusal's own word went to the store before
			}
		}
		if l != nil && p.Hinted {
			l.refill(now)
			l.holdUntil = later(l.holdUntil, now.Add(wait))
			amount := s.amountLocked(c, l)
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
			l.promised, l.promisedAt = l.need(amount), now.Add(wait)
			if missing := l.promised - l.tokens; l.frees(now) && missing > 0 {
				// What frees at the server's moment may be what the others
				// took a window before, which they take again as it frees:
				// the level holds the need once what this key took has left
				// instead, when that comes before the reserve lapses.
				if d := l.logFreesAfter(missing, now.Add(wait), now); d != forever && !now.Add(d).After(l.reserveLapse()) {
					l.promisedAt = now.Add(d)
				}
			}
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
// the refused kind of call at once; of a partitioned policy, the partition
// that holds the call's target is the level, and the policy's base is not
// tied.
func (s *State) refusingLevelLocked(c *Call, policy string, now time.Time) *level {
	if l := s.targetPartitionLocked(policy, c.Target); l != nil {
		l.usedAt = now
		return l
	}
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
		if l.scope.evidence == nil {
			l.scope.evidence = map[string]int{}
		}
		l.scope.evidence[c.kind()] = 2 * tieAfter
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
	if l := s.levels[policy]; l == nil || !l.known && !l.scope.ops[c.kind()] {
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
