package budget

import (
	"math"
	"time"
)

// The level names of the API.
const (
	Key       = "key"
	Write     = "write"
	Parallel  = "parallel"
	Principal = "principal"
	Org       = "org"
	Delete    = "delete"
	DeleteDay = "delete-day"
	Egress    = "egress"
	Lockout   = "lockout"
)

// maxWindowSeconds bounds a policy's window (w), so that no conversion to a
// time.Duration overflows: ten years, longer than any quota resets.
const maxWindowSeconds = 10 * 366 * 24 * 3600

// ObservedRateTTL is how long a refill rate read off a RateLimit header of a
// level others share (principal, org, a learned policy) overrides its quota's
// rate: what the other keys take shows as a slower refill.
const ObservedRateTTL = 10 * time.Second

// minObservedReset is the shortest t a refill rate is read off: with t in
// whole seconds rounded up, the rate read off t >= 5 is at least 80 % of
// the true one.
const minObservedReset = 5

const forever = time.Duration(math.MaxInt64)

// durationOf is seconds as a Duration, rounded up; forever when too long.
func durationOf(seconds float64) time.Duration {
	if seconds >= forever.Seconds() {
		return forever
	}
	return time.Duration(math.Ceil(seconds * 1e9))
}

// level is the client's model of one server level. How the server counts
// it (a token bucket, a sliding log, a sliding-window counter or a fixed
// window) is not known in advance, so the model keeps two lower bounds of
// what is left and believes the larger:
//
//   - the server's word: r of the last RateLimit member that named the
//     level, less what was taken since (and less what was still in flight
//     when it was said), refilled continuously only once the level has shown
//     that it is a bucket (r above its quota) or is shared with others;
//   - for a level of this key alone, its own log: the quota less what this
//     key took within the last window. Every shape of limiter grants at
//     least that: a sliding log exactly, a fixed window and a token bucket
//     that holds at least its quota more.
//
// A refusal on the level holds every call that takes from it until the
// moment the server named.
type level struct {
	name   string
	unit   string // points, requests, records
	quota  float64
	window time.Duration
	share  float64 // the part of the quota this key may use
	split  float64 // of a level keys of this process share, this key's part (identity.go); 1 alone
	// outagePart is this process's part of a pooled level while the shared
	// store is down (fallbackShare.pace); 1 otherwise.
	outagePart float64
	// partTokens is what is left of this key's part (part) of a level it
	// shares: its part of the server's word, refilled by its part of the
	// refill up to its part of the size, less what it took since. partOf
	// is the part it counts; a new part starts it anew from tokens.
	partTokens float64
	partOf     float64
	seenAt     time.Time // when the server last said what is left (status.go)
	capacity   float64   // the documented bucket size (the key's, 600); 0: none
	docQuota   float64   // the documented quota; 0: a learned level
	known      bool      // a level of the API, whose scope the contract gives
	seenMax    float64   // the most the server showed the level to hold
	// prior: the server has said nothing the contract's model would not
	// (the key level a bucket holding its capacity, 600), and the model is
	// the contract's.
	prior bool

	// bucket: the server showed more left than the quota (r > q), so the
	// level refills continuously; shared: other keys take from it too;
	// pooled: a shared store keeps it for every process of the key, and
	// it refills as the store has it (storeLevel) unless it frees in steps.
	bucket bool
	shared bool
	pooled bool

	tokens float64 // the server's word, brought forward; negative after a refusal
	at     time.Time
	// unconfirmed is what refill added to tokens since the last word on the
	// level, the server's or the shared store's (heldLocked), or since an
	// outage part began (partLocked): of a pooled level, the other
	// processes may have taken it.
	unconfirmed float64

	observedRate  float64
	observedUntil time.Time

	// A level others take from frees for this key what this key took a
	// window before (freedSeen: the part of log.freed already in tokens),
	// and besides refills at what its answers show beyond that: r plus
	// what the server had counted of this key's takes, less what left
	// this key's log (gainMark), grows at that rate. t says only when the
	// level would be full if no one took more, which they do.
	freedSeen   float64
	lastMark    float64   // the mark of the last answer
	lastPending float64   // what the server had not counted then
	markAt      time.Time // when it came
	drops       drops     // what others took between two answers within a window (reserve)
	answeredAt  time.Time // the last answer that charged a call, not a status request, on it
	probeAt     time.Time // when the call the others wait for (sent) went; zero once it ended
	gainAt      time.Time // when gainMark was read
	gainMark    float64
	gainPending float64   // what the server had not counted at gainAt
	netRate     float64   // the refill measured last
	lastGain    float64   // the measure before
	netUntil    time.Time // when that measure is too old to bind; zero before the first
	flat        bool      // every answer since gainAt showed the mark where gainMark put it

	holdUntil time.Time     // a refusal's wait: no call that takes from the level goes before
	statusAt  time.Time     // when the last status request about the level left
	statusGap time.Duration // no status about it before statusAt+statusGap (statusRefusedLocked)
	pace      pace          // AIMD of the refusals that named the level
	reported  reported      // the server's last word on the level, as it said it
	usedAt    time.Time     // when a call last took from it or the server last named it (LevelIdleTTL)

	// moment is when the server's last word said the level frees more
	// (now + t): then it holds at least one unit more than the word left
	// it, whatever its shape, and how much more the next answer says.
	moment       time.Time
	momentFreed  float64 // log.freed when the moment was named
	momentGained float64 // what refill added since the moment was named

	// Bucket evidence from r and t (learnShape): a full moment (now + t)
	// that moves later by what the server counted, r and t that add up to
	// the size, are a bucket's.
	bucketEvidence int
	// depthSeen: when a word first showed the documented bucket (learnDepth).
	depthSeen time.Time
	// steps: the level frees in steps (a sliding log or a window): a t
	// further than a bucket would need to be full again (learnSteps).
	steps          bool
	shapeAt        time.Time // the moment the anchor answer's t named
	shapeRemaining float64   // r of the anchor answer
	shapeSeen      time.Time // when that answer came

	log      takeLog
	inflight float64 // taken by attempts still in flight
	admitted float64 // taken by every attempt so far, less what refusals gave back
	charged  float64 // taken by attempts that were answered and charged, so far

	// Scope of a learned policy: the operations the server tied it to
	// (RateLimit naming it, or a refusal), and for a partitioned one the
	// request target of its partition. A learned policy tied to nothing is
	// informative only.
	ops       map[string]bool
	evidence  map[string]int // per kind of call, answers that showed it going down less those that did not (witness)
	partition string         // pk, base64
	target    string

	gate      gate
	storeGate gate // the calls the shared store holds at this level
}

