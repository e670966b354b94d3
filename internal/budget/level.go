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

// maxSeconds bounds the seconds of a header (w, t): the model plans no
// further ahead than maxHold, the longest wait it takes from one answer. A
// longer window or reset is held that long, and the call after it asks
// again.
const maxSeconds = int64(maxHold / time.Second)

const forever = time.Duration(math.MaxInt64)

// durationOf is seconds as a Duration, rounded up; forever when too long
// or not a number.
func durationOf(seconds float64) time.Duration {
	if !(seconds < forever.Seconds()) {
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
	name     string        // the policy's name: one of the API's levels or a learned one
	unit     string        // points, requests, records
	quota    float64       // q: what the level allows per window
	window   time.Duration // w
	share    float64       // the part of the quota this key may use
	capacity float64       // the bucket size the contract documents (the key's) or SetQuota sets; 0: none
	docQuota float64       // the documented quota; 0: a learned level
	known    bool          // a level of the API, whose scope the contract gives

	// prior: the server has said nothing the contract's model would not
	// (the key level a bucket holding its capacity, 600), and the model is
	// the contract's.
	prior bool
	// bucket: the level refills continuously. The contract's model says so
	// (the key level while prior), a word showed more left than the quota
	// (r > q), its moments moved as a bucket's (learnShape), or it showed
	// the documented bucket's depth (learnDepth).
	bucket bool
	steps  bool          // a t further than a bucket would need to be full again: it frees in steps, a sliding log's or a window's (learnSteps)
	resets bool          // a learned policy refused a call that its refill let go before its word's moment: it refills only from each moment on (learnEarly, defers)
	shape  shapeEvidence // what r and t showed so far of the level's shape (level_shape.go)
	shared bool          // other keys take from it too
	pooled bool          // a shared store keeps it for every process of the key; it refills as the store has it (storeLevel) unless it frees in steps

	tokens float64   // the server's word, brought forward; negative after a refusal
	at     time.Time // when tokens was brought forward to
	// unconfirmed is what refill added to tokens since the last word on the
	// level, the server's or the shared store's (heldLocked), or since an
	// outage part began (partLocked): of a pooled level, the other
	// processes may have taken it.
	unconfirmed   float64
	seenAt        time.Time  // when the server last said what is left (status.go)
	seenMax       float64    // the most the server showed the level to hold
	reported      reported   // the server's last word on the level, as it said it
	moment        moment     // when the server's last word said the level frees more (level_refill.go)
	observedRate  float64    // the refill a word's r and t showed of a level others share (rate)
	observedUntil time.Time  // when observedRate lapses (ObservedRateTTL)
	others        otherTakes // what the answers showed of the takes of other keys, of a level they take from (level_reserve.go)
	parts         parts      // this key's part of a level it shares with keys of this process or, while the store is down, with other processes

	log      takeLog   // this key's takes within the last window
	inflight float64   // taken by attempts still in flight
	charged  float64   // taken by attempts that ended and kept it (not given back, as a refusal gives its take back), so far
	usedAt   time.Time // when a call last took from it or the server last named it (LevelIdleTTL)

	holdUntil  time.Time     // a refusal's wait: no call that takes from the level goes before
	promised   float64       // the refused call's need, which the level holds once holdUntil and promisedAt pass, until a call takes from it or a word after it comes
	promisedAt time.Time     // when the level holds promised: the refusal's wait's end, or when this key's own takes free it (refusedLocked)
	pace       pace          // AIMD of the refusals that named the level
	statusAt   time.Time     // when the last status request about the level left
	statusGap  time.Duration // no status about it before statusAt+statusGap (statusRefusedLocked)

	scope     scope  // of a learned policy, the calls it binds (level_scope.go)
	partition string // of a partitioned policy, its pk (base64)
	target    string // and the request target of its partition

	gate      gate // the calls that wait for the level
	storeGate gate // the calls the shared store holds at this level
}

// parts is what a key counts of its part of a level it shares: with the
// other keys of this process (split), and while the shared store is down,
// with the other processes (outage). Keys or processes that read the same
// r thus take it once between them (partLeft).
type parts struct {
	split  float64 // of a level keys of this process share, this key's part (identity.go); 1 alone
	outage float64 // of a pooled level while the shared store is down, this process's part (shareLocked); 1 otherwise
	// tokens is what is left of this key's part (part): its part of the
	// server's word, refilled by its part of the refill up to its part of
	// the size, less what it took since.
	tokens float64
	of     float64 // the part tokens counts; a new part starts it anew from the level's tokens
}

// reported is what the server last said of a level: r and t of a RateLimit
// member naming it, or remaining and resetSeconds of a status answer.
type reported struct {
	remaining float64       // r
	reset     time.Duration // t
	at        time.Time     // when it said so; zero: the server has not named the level
	// others is the State's open less its sent when the call whose answer
	// brought the word was admitted (othersFrom; when the level was made,
	// for one not named yet): with sent at a later answer, the calls other
	// than that answer's that the server may have counted since the word
	// (othersLocked).
	others sentCount
}

// sentCount counts budgeted attempts and their cost.
type sentCount struct {
	calls int
	cost  float64
}

func (a sentCount) plus(b sentCount) sentCount  { return sentCount{a.calls + b.calls, a.cost + b.cost} }
func (a sentCount) minus(b sentCount) sentCount { return sentCount{a.calls - b.calls, a.cost - b.cost} }

// newLevel returns a level named name, at a share of 1, with the gate
// that guards it.
func newLevel(name string) *level {
	l := &level{name: name, share: 1, parts: parts{split: 1, outage: 1}, pace: newPace()}
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

// sized reports whether the server said anything of the level's size: a
// quota (RateLimit-Policy) or what is left (RateLimit, a status answer). A
// level only a refusal named is not: it holds the calls it binds for the
// refusal's wait and by its pace (rule 4), as what it counts of them says
// nothing of when the server frees it.
func (l *level) sized() bool { return l.quota > 0 || !l.reported.at.IsZero() }

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

// part is this process's part of the server's word on the level: this
// key's part among the keys of the process (parts.split), and while the
// shared store is down, of a level that refills, the process's part
// (parts.outage).
func (l *level) part() float64 {
	if l.refills() {
		return l.parts.split * l.parts.outage
	}
	return l.parts.split
}

// syncPart starts the key's part of the level anew from what the model
// holds when the part changed: what the key took before, the shared store
// or its own whole part admitted.
func (l *level) syncPart() {
	if l.part() != l.parts.of {
		l.rebasePart()
	}
}

// rebasePart starts the key's part of the level from what the model holds.
func (l *level) rebasePart() {
	l.parts.of = l.part()
	l.parts.tokens = l.parts.of * l.tokens
}

// cap lowers what the level holds to at most v, and the key's part of
// it to its part of that.
func (l *level) cap(v float64) {
	l.syncPart()
	l.tokens = min(l.tokens, v)
	l.parts.tokens = min(l.parts.tokens, l.parts.of*l.tokens)
}

// take takes amount of the level for a call admitted at now; give gives
// back amount of it that the call did not use.
func (l *level) take(amount float64, now time.Time) {
	if l.at.IsZero() {
		l.at = now // the refill counts from the first take
	}
	l.syncPart()
	l.tokens -= amount
	l.parts.tokens -= amount
	l.moment.left -= amount
	l.promised = 0
}

func (l *level) give(amount float64) {
	l.tokens += amount
	l.parts.tokens += amount
	l.moment.left += amount
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
// refill, less what it took since the server said it (parts.tokens). Keys,
// or processes cut off from their store, that read the same r thus take it
// once between them. (A part of the quota per window would not do: the
// server's word already counts what the others took, and keys of other
// processes take from it too.)
func (l *level) partLeft() float64 {
	l.syncPart()
	return l.parts.tokens
}

// addDocumentedLevels gives s the levels of the API, as they are before
// any header says otherwise.
func (s *State) addDocumentedLevels() {
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
	s.levels = make(map[string]*level, len(docs))
	for _, d := range docs {
		l := newLevel(d.name)
		l.unit, l.quota, l.window, l.capacity, l.share = d.unit, d.quota, d.window, d.capacity, d.share
		l.known, l.docQuota, l.shared = true, d.quota, d.shared
		l.tokens = l.quota * l.share
		if d.capacity > 0 {
			l.prior, l.bucket, l.tokens = true, true, d.capacity
		}
		s.levels[d.name] = l
		s.order = append(s.order, l)
	}
}
