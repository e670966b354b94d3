package budget

import (
	"time"
)

// Shortest span, and part of its window, over which the net refill of a
// level others take from is measured: long enough that the takes of the
// others, which come in bursts, average out.
const (
	minGainSpan    = time.Second
	gainSpanWindow = 2
	// flatSlack is how far a mark may move, r being whole units, and show
	// no refill.
	flatSlack = 1
)

// learnGain reads the net refill of a level others take from off r of a
// RateLimit member naming it (pending: what the server had not counted
// yet). A full level shows none: what it would have gained beyond full is
// lost to the measure, so it starts again. The measure binds, below the
// refill t implies, for a window after it was taken.
func (l *level) learnGain(remaining, pending float64, now time.Time) {
	if !l.shared || l.window <= 0 {
		return
	}
	l.log.prune(now.Add(-l.window))
	mark := remaining + l.charged + l.inflight - pending - l.log.freed
	// A drop of the mark beyond what the server may not have counted at
	// either answer is what others took between them, at once when the
	// answers came within maxDropGap: the fall since an older answer is
	// many takes and refills, and kept back it would hold every call for
	// up to a window.
	if drop := l.others.mark - mark - max(l.others.pending, pending); !l.others.markAt.IsZero() && now.Sub(l.others.markAt) <= l.maxDropGap() && drop > 0 {
		l.others.drops.add(drop, now, now.Add(-l.window))
	}
	l.others.mark, l.others.pending, l.others.markAt = mark, pending, now
	if remaining >= l.size() {
		l.others.gain.restart(mark, pending, now)
		return
	}
	l.others.gain.add(mark, pending, max(minGainSpan, l.window/gainSpanWindow), l.grossRate(), max(l.window, ObservedRateTTL), now)
}

// netRefill is the net refill of a level others take from, read off the
// marks of its answers (learnGain): how fast the mark grew across answers
// at least a span apart.
type netRefill struct {
	at      time.Time // when mark was read
	mark    float64   // the mark then
	pending float64   // what the server had not counted at at
	flat    bool      // every answer since at showed the mark where mark put it
	rate    float64   // the refill measured last
	last    float64   // the measure before
	until   time.Time // when rate is too old to bind; zero before the first
}

// restart starts a measure from mark.
func (g *netRefill) restart(mark, pending float64, now time.Time) {
	g.at, g.mark, g.pending, g.flat = now, mark, pending, true
}

// add reads mark: once span has passed since the measure's start, the
// refill since, at most gross, binds for bind.
func (g *netRefill) add(mark, pending float64, span time.Duration, gross float64, bind time.Duration, now time.Time) {
	if g.at.IsZero() || now.Before(g.at) {
		g.restart(mark, pending, now)
		return
	}
	// Each mark is low by what the server had counted of the calls in
	// flight at its answer.
	g.flat = g.flat && mark >= g.mark-pending-flatSlack && mark <= g.mark+g.pending+flatSlack
	elapsed := now.Sub(g.at)
	if elapsed < span {
		return
	}
	rate := min(max(0, (mark-g.mark)/elapsed.Seconds()), gross)
	if now.After(g.until) {
		g.last = rate
	}
	// The lesser of the last two measures: each is off by what the
	// server had counted of the calls in flight at its ends.
	g.rate, g.last = min(rate, g.last), rate
	g.until = now.Add(bind)
	g.at, g.mark, g.pending = now, mark, pending
}

// keepOwe keeps a refusal's owe through a word on the level that came
// within the refusal's wait, remaining left: unless the level showed it
// refills continuously (a bucket, which does refill meanwhile), when the
// wait ends it holds a unit more than the word, not the refill of the
// whole wait. It returns the cap it set, and false when it set none.
func (l *level) keepOwe(remaining float64, now time.Time) (float64, bool) {
	if !now.Before(l.holdUntil) || !l.refills() || l.bucket {
		return 0, false
	}
	owe := remaining + 1 - l.refillUntil(now, l.holdUntil)
	l.cap(owe)
	return owe, true
}

// observe takes the server's word on the level: remaining was left when it
// answered, and shown is the most it showed the level to hold (remaining,
// or a capacity). The attempts in flight it cannot have counted; what
// was charged after the answered call was admitted (chargedSince) it may or may
// not have (answers to calls sent at once arrive in any order). The
// model's own count, which took every admitted call off the last word,
// decides between the two readings: it is kept when it lies between them,
// so that calls the server counted before this answer are not taken
// twice. Outside them it is wrong (others took from the level, or the
// model is behind), and the careful reading holds. The answer to a call
// that took nothing from the level (older: a server that names the
// narrowest of all levels) says nothing of which calls it counted: its
// word may be older than the model's and only lowers it. A word that the
// contract's bucket would say (addsUp) leaves the prior standing.
// freedSince is what the key's log freed after the answered call took from
// the level (Call.freedSince; negative when it took nothing).
func (l *level) observe(remaining, shown, chargedSince, freedSince float64, reset int64, older bool, now time.Time) {
	l.refill(now)
	if l.shared && l.window > 0 {
		// A take of this key's admitted a window before now may have left
		// the server's window before it counted this answer: r counts
		// what it freed, which is then freed once, not again later.
		before, cut := l.log.freed, now.Add(-l.window)
		l.log.free(func(e logEntry) bool { return !e.sent.After(cut) })
		l.others.freedSeen += l.log.freed - before
	}
	if !l.addsUp(remaining, reset) {
		l.endPrior()
	}
	l.seenMax = max(l.seenMax, shown)
	if l.quota > 0 && shown > l.quota*l.share+0.5 {
		l.bucket = true // it holds more than its quota: a bucket that refills as it goes
	}
	switch upper, lower := remaining-l.inflight, remaining-l.inflight-chargedSince; {
	case older:
		l.tokens = min(l.tokens, upper)
	case l.tokens < lower || l.tokens > upper:
		l.tokens = lower
	}
	l.unconfirmed = 0
	if !now.Before(l.holdUntil) {
		l.promised = 0 // a word after the wait says what is left
	}
	if l.refills() && l.parts.outage < 1 {
		// The word is on the whole level, whose part of the refill each
		// process that lost the store counts already, and some of what
		// it says is left is the parts the others have not taken yet:
		// it lowers this process's part to its part of that, never
		// raises it.
		l.cap(l.tokens)
	} else {
		l.rebasePart()
	}
	l.seenAt, l.usedAt, l.at = now, now, now
	if foreign := l.logAvailable(now) - max(freedSince, 0) - remaining; foreign > 0 {
		// Others take from it too (another process on the key, or a
		// level counted more widely than thought): what they took
		// counts as taken now, so the log bound never says more than
		// the server just did. The server counted the answered call at
		// some moment of its round trip: the log is read as if every
		// attempt sent had been counted already, and as if nothing it
		// freed since the call was taken (freedSince) had left yet, so
		// that no take of this key's is taken for another's. Entries
		// taken for others stay a whole window, and on a level that
		// does not refill they would hold calls the server accepts.
		l.log.add(now, now, foreign, l.window)
	}
}