// reported is what the server last said of a level: r and t of a RateLimit
// member naming it, or remaining and resetSeconds of a status answer.
type reported struct {
	remaining float64
	reset     time.Duration
	at        time.Time // zero: the server has not named the level
}

// newLevel returns a level named name, at a share of 1, with the gate
// that guards it.
func newLevel(name string) *level {
	l := &level{name: name, share: 1, split: 1, outagePart: 1, pace: newPace()}
	l.gate.level = l
	return l
}

// endPrior ends the contract's model of the level: the server said what
// the contract's bucket would not (observe, addsUp; a refusal's longer wait,
// refusedLocked) or announced another plan, and decides from now on. What
// its words showed the level to hold stays: more than its quota is a
// bucket's.
func (l *level) endPrior() {
	if l.prior {
		l.prior, l.bucket = false, l.seenMax > l.quota*l.share+0.5
		l.cap(l.size())
	}
}

// size is what the level holds when full, as far as the server has shown.
func (l *level) size() float64 {
	if l.prior {
		return max(l.quota*l.share, l.seenMax, l.capacity)
	}
	return max(l.quota*l.share, l.seenMax)
}

// documented reports whether the level is the API's own, with the
// documented quota: only then is its capacity certain enough to refuse a
// call that can never fit it. Against a size learned from a header, a bigger
// call waits for a full level and then goes, so an odd header never wedges a
// key.
func (l *level) documented() bool { return l.known && l.quota == l.docQuota }

// documentedBucket reports whether the contract gives the level a capacity
// beyond its quota: a bucket (the key level).
func (l *level) documentedBucket() bool { return l.documented() && l.capacity > l.quota }

// fitSize is the most a call may need of the level.
func (l *level) fitSize() float64 {
	if l.documented() && l.capacity > 0 {
		return max(l.capacity, l.size())
	}
	return l.size()
}

// need is what the call must find in the level before it goes.
func (l *level) need(amount float64) float64 {
	if l.documented() {
		return amount
	}
	return min(amount, l.size())
}

// refills reports whether the server's word is brought forward by a
// continuous refill. A pooled level does unless it showed that it frees in
// steps: the other processes take from it as well, so this process's log
// does not bound it, and the store refills it for all of them.
func (l *level) refills() bool { return l.bucket || l.shared || l.pooled && !l.steps }

// part is this process's part of the server's word on the level: this
// key's part among the keys of the process (split), and while the shared
// store is down, of a level that refills, the process's part (outagePart).
func (l *level) part() float64 {
	if l.refills() {
		return l.split * l.outagePart
	}
	return l.split
}

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
		if now.Before(l.netUntil) {
			r = min(r, l.netRate)
		}
		if now.Before(l.noRefillUntil()) {
			r = 0
		}
	}
	return r
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
	if !l.netUntil.IsZero() || !l.flat || l.markAt.Sub(l.gainAt) < minGainSpan {
		return time.Time{}
	}
	return l.reserveLapse()
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
	return l.shared && l.known && l.part() == 1 && l.window > 0 && !(now.Before(l.observedUntil) && l.observedRate < l.grossRate())
}

