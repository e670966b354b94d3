package budget

import "time"

// moment is when the server's last word said the level frees more (now +
// t): then it holds at least one unit more than the word left it, whatever
// its shape, and how much more the next answer says (momentUnit).
type moment struct {
	at     time.Time // now + t of that word; zero once it passed
	freed  float64   // the level's log.freed when the word came
	gained float64   // what refill added since
	left   float64   // what the word left of the level, less what was taken since
	logged bool      // at is when a take of this key's leaves the window, before the word's t (momentOf)
	passed time.Time // when the moment of the last word's t passed
}

// ObservedRateTTL is how long a refill rate read off a RateLimit header of a
// level others share (principal, org, a learned policy) overrides its quota's
// rate: what the other keys take shows as a slower refill.
const ObservedRateTTL = 10 * time.Second

// minObservedReset is the shortest t a refill rate is read off: with t in
// whole seconds rounded up, the rate read off t >= 5 is at least 80 % of
// the true one.
const minObservedReset = 5

// refills reports whether the server's word is brought forward by a
// continuous refill. A pooled level does unless it showed that it frees in
// steps: the other processes take from it as well, so this process's log
// does not bound it, and the store refills it for all of them.
func (l *level) refills() bool { return l.bucket || l.shared || l.pooled && !l.steps }

// rate is the level's refill per second: the rate the server showed
// while it is recent (observedUntil), else its grossRate; for a level
// that frees what this key took, at most the refill its answers showed
// beyond that (learnGain). Before they showed one, the hint stands: a
// bucket this key alone drains looks like a log others keep full.
func (l *level) rate(now time.Time) float64 {
	r := l.grossRate()
	if now.Before(l.observedUntil) {
		r = l.observedRate
	}
	if l.frees(now) {
		if now.Before(l.others.gain.until) {
			r = min(r, l.others.gain.rate)
		}
		if now.Before(l.noRefillUntil()) {
			r = 0
		}
	}
	if l.defers(now) {
		r = 0
	}
	return r
}

// defers reports whether the level's refill waits for the moment of the
// server's last word: a policy the contract does not document, refilled
// between answers since others may take from it too, that refused a call
// its refill let go early (learnEarly) gains nothing between a word and
// its moment (rule 1), and refills again from then until the next word.
func (l *level) defers(at time.Time) bool {
	return l.resets && !l.bucket && at.Before(l.moment.at)
}

// early reports whether taking amount now goes before the moment of the
// server's last word on more than that word left, on a policy the
// contract does not document: on its refill alone, not on a refusal's
// promise.
func (l *level) early(amount float64, now time.Time) bool {
	return !l.known && !l.bucket && now.Before(l.moment.at) && l.moment.left < l.need(amount)-1e-9 && !l.keepsPromise(now)
}

// said takes the moment of the server's word just reported (r and t, of
// a RateLimit field or a status answer): what it left, less what is in
// flight, binds until then (early).
func (l *level) said(now time.Time) {
	at, logged := l.momentOf(l.reported.reset, now)
	l.moment = moment{at: at, logged: logged, freed: l.log.freed, left: l.tokens, passed: l.moment.passed}
}

// momentOf is the moment of a word whose t is reset, now+t, and false;
// or, of a level that refills only from its moments (resets), when this
// key's oldest take since the moment of a t passed leaves its window, if
// that comes first, and true. A t may say when the level is full again, a
// window after its newest take, where what this key took frees as each
// take leaves; what it took before a t's moment, that moment may have
// freed (a window's reset).
func (l *level) momentOf(reset time.Duration, now time.Time) (time.Time, bool) {
	at := now.Add(reset)
	if !l.resets {
		return at, false
	}
	l.log.prune(now.Add(-l.window))
	for _, e := range l.log.entries[l.log.head:] {
		if e.sent.After(l.moment.passed) {
			left := e.at.Add(l.window)
			return sooner(at, left), left.Before(at)
		}
	}
	return at, false
}

// learnEarly reads a refusal of a call that went early on a policy the
// contract does not document: nothing freed before the moment the server
// named, so its refill waits for the moments (defers), the last word's
// among them. A level of the API that others take from keeps its refill:
// the contract says they take from it, which explains such a refusal.
// It reports whether it learned so now.
func (l *level) learnEarly(now time.Time) bool {
	if l.known || l.bucket || l.resets {
		return false
	}
	l.resets = true
	if now.Before(l.moment.at) {
		l.moment.at, l.moment.logged = l.momentOf(l.moment.at.Sub(now), now)
	}
	return true
}

// noRefillUntil is, before the first measure of the net refill, when the
// answers that showed the level freeing nothing beyond this key's own
// takes for minGainSpan or more (a log the others keep full, or a window
// only this key takes from) stop binding; zero when they showed it moving
// or no such answers came. Until then the quota's refill is a hint they
// contradict (rule 2): the level frees at the moment the server named and
// as this key's own takes leave (rule 1). They bind as the reserve does,
// until an eighth of the window without an answer (reserveLapse): then
// the quota's refill stands, and the call it lets go asks again.
func (l *level) noRefillUntil() time.Time {
	if !l.others.gain.until.IsZero() || !l.others.gain.flat || l.others.markAt.Sub(l.others.gain.at) < minGainSpan {
		return time.Time{}
	}
	return l.reserveLapse()
}

