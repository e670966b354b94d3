package budget

import (
	"math"
	"time"
)

// shapeEvidence is what the answers showed so far of a level's shape: an
// anchor answer to measure the next against (learnShape) and when the
// documented bucket's depth was first seen (learnDepth).
type shapeEvidence struct {
	anchorAt        time.Time // the full moment (now + t) the anchor answer named
	anchorRemaining float64   // r of the anchor answer
	anchorSeen      time.Time // when the anchor answer came
	bucketAnswers   int       // answers whose full moment moved as a bucket's and whose r and t added up to its size, since the last that did not
	depthSeen       time.Time // when the first word showed the documented bucket since the last word past the window that did not; zero when none has
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
	fall := (l.shape.anchorRemaining - remaining) / l.grossRate()
	if l.shape.anchorAt.IsZero() || fall < 0 {
		l.shape.anchorAt, l.shape.anchorRemaining, l.shape.anchorSeen = at, remaining, now
		return
	}
	if fall < minShapeFall {
		return // too little fall since the anchor to tell: keep it
	}
	moved := at.Sub(l.shape.anchorAt).Seconds()
	elapsed := now.Sub(l.shape.anchorSeen).Seconds()
	counted := fall + elapsed // how far a bucket's moment would have moved
	// A bucket's r and t add up to its size, each answer alone; a sliding
	// log's t (a window after its newest take, or when its oldest leaves)
	// may move as a bucket's does between two answers, but its r and t do
	// not add up so.
	full := max(l.size(), l.capacity)
	sized := math.Abs(remaining+float64(t)*l.grossRate()-full) <= slack*l.grossRate()
	if fall >= elapsed && remaining < l.size() && sized && math.Abs(moved-counted) <= slack+counted/10 {
		if l.shape.bucketAnswers++; l.shape.bucketAnswers >= 2 {
			l.bucket = true
		}
	} else {
		l.shape.bucketAnswers = 0
	}
	l.shape.anchorAt, l.shape.anchorRemaining, l.shape.anchorSeen = at, remaining, now
}

// learnSteps reads r and t of a RateLimit member naming the level for a
// level that frees in steps: a bucket refilling at the quota's rate is full
// again (size-r)/rate from now, and a t well past that is a sliding log's
// or a window's. Such a level is spread (spreads).
func (l *level) learnSteps(remaining float64, t int64) {
	if !l.bucket && l.grossRate() > 0 && remaining < l.size() && float64(t) > 2*(l.size()-remaining)/l.grossRate()+2 {
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
		l.shape.depthSeen = time.Time{}
		return
	}
	switch {
	case l.shape.depthSeen.IsZero():
		l.shape.depthSeen = now
	case now.Sub(l.shape.depthSeen) >= minDepthApart:
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