// rateChange is the first moment after at when rate changes by itself (a
// measure expires); zero when none does.
func (l *level) rateChange(at time.Time) time.Time {
	next := time.Time{}
	for _, t := range [...]time.Time{l.observedUntil, l.netUntil, l.noRefillUntil()} {
		if t.After(at) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

// grossRate is the refill the quota grants, before what others take.
func (l *level) grossRate() float64 {
	if l.window <= 0 {
		return 0
	}
	return l.quota * l.share / l.window.Seconds()
}

// refill brings the tokens up to now: by the refill of a level that
// refills continuously, and at the moment the server named by what the
// refill since the word has not brought of one unit (momentUnit).
func (l *level) refill(now time.Time) {
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
			l.tokens = min(max(l.size(), l.tokens), l.tokens+l.log.freed-l.freedSeen)
		}
		l.freedSeen = l.log.freed
	}
	if now.After(l.at) && l.refills() {
		gained := 0.0
		for l.at.Before(now) {
			until := l.rateChange(l.at)
			if until.IsZero() || until.After(now) {
				until = now
			}
			gained += l.rate(l.at) * until.Sub(l.at).Seconds()
			l.at = until
		}
		l.tokens = min(max(l.size(), l.tokens), l.tokens+gained)
		l.partTokens = min(max(l.partOf*l.size(), l.partTokens), l.partTokens+l.partOf*gained)
	}
	l.momentGained += l.tokens - start
	if !l.moment.IsZero() && !now.Before(l.moment) {
		if unit := l.momentUnit(now); unit > 0 {
			l.tokens = min(l.tokens+unit, max(l.size(), l.tokens))
			l.partTokens = min(l.partTokens+l.partOf*unit, max(l.partOf*l.size(), l.partTokens))
		}
		l.moment = time.Time{}
	}
	l.at = later(l.at, now)
	l.syncPart()
}

// momentUnit is what the level gains at its moment: one unit, less what
// its refill brought since the word named the moment. For a level that
// frees what this key took, nothing once something of the key's left the
// window since: that was what the moment named.
func (l *level) momentUnit(now time.Time) float64 {
	if l.frees(now) && l.log.freed != l.momentFreed {
		return 0
	}
	return max(0, 1-l.momentGained)
}

// syncPart starts the key's part of the level anew from what the model
// holds when the part changed: what the key took before, the shared store
// or its own whole part admitted.
func (l *level) syncPart() {
	if l.part() != l.partOf {
		l.rebasePart()
	}
}

// rebasePart starts the key's part of the level from what the model holds.
func (l *level) rebasePart() {
	l.partOf = l.part()
	l.partTokens = l.partOf * l.tokens
}

// cap lowers what the level holds to at most v, and the key's part of
// it to its part of that.
func (l *level) cap(v float64) {
	l.syncPart()
	l.tokens = min(l.tokens, v)
	l.partTokens = min(l.partTokens, l.partOf*l.tokens)
}

// take takes amount of the level for a call admitted at now; give gives
// back amount of it that the call did not use.
func (l *level) take(amount float64, now time.Time) {
	if l.at.IsZero() {
		l.at = now // the refill counts from the first take
	}
	l.syncPart()
	l.tokens -= amount
	l.partTokens -= amount
}

func (l *level) give(amount float64) {
	l.tokens += amount
	l.partTokens += amount
}