// othersTake reports whether the level is one of the API that other keys
// take from too, and that this key's state does not split with keys of
// this process or, while the shared store is down, with other processes
// (part).
func (l *level) othersTake() bool {
	return l.shared && l.known && l.part() == 1 && l.window > 0
}

// frees reports whether the level is one others take from that frees for
// this key what it took a window before. A t that says when it would be
// full if no one took more says nothing of what the others take; one that
// implies a refill slower than the quota's counts it (a bucket they
// drain), and then binds as before. Only a level of the API frees so: its
// log holds every take of this key, where a learned level's misses those
// before it was learned. A level keys of this process split does not
// either: its part of the word is brought forward at its part of the
// refill (partLeft).
func (l *level) frees(now time.Time) bool {
	return l.othersTake() && !(now.Before(l.observedUntil) && l.observedRate < l.grossRate())
}

// rateChange is the first moment after at when rate changes by itself (a
// measure expires); zero when none does.
func (l *level) rateChange(at time.Time) time.Time {
	next := time.Time{}
	moment := time.Time{}
	if l.defers(at) {
		moment = l.moment.at
	}
	for _, t := range [...]time.Time{l.observedUntil, l.others.gain.until, l.noRefillUntil(), moment} {
		if t.After(at) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

// refillUntil is what the refill adds from now until end, as its rate
// changes by itself.
func (l *level) refillUntil(now, end time.Time) float64 {
	gained := 0.0
	for at := now; at.Before(end); {
		next := l.rateChange(at)
		if next.IsZero() || next.After(end) {
			next = end
		}
		gained += l.rate(at) * next.Sub(at).Seconds()
		at = next
	}
	return gained
}

// grossRate is the refill the quota grants, before what others take.
func (l *level) grossRate() float64 {
	if l.window <= 0 {
		return 0
	}
	return l.quota * l.share / l.window.Seconds()
}

// refill brings the tokens up to now: by the refill of a level that
// refills continuously, once a refusal's wait has passed to at least the
// refused call's need (promised), and at the moment the server named by
// what the refill since the word has not brought of one unit (momentUnit).
func (l *level) refill(now time.Time) {
	if m := l.moment.at; !m.IsZero() && now.After(m) && m.After(l.at) && !l.at.IsZero() {
		l.refill(m) // the moment's unit, then the refill after it
	}
	start := l.tokens
	defer func() { l.unconfirmed += l.tokens - start }()
	if l.at.IsZero() {
		l.at = now
	}
	if l.shared && l.window > 0 {
		l.log.prune(now.Add(-l.window))
		if l.frees(now) && !now.Before(l.holdUntil) {
			// (While a refusal holds it, the others take what frees:
			// the refusal said so, and what is left then the next
			// answer says.)
			l.tokens = min(max(l.size(), l.tokens), l.tokens+l.log.freed-l.others.freedSeen)
		}
		l.others.freedSeen = l.log.freed
	}
	if now.After(l.at) && l.refills() {
		gained := l.refillUntil(l.at, now)
		l.at = now
		l.tokens = min(max(l.size(), l.tokens), l.tokens+gained)
		l.parts.tokens = min(max(l.parts.of*l.size(), l.parts.tokens), l.parts.tokens+l.parts.of*gained)
	}
	if l.keepsPromise(now) {
		l.tokens = max(l.tokens, l.promised)
		l.parts.tokens = max(l.parts.tokens, l.promised)
	}
	l.moment.gained += l.tokens - start
	if !l.moment.at.IsZero() && !now.Before(l.moment.at) {
		if unit := l.momentUnit(now); unit > 0 {
			l.tokens = min(l.tokens+unit, max(l.size(), l.tokens))
			l.parts.tokens = min(l.parts.tokens+l.parts.of*unit, max(l.parts.of*l.size(), l.parts.tokens))
		}
		if !l.moment.logged {
			l.moment.passed = l.moment.at
		}
		l.moment.at = time.Time{}
	}
	l.at = later(l.at, now)
	l.syncPart()
}

// momentUnit is what the level gains at its moment: one unit, less what
// its refill brought since the word named the moment. For a level that
// frees what this key took, nothing once something of the key's left the
// window since: that was what the moment named.
func (l *level) momentUnit(now time.Time) float64 {
	if l.frees(now) && l.log.freed != l.moment.freed {
		return 0
	}
	return max(0, 1-l.moment.gained)
}

// keepsPromise reports whether a refusal's wait has ended, and the moment
// its need was promised for (promisedAt), and no call has taken from the
// level since: the refused call's need is there (promised).
func (l *level) keepsPromise(now time.Time) bool {
	return l.promised > 0 && !now.Before(l.holdUntil) && !now.Before(l.promisedAt)
}
