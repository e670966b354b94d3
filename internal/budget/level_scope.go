package budget

import (
	"math"
	"time"
)

// scope is what a learned policy binds: the kinds of call the server tied
// it to (RateLimit naming it for them, or a refusal), and what showed
// whether other kinds take from it. A learned policy tied to nothing is
// informative only.
type scope struct {
	ops      map[string]bool // the kinds of call (see Call.kind) tied to it
	evidence map[string]int  // per kind of call, answers that showed it going down less those that did not (witness)
	runs     map[string]*run // per kind of call not tied to it, what it sent within a window (runOf)
}

// tieAfter is the net count of answers to a kind of call that showed a
// learned policy going down which ties the policy to such calls; as many
// more that did not untie it. A refusal naming the policy ties it at once.
const tieAfter = 2

// maxKinds bounds the kinds of call a learned policy keeps evidence of.
const maxKinds = 256

// witness counts what an answer to a call of kind, which would take
// amount, says of l, a learned policy the answer named with remaining r,
// when others is the most that this key's other calls may have taken from
// it since the server's last word on it: that such calls take from it when
// r fell by more than others; that they do not when r stayed where it was
// and the quota's rate cannot have refilled what the call needs of the
// level since, up to full, or when r is above the level's size less that
// need; and nothing otherwise (being named is not enough: a server may
// name the narrowest of all the key's levels in every answer; a fall the
// other calls in flight may have caused says nothing of this one, nor does
// an r that the refill may have kept up: a sliding log spread at its rate
// frees a take as each call takes one, a window comes back whole at its
// reset, and an older word may be answered last). It reports whether the
// tie of kind changed.
func (l *level) witness(kind string, amount, r, others float64, now time.Time) bool {
	last := l.reported.remaining
	if l.reported.at.IsZero() {
		if l.quota <= 0 {
			return false
		}
		last = l.quota * l.share // a level the server has not named yet is full
	}
	// What the level may have refilled since the word, at the quota's
	// rate, up to full.
	freed := min(l.grossRate()*max(now.Sub(l.reported.at), 0).Seconds(), max(l.size()-last, 0))
	e, ok := l.scope.evidence[kind]
	if !ok && len(l.scope.evidence) >= maxKinds {
		return false
	}
	switch fall := last - r; {
	case fall > others+1e-9:
		e = min(e+1, 2*tieAfter)
	case math.Abs(fall) < 1e-9 && freed < l.need(amount)-1e-9 || r > l.size()-l.need(amount)+1e-9:
		e = max(e-1, -2*tieAfter)
	default:
		return false
	}
	if l.scope.evidence == nil {
		l.scope.evidence = map[string]int{}
	}
	l.scope.evidence[kind] = e
	switch {
	case e >= tieAfter:
		return l.tie(kind)
	case e <= -tieAfter && l.scope.ops[kind]:
		delete(l.scope.ops, kind)
		return true
	}
	return false
}

// othersLocked is the most that budgeted calls other than c may have
// taken from l since the server's last word on it (or since l was made),
// in l's unit: of the calls in flight then and those sent since, their
// cost when l counts points, their number when it counts requests, and
// for another unit without bound while there is one.
func (s *State) othersLocked(l *level, c *Call) float64 {
	o := l.reported.others.plus(s.sent)
	if c.Budgeted {
		o = o.minus(sentCount{1, c.Cost})
	}
	switch l.unit {
	case "points":
		return max(o.cost, 0)
	case "requests", "":
		return float64(max(o.calls, 0))
	}
	if o.calls > 0 {
		return math.Inf(1) // what they take of another unit is not known
	}
	return 0
}

// othersFrom is what reported.others is for a word that c's answer brought:
// as of c's admission (open then, less c, less sent until then), since the
// server may have counted c at any moment up to its answer, and the calls
// answered before it after that; for no call, or one the budget did not
// count, as of now.
func (s *State) othersFrom(c *Call) sentCount {
	if c != nil && c.Budgeted {
		return c.others
	}
	return s.open.minus(s.sent)
}

// tie ties l to kind; it reports whether l was not tied to it yet.
func (l *level) tie(kind string) bool {
	if l.scope.ops == nil {
		l.scope.ops = map[string]bool{}
	}
	tied := l.scope.ops[kind]
	l.scope.ops[kind] = true
	return !tied
}

// applies reports whether a call of kind (see Call.kind) to target takes
// from the level, a learned one (takesLocked asks no other).
func (l *level) applies(kind, target string) bool {
	return (l.partition == "" || l.target == target) && l.scope.ops[kind]
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

// run is what one kind of call sent of a learned policy not tied to it,
// within one of the policy's windows from start (rule 3): a kind that sent
// the policy's quota in one window goes alone for the rest of it, until an
// answer says whether the policy binds the kind.
type run struct {
	start    time.Time // when its window began: at the first call of the kind after the last one ended
	sent     float64   // in the policy's unit, since start
	inflight int       // calls of the kind in flight that counted here
	sentAt   time.Time // when the last of them was sent
	cleared  bool      // a call sent past the quota was accepted: the policy does not bind the kind
	gate     gate      // the calls of the kind it holds, in arrival order
}

// runOf returns the run of kind on l, a learned policy with a quota and a
// window that is not tied to kind; nil when l is not such a policy, when
// its partition is another target's or when it keeps maxKinds runs.
func (l *level) runOf(kind, target string) *run {
	if l.known || l.quota <= 0 || l.window <= 0 || l.partition != "" && l.target != target || l.scope.ops[kind] {
		return nil
	}
	r := l.scope.runs[kind]
	if r == nil && len(l.scope.runs) < maxKinds {
		if l.scope.runs == nil {
			l.scope.runs = map[string]*run{}
		}
		r = &run{}
		l.scope.runs[kind] = r
	}
	return r
}

// maxAlone bounds how long a run holds calls for the answer to the last
// call of its kind: what a round trip takes, so that a slow call does not
// hold its kind back.
const maxAlone = time.Second

// wait is how long r holds a call at now: while its kind sent the quota q
// in its window and a call of the kind is in flight, whose answer is still
// to say whether the policy binds the kind, to the end of the window or
// maxAlone after the last call went, whichever comes first; 0 when it
// does not hold.
func (r *run) wait(q float64, window time.Duration, now time.Time) time.Duration {
	if r.cleared || r.inflight == 0 || r.sent < q {
		return 0
	}
	return max(min(r.start.Add(window).Sub(now), r.sentAt.Add(maxAlone).Sub(now)), 0)
}

// send counts a call of amount sent at now.
func (r *run) send(amount float64, window time.Duration, now time.Time) {
	if now.Sub(r.start) >= window {
		r.start, r.sent = now, 0
	}
	r.sent += amount
	r.inflight++
	r.sentAt = now
}