// observe takes the server's word on the level: remaining was left when it
// answered, and shown is the most it showed the level to hold (remaining,
// or a capacity). The attempts in flight it cannot have counted; what
// charged after the answered call was admitted (chargedSince) it may or may
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
func (l *level) observe(remaining, shown, chargedSince float64, reset int64, older bool, now time.Time) {
	l.refill(now)
	if l.shared && l.window > 0 {
		// A take of this key's admitted a window before now may have left
		// the server's window before it counted this answer: r counts
		// what it freed, which is then freed once, not again later.
		before, cut := l.log.freed, now.Add(-l.window)
		l.log.free(func(e logEntry) bool { return !e.sent.After(cut) })
		l.freedSeen += l.log.freed - before
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
	if l.refills() && l.outagePart < 1 {
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
	if foreign := l.logAvailable(now) - remaining; foreign > 0 {
		// Others take from it too (another process on the key, or a
		// level counted more widely than thought): what they took
		// counts as taken now, so the log bound never says more than
		// the server just did. Read as if every attempt sent had been
		// counted already, so that none is taken for another's: entries
		// taken for others stay a whole window, and on a level that does
		// not refill they would hold calls the server accepts.
		l.log.add(now, now, foreign)
	}
}

// logAvailable is the quota less what this key took within the last window
// and what it has in flight; -Inf for a level others share.
func (l *level) logAvailable(now time.Time) float64 {
	if l.shared || l.window <= 0 || l.quota <= 0 {
		return math.Inf(-1)
	}
	l.log.prune(now.Add(-l.window))
	return l.quota*l.share - l.log.sum - l.inflight
}

// available is what the model believes is left now; refill first.
func (l *level) available(now time.Time) float64 {
	v := l.believed(now)
	if l.part() < 1 {
		v = min(v, l.partLeft())
	}
	return v
}

// believed is the larger of the model's lower bounds of what is left.
func (l *level) believed(now time.Time) float64 {
	return max(l.tokens, l.logAvailable(now))
}

// wholeLeft is what the model holds of the whole level: with a part
// (part), what this key's part left makes of it, the others having taken
// theirs (a process with no slot while the store is away has no part and
// says nothing more than believed).
func (l *level) wholeLeft(now time.Time) float64 {
	v := l.believed(now)
	if p := l.part(); p > 0 && p < 1 {
		v = min(v, l.partLeft()/p)
	}
	return v
}

// partLeft is what is left of this process's part of a level (part):
// its part of the server's word, brought forward by its part of the
// refill, less what it took since the server said it (partTokens). Keys,
// or processes cut off from their store, that read the same r thus take it
// once between them. (A part of the quota per window would not do: the
// server's word already counts what the others took, and keys of other
// processes take from it too.)
func (l *level) partLeft() float64 {
	l.syncPart()
	return l.partTokens
}

// minShapeFall is how far, in seconds of the quota's rate, r must have
// fallen before learnShape reads a bucket's full moment: a sliding log
// whose t runs until it is full moves its moment by the time between
// takes, a fixed window's not at all, and t in whole seconds blurs both by
// slack; only past 4 s of fall does that stay further from a bucket's move
// than slack and a tenth.
const minShapeFall = 4

// learnShape reads r and t of a RateLimit member naming the level for a
// bucket's: its full moment, now+t, moves later by what the server counted
// between two answers (the fall of r plus the refill between them), where
// a window's reset and a sliding log's moments move no faster than the
// clock, and r and t add up to the bucket's size. Only a fall at the
// quota's rate or faster tells them apart (spread at the rate, every shape
// looks alike); seen twice with no answer against it, the level refills
// continuously. It reads the answers alone, not what this key sent, so
// that answers to calls sent at once may come in any order.
func (l *level) learnShape(remaining float64, t int64, now time.Time) {
	if l.shared || t < 0 || l.grossRate() <= 0 || l.bucket {
		return
	}
	const slack = 1.5 // t is whole seconds, rounded up
	at := now.Add(time.Duration(t) * time.Second)
	fall := (l.shapeRemaining - remaining) / l.grossRate()
	if l.shapeAt.IsZero() || fall < 0 {
		l.shapeAt, l.shapeRemaining, l.shapeSeen = at, remaining, now
		return
	}
	if fall < minShapeFall {
		return // too little fall since the anchor to tell: keep it
	}
	moved := at.Sub(l.shapeAt).Seconds()
	elapsed := now.Sub(l.shapeSeen).Seconds()
	counted := fall + elapsed // how far a bucket's moment would have moved
	// A bucket's r and t add up to its size, each answer alone; a sliding
	// log's t (a window after its newest take, or when its oldest leaves)
	// may move as a bucket's does between two answers, but its r and t do
	// not add up so.
	full := max(l.size(), l.capacity)
	sized := math.Abs(remaining+float64(t)*l.grossRate()-full) <= slack*l.grossRate()
	if fall >= elapsed && remaining < l.size() && sized && math.Abs(moved-counted) <= slack+counted/10 {
		if l.bucketEvidence++; l.bucketEvidence >= 2 {
			l.bucket = true
		}
	} else {
		l.bucketEvidence = 0
	}
	l.shapeAt, l.shapeRemaining, l.shapeSeen = at, remaining, now
}

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

// reserve is what a level others take from keeps back: the most the
// others took at once between two of its answers (maxDropGap) within the
// last window. They take in bursts (of what frees for them, a window after
// their last), and a call sent on the last r would meet the next. Answers
// that name another level, to calls that take from this one, say nothing
// of what the others took, and keep the reserve. Nothing is kept back once
// for reserveUnheard no call that took from the level has been answered
// (charged) and no answer has named it (RateLimit): the calls it held sent
// nothing meanwhile, so the others' next take has come or will not, and
// only a call sent can tell what is left. One goes, and the reserve holds
// again while it is in flight. A status answer does not count: asked while
// the key is idle, it would keep the reserve from ever lapsing.
func (l *level) reserve(now time.Time) float64 {
	if !l.frees(now) || now.After(l.reserveLapse()) {
		return 0
	}
	return l.drops.max(now.Add(-l.window))
}

// reserveLapse is the last moment the level's reserve holds: reserveUnheard
// after the last answer to a call that named it or took from it, or after
// the call that went once it lapsed or on a guess (sent), while that call
// is in flight.
func (l *level) reserveLapse() time.Time {
	return later(later(l.markAt, l.answeredAt), l.probeAt).Add(l.window / reserveUnheard)
}

// sent notes a call admitted at now that took from the level and reports
// whether it is the one the others wait for: the first once its reserve
// lapsed, or one that went on a guess (guesses, of what it left over the
// reserve).
func (l *level) sent(now time.Time) bool {
	if now.After(l.reserveLapse()) || l.guesses(l.reserve(now), now) {
		l.probeAt = now
		return true
	}
	return false
}

// guesses reports whether taking n more of a level others take from,
// whose last answer to a call named it, would go on a guess: on what the
// refill brought since the server's last word (unconfirmed), or, while it
// keeps a reserve, on a word older than maxDropGap, across which the
// reserve does not measure what the others take. One call's answer tells
// what they took; until then the others take only what a recent word left.
// Where answers name another level, their words say nothing of this one,
// and every call would go alone.
func (l *level) guesses(n float64, now time.Time) bool {
	if !l.frees(now) || !l.named(now) || l.markAt.Before(l.answeredAt) {
		return false
	}
	return l.tokens-l.unconfirmed < n-1e-9 || now.Sub(l.markAt) > l.maxDropGap() && l.reserve(now) > 0
}

// answered notes the end of a call admitted at start that took from the
// level (probe: the one the others wait for, sent): an answer that charged
// it, unless to a status request, keeps the reserve, and the call the
// others wait for is no longer in flight.
func (l *level) answered(start time.Time, probe, charged, status bool, now time.Time) {
	if charged && !status {
		l.answeredAt = now
	}
	if probe && start.Equal(l.probeAt) {
		l.probeAt = time.Time{}
	}
}

// maxDropGap is the longest time between two answers across which what a
// level others take from fell counts as taken at once (reserve): 2 s of a
// minute. Others that take in bursts take them a tick apart, less than
// that, and this key's answers come several a second while the level
// binds; over a longer gap the fall is many takes and refills. The others'
// ticks are not known: a part of the window keeps the measure the same on
// a server that counts faster, within bounds that keep it one tick.
func (l *level) maxDropGap() time.Duration {
	return min(max(l.window/dropGapWindow, minDropGap), maxDropGapBound)
}

// dropGapWindow divides a level's window into maxDropGap, within
// minDropGap and maxDropGapBound.
const (
	dropGapWindow   = 30
	minDropGap      = 100 * time.Millisecond
	maxDropGapBound = 5 * time.Second
)

// reserveUnheard divides a level's window into how long its reserve holds
// after the last answer naming it (7.5 s of a minute): under the 10 s
// without a call that make a stall.
const reserveUnheard = 8

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
	mark := remaining + l.admitted - pending - l.log.freed
	// A drop of the mark beyond what the server may not have counted at
	// either answer is what others took between them, at once when the
	// answers came within maxDropGap: the fall since an older answer is
	// many takes and refills, and kept back it would hold every call for
	// up to a window.
	if drop := l.lastMark - mark - max(l.lastPending, pending); !l.markAt.IsZero() && now.Sub(l.markAt) <= l.maxDropGap() && drop > 0 {
		l.drops.add(drop, now, now.Add(-l.window))
	}
	l.lastMark, l.lastPending, l.markAt = mark, pending, now
	if remaining >= l.size() || l.gainAt.IsZero() || now.Before(l.gainAt) {
		l.gainAt, l.gainMark, l.gainPending, l.flat = now, mark, pending, true
		return
	}
	// Each mark is low by what the server had counted of the calls in
	// flight at its answer.
	l.flat = l.flat && mark >= l.gainMark-pending-flatSlack && mark <= l.gainMark+l.gainPending+flatSlack
	span := now.Sub(l.gainAt)
	if span < max(minGainSpan, l.window/gainSpanWindow) {
		return
	}
	rate := min(max(0, (mark-l.gainMark)/span.Seconds()), l.grossRate())
	if now.After(l.netUntil) {
		l.lastGain = rate
	}
	// The lesser of the last two measures: each is off by what the
	// server had counted of the calls in flight at its ends.
	l.netRate, l.lastGain = min(rate, l.lastGain), rate
	l.netUntil = now.Add(max(l.window, ObservedRateTTL))
	l.gainAt, l.gainMark, l.gainPending = now, mark, pending
}

// learnSteps reads r and t of a RateLimit member naming the level for a
// level that frees in steps: a bucket refilling at the quota's rate is full
// again (size-r)/rate from now, and a t well past that is a sliding log's
// or a window's. Such a level is spread (spreads).
func (l *level) learnSteps(remaining float64, t int64) {
	if l.bucket || l.grossRate() <= 0 || remaining >= l.size() {
		return
	}
	if full := (l.size() - remaining) / l.grossRate(); float64(t) > 2*full+2 {
		l.steps = true
	}
}

// learnDepth reads r and t of a RateLimit member naming a level the
// contract documents as a bucket that holds more than its quota (the key
// level: 600 points, refilling 5 a second) for that bucket: a t further
// than the window, with r plus t's refill the documented capacity to t's
// rounding, twice at least minDepthApart apart. A sliding log or a fixed
// window is full again within a window of its last take; a sliding-window
// counter drained at once says what the bucket would (r=0, t two
// windows), but frees nothing more until its window ends, so that a
// second word later no longer adds up. A t past the window that does not
// add up (a lockout's) starts over.
func (l *level) learnDepth(remaining float64, t int64, now time.Time) {
	if l.bucket || !l.documentedBucket() || l.window <= 0 || float64(t-1) <= l.window.Seconds() {
		return
	}
	if !l.addsUp(remaining, t) {
		l.depthSeen = time.Time{}
		return
	}
	switch {
	case l.depthSeen.IsZero():
		l.depthSeen = now
	case now.Sub(l.depthSeen) >= minDepthApart:
		l.bucket = true
		l.seenMax = max(l.seenMax, l.capacity)
	}
}

// addsUp reports whether r and t of a word on a level the contract
// documents as a bucket bigger than its quota are that bucket's: r plus
// t's refill at the quota's rate is the documented capacity, to t's
// rounding (whole seconds, rounded up).
func (l *level) addsUp(remaining float64, t int64) bool {
	rate := l.grossRate()
	return l.documentedBucket() && rate > 0 &&
		l.capacity >= remaining+float64(t-1)*rate-1e-9 && l.capacity <= remaining+float64(t)*rate+1e-9
}

// minDepthApart is how far apart two words must be that show the
// documented bucket (learnDepth): t is whole seconds.
const minDepthApart = 2 * time.Second

// spreadWindow is the longest window of a level that the model spreads.
const spreadWindow = time.Minute

// spreadBurst is the part of a spread level's quota that its calls may
// take at once.
const spreadBurst = 0.1

// spreads reports whether the level's calls are spread over its window, at
// its quota's rate with a burst of spreadBurst of it: a level that frees in
// steps and was taken whole at once frees nothing for up to a window, and
// every caller waiting on it stalls; spread, it frees as it is taken. A
// level with a longer window (a quota per hour or day) is not spread: its
// calls would wait for minutes. A level that frees what this key took
// (frees) and that the server named lately is spread too: what frees for this key is what
// it took a window before, so a burst comes back as a burst a window later,
// with nothing between.
func (l *level) spreads(now time.Time) bool {
	if l.window <= 0 || l.window > spreadWindow {
		return false
	}
	return l.steps && !l.bucket || l.frees(now) && l.named(now)
}

// paceRate is the rate of the level's pace at a share of 1: its spread's
// when it spreads (spreads), else its own; it brings the pace's spread
// up to date.
func (l *level) paceRate(now time.Time) float64 {
	if l.pace.spread, l.pace.minBurst = l.spreads(now), l.spreadBurstOf(now); l.pace.spread {
		return l.spreadRate(now)
	}
	return l.rate(now)
}

// named reports whether the server named the level within its window.
func (l *level) named(now time.Time) bool {
	return !l.reported.at.IsZero() && now.Sub(l.reported.at) < l.window
}

// spreadBurstOf is what a spread level's calls may take at once:
// spreadBurst of a window's worth at lastingRate (its size when the key's
// log is empty), or for a level that frees what this key took, of what
// this key has of it (what it took within the window and what is left). A
// tenth of the size when little is left for long would leave nothing for
// most of the window; when much frees soon, the burst that took it goes
// again. A level the contract documents as a bucket keeps a tenth of its
// size: its steps may be a drained bucket's t read as a step's.
func (l *level) spreadBurstOf(now time.Time) float64 {
	if l.frees(now) {
		return spreadBurst * min(l.size(), l.log.sum+max(l.available(now), 0))
	}
	if secs := l.oldestFree(now); secs > 0 && !l.documentedBucket() {
		return spreadBurst * min(l.size(), l.lastingRate(secs, now)*l.window.Seconds())
	}
	return spreadBurst * l.size()
}

// lastingRate is the rate at which what is left of the level lasts the secs
// until the key's log frees its oldest take, with the level's refill until
// then when the model refills it between answers (refills: a learned
// policy, which others may take from too, at its quota's rate while its t
// lies within its window).
func (l *level) lastingRate(secs float64, now time.Time) float64 {
	r := max(l.available(now), 0) / secs
	if l.refills() {
		r += l.rate(now)
	}
	return r
}

// spreadRate is the rate a spread level's calls go at: its quota's, or
// slower while what is left would not last until the key's log frees its
// oldest take (a burst took much of the window): lastingRate.
func (l *level) spreadRate(now time.Time) float64 {
	if l.frees(now) {
		// What this key has of it, over the window (a hole in its takes
		// would come back a window later as a hole in what frees), and
		// the refill beyond that.
		return min(l.grossRate(), (l.log.sum+max(l.available(now), 0))/l.window.Seconds()+l.rate(now))
	}
	r := l.grossRate()
	if secs := l.oldestFree(now); secs > 0 {
		r = min(r, l.lastingRate(secs, now))
	}
	return r
}

// nextFree is how long until the key's log frees its oldest take, or the
// level's moment comes; forever when neither will.
func (l *level) nextFree(now time.Time) time.Duration {
	d := forever
	if now.Before(l.moment) {
		d = l.moment.Sub(now)
	}
	if secs := l.oldestFree(now); secs >= 0 {
		d = min(d, durationOf(secs))
	}
	return d
}

// oldestFree is the seconds until the oldest take of the key's log leaves
// the window; -1 when the log is empty.
func (l *level) oldestFree(now time.Time) float64 {
	l.log.prune(now.Add(-l.window))
	if l.log.head >= len(l.log.entries) {
		return -1
	}
	return l.log.entries[l.log.head].at.Add(l.window).Sub(now).Seconds()
}

// wait is how long until n is available: zero when it is, forever when
// only an answer or a release can help.
func (l *level) wait(n float64, now time.Time) time.Duration {
	d := time.Duration(0)
	if reserve, left := l.reserve(now), l.believed(now); left-reserve < n-1e-9 {
		d = l.boundsWait(n+reserve, now)
		if reserve > 0 {
			// n fits once every fall larger than what is left over n
			// has left the window, or once the reserve lapses (or the
			// call sent when it did is answered).
			until := l.drops.lastOver(left-n, now.Add(-l.window)).Add(l.window)
			if lapse := l.reserveLapse().Add(1); lapse.Before(until) {
				until = lapse
			}
			d = min(d, max(until.Sub(now), time.Millisecond))
		}
	} else if !l.probeAt.IsZero() && !now.After(l.reserveLapse()) && l.guesses(n+reserve, now) {
		// A guess waits for the answer of the call the others wait for,
		// or at most until the reserve lapses: then it goes in its stead.
		d = max(l.reserveLapse().Add(1).Sub(now), time.Millisecond)
	}
	if p := l.part(); p < 1 {
		if missing := n - l.partLeft(); missing > 1e-9 {
			d = max(d, l.refillWait(missing, p, now))
		}
	}
	return d
}

// refillWait is how long the level's refill takes to bring part of missing
// (of the whole level: part 1), cut short when an observed rate expires;
// forever for a level that does not refill.
func (l *level) refillWait(missing, part float64, now time.Time) time.Duration {
	d := forever
	if l.refills() {
		if r := l.rate(now) * part; r > 0 {
			d = durationOf(missing / r)
		}
		if next := l.rateChange(now); !next.IsZero() {
			d = min(d, next.Sub(now))
		}
	}
	return d
}

// logFrees is how long until the oldest takes of the key's log that add up
// to missing have left the window; forever when the log holds less.
func (l *level) logFrees(missing float64, now time.Time) time.Duration {
	for i := l.log.head; i < len(l.log.entries); i++ {
		e := l.log.entries[i]
		if missing -= e.amount; missing <= 1e-9 {
			return e.at.Add(l.window).Sub(now)
		}
	}
	return forever
}

// boundsWait is how long until the larger of the lower bounds holds n.
func (l *level) boundsWait(n float64, now time.Time) time.Duration {
	d := l.refillWait(n-l.tokens, 1, now)
	if now.Before(l.moment) && l.tokens+l.momentUnit(now) >= n-1e-9 {
		d = min(d, l.moment.Sub(now))
	}
	if !l.shared && l.window > 0 {
		// The takes that must leave the window first, oldest first.
		if missing := n - l.logAvailable(now); missing > 1e-9 {
			d = min(d, l.logFrees(missing, now))
		}
	}
	if l.frees(now) {
		d = min(d, l.logFrees(n-l.tokens, now)) // what this key took frees for it (refill)
	}
	return d
}

// backfillSlack is how much calls that pass the first waiter of a level
// may delay it in all, over the moment the first could go when a call first
// passed it: a second, or a quarter of the first's wait then. A sliding log
// or a window frees whole takes at once, and a cheap call should not idle
// for most of a minute to spare a costly one a few seconds; the bound keeps
// the costly one from being starved.
const backfillSlack = time.Second

// backfills reports whether a call may take amount of the level now, ahead
// of the first call that waits for it, because that delays the first by at
// most backfillSlack over the moment it could go when the first call passed
// it. A level that refills continuously never lets a call pass: every point
// taken delays the first; one that others take from does while its rate is
// 0 (noRefillUntil, or a measured net refill of none), as it frees in steps then.
func (l *level) backfills(first *waiter, amount float64, now time.Time) bool {
	if first == nil || first.c == nil || l.refills() && l.rate(now) > 0 {
		return false
	}
	need := 0.0
	for _, t := range first.c.takes {
		if t.l == l {
			need = l.need(t.amount)
		}
	}
	if need == 0 {
		return false
	}
	if first.promisedBy != l || now.After(first.promised.Add(first.slack)) {
		// A first promise, or one that passed with the first still held:
		// what holds it now is not the calls that passed it.
		d := l.wait(need, now)
		if d == forever {
			return false
		}
		first.promisedBy, first.promised, first.slack = l, now.Add(d), max(backfillSlack, d/4)
	}
	d := l.wait(need+amount, now)
	return d != forever && !now.Add(d).After(first.promised.Add(first.slack))
}

// fullIn is how long until the level is full again; 0 when it never is.
func (l *level) fullIn(now time.Time) time.Duration {
	d := l.wait(l.size(), now)
	if d == forever {
		return 0
	}
	return d
}

// tieAfter is the net count of answers to a kind of call that showed a
// learned policy going down which ties the policy to such calls; as many
// more that did not untie it. A refusal naming the policy ties it at once.
const tieAfter = 2

// maxKinds bounds the kinds of call a learned policy keeps evidence of.
const maxKinds = 256

// witness counts what an answer to a call of kind says of l, a learned
// policy the answer named with remaining r: that such calls take from it
// when r is below the last r the server said of it, that they do not
// otherwise (being named is not enough: a server may name the narrowest of
// all the key's levels in every answer). It reports whether the tie of kind
// changed.
func (l *level) witness(kind string, r float64) bool {
	last := l.reported.remaining
	if l.reported.at.IsZero() {
		if l.quota <= 0 {
			return false
		}
		last = l.quota * l.share // a level the server has not named yet is full
	}
	e, ok := l.evidence[kind]
	if !ok && len(l.evidence) >= maxKinds {
		return false
	}
	if r < last {
		e = min(e+1, 2*tieAfter)
	} else {
		e = max(e-1, -2*tieAfter)
	}
	if l.evidence == nil {
		l.evidence = map[string]int{}
	}
	l.evidence[kind] = e
	switch {
	case e >= tieAfter && !l.ops[kind]:
		l.tie(kind)
		return true
	case e <= -tieAfter && l.ops[kind]:
		delete(l.ops, kind)
		return true
	}
	return false
}

// tie binds the calls of kind to l.
func (l *level) tie(kind string) {
	if l.ops == nil {
		l.ops = map[string]bool{}
	}
	l.ops[kind] = true
}

// applies reports whether a call of kind (see Call.kind) to target takes
// from the level, a learned one (takesLocked asks no other).
func (l *level) applies(kind, target string) bool {
	if l.partition != "" && l.target != target {
		return false
	}
	return l.ops[kind]
}

// amountFor is what a call of cost points takes from a learned level, by its
// unit.
func (l *level) amountFor(cost float64) float64 {
	switch l.unit {
	case "points":
		return cost
	case "requests", "":
		return 1
	}
	return 0
}

// drops are the falls of a level that others take from, each larger than
// every later one (so the first still in the window is the most since):
// a sliding maximum.
type drops []dropEntry

type dropEntry struct {
	at     time.Time
	amount float64
}

// maxDrops bounds the falls kept: past it the second oldest goes, and the
// oldest, the largest, stays.
const maxDrops = 16

// add records a fall of amount at at, which ends every earlier one no
// larger and those at or before cut.
func (d *drops) add(amount float64, at, cut time.Time) {
	e := *d
	for len(e) > 0 && !e[0].at.After(cut) {
		e = e[1:]
	}
	for len(e) > 0 && e[len(e)-1].amount <= amount {
		e = e[:len(e)-1]
	}
	if len(e) == maxDrops {
		e = append(e[:1], e[2:]...)
	}
	*d = append(e, dropEntry{at, amount})
}

// max is the largest fall after cut.
func (d drops) max(cut time.Time) float64 {
	for _, e := range d {
		if e.at.After(cut) {
			return e.amount
		}
	}
	return 0
}

// lastOver is when the last fall after cut larger than limit came: once it
// has left the window, the largest is at most limit. Zero when none did.
func (d drops) lastOver(limit float64, cut time.Time) time.Time {
	var at time.Time
	for _, e := range d {
		if e.at.After(cut) && e.amount > limit {
			at = e.at
		}
	}
	return at
}

// takeLog is a level's own takes within its window, oldest first, with
// their sum.
type takeLog struct {
	entries []logEntry
	head    int
	sum     float64
	freed   float64 // what has left the window so far
}

type logEntry struct {
	at     time.Time // when the server had surely counted it: its answer
	sent   time.Time // when it may have been counted first: its admission
	amount float64
}

// add logs amount taken by a request admitted at sent and answered at at.
func (g *takeLog) add(at, sent time.Time, amount float64) {
	if amount <= 0 {
		return
	}
	g.entries = append(g.entries, logEntry{at, sent, amount})
	g.sum += amount
}

// prune drops the takes at or before cut.
func (g *takeLog) prune(cut time.Time) {
	g.free(func(e logEntry) bool { return !e.at.After(cut) })
}

// free drops, as freed, the oldest takes while gone says they are.
func (g *takeLog) free(gone func(logEntry) bool) {
	for g.head < len(g.entries) && gone(g.entries[g.head]) {
		g.sum -= g.entries[g.head].amount
		g.freed += g.entries[g.head].amount
		g.head++
	}
	if g.head == len(g.entries) {
		g.entries, g.head, g.sum = g.entries[:0], 0, 0
	} else if g.head > 64 && g.head*2 > len(g.entries) {
		n := copy(g.entries, g.entries[g.head:])
		g.entries, g.head = g.entries[:n], 0
	}
}

// refund takes amount back off the newest takes (a list that returned
// fewer records than it reserved).
func (g *takeLog) refund(amount float64) {
	for i := len(g.entries) - 1; i >= g.head && amount > 0; i-- {
		d := min(amount, g.entries[i].amount)
		g.entries[i].amount -= d
		g.sum -= d
		amount -= d
	}
}

// documentedLevels are the levels of the API before any header says
// otherwise.
func documentedLevels() map[string]*level {
	minute, hour := time.Minute, time.Hour
	type doc struct {
		name     string
		unit     string
		quota    float64
		window   time.Duration
		capacity float64
		share    float64
		shared   bool
	}
	docs := []doc{
		{Key, "points", 300, minute, 600, 1, false},
		{Write, "requests", 60, minute, 0, 1, false},
		{Principal, "points", 1200, minute, 0, 1, true},
		{Org, "points", 3000, minute, 0, 0.5, true},
		{Delete, "requests", 10, minute, 0, 1, false},
		{DeleteDay, "requests", 300, 24 * hour, 0, 1, false},
		{Egress, "records", 10000, hour, 0, 1, false},
	}
	m := make(map[string]*level, len(docs))
	for _, d := range docs {
		l := newLevel(d.name)
		l.unit, l.quota, l.window, l.capacity, l.share = d.unit, d.quota, d.window, d.capacity, d.share
		l.known, l.docQuota, l.shared = true, d.quota, d.shared
		l.tokens = l.quota * l.share
		if d.capacity > 0 {
			l.prior, l.bucket, l.tokens = true, true, d.capacity
		}
		m[d.name] = l
	}
	return m
}
