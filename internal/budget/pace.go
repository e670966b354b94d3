package budget

import (
	"math"
	"time"
)

// AIMD: a RATE_LIMITED halves the share of the rate that the calls it
// speaks of may take, an OVERLOADED cuts it to overloadCut; each quiet
// interval without a refusal raises it by paceStep. The quiet interval is
// the wait the last refusal asked for, between minQuiet and quietInterval:
// a server that asks for waits of 300 ms recovers in steps of 300 ms, one
// that asks for 9 s in steps of 2 s. A refusal of an attempt admitted
// before the last cut does not cut again: it was sent before the cut could
// slow it, so one burst of refusals counts once.
const (
	rateLimitCut  = 0.5
	overloadCut   = 0.8
	quietInterval = 2 * time.Second
	minQuiet      = 100 * time.Millisecond
	paceStep      = 0.1
	minPace       = 0.05
	paceBurst     = 2 * time.Second
)

// A refusal that is not the API's own (a bare 429 of a limiter in front, with no hint of its limit or its wait) cuts to hintlessCut; the
// pace then steps up by hintlessStep a second up to near the share it was
// refused at, and by hintlessProbe above: it spends most of its time just
// below such a limiter and probes it about once a minute, not every few
// seconds. It keeps pacing calls (the key's capacity is no burst such a
// limiter allows) until hintlessFor after the last such refusal, not
// counting the time in which it held no call (skipIdle).
const (
	hintlessCut   = 0.8
	hintlessStep  = 0.05
	hintlessProbe = 0.002
	hintlessQuiet = time.Second
	hintlessBelow = 0.9 // of the limiter's rate, where a hint-less refusal cuts the share to at most
	hintlessFor   = 10 * time.Minute
	// hintlessTop is the share the pace may climb to while such a
	// limiter may be in front: its rate counts requests, where the
	// pace's rate at a share of 1 is the key's rate for calls of the
	// mean cost, and cheaper calls may go faster than that.
	hintlessTop = 4
)

// pace is an adaptive share of a rate: the key's for what speaks of the
// key as a whole, a level's for a refusal that names it. Uncut (share 1)
// it holds no call, unless it spreads a level's calls over its window.
// Cut, the calls it paces take their amount from a
// bucket that refills at share times the rate and holds paceBurst of it,
// at least one call: a call costlier than that runs it into debt, so no
// call is starved.
type pace struct {
	share       float64       // of the rate the calls may take: minPace to top
	tokens      float64       // what the calls may take at once, while cut
	at          time.Time     // when tokens were brought up to date
	cutAt       time.Time     // the last cut
	changeAt    time.Time     // the last cut or step up
	quiet       time.Duration // the interval of a step up
	step        float64       // what a step up adds to share
	refusedAt   float64       // the share a limiter that gave no hint last refused
	requestRate float64       // while it counts requests, the requests a second its share is of: the rate given at the first such refusal
	limit       float64       // the requests a second that limiter let through, as read at its last refusal while the pace counted requests; 0 before one
	hintless    time.Time     // the last cut by a limiter that gave no hint, moved on by the time the pace held no call since, from a burst's time after it last did: it holds calls, uncut too, until hintlessFor after it
	cuts        int           // cuts so far
	boundAt     time.Time     // the last time it held a call, or a call came before it was full again
	idleTo      time.Time     // skipIdle skipped the time until then
	ceiling     float64       // a share it never exceeds (a shared store's fallback share); 0: none
	spread      bool          // it holds calls uncut too: its level frees in steps (level.spreads)
	minBurst    float64       // what it lets through at once at least
}

// paces reports whether the pace holds calls at all: when cut, under a
// ceiling, when it spreads a level, or while a limiter that gave no hint
// may be in front.
func (p *pace) paces(now time.Time) bool {
	return p.now() < 1 || p.spread || p.counting(now)
}

// spreadOnly reports whether the pace holds calls only to spread its
// level: uncut, under no ceiling, and with no limiter that gave no hint in
// front.
func (p *pace) spreadOnly(now time.Time) bool {
	return p.spread && p.now() >= 1 && !p.counting(now)
}

// now is the share in force: share, under the ceiling.
func (p *pace) now() float64 {
	if p.ceiling > 0 {
		return min(p.share, p.ceiling)
	}
	return p.share
}

// newPace returns a pace at its full share.
func newPace() pace { return pace{share: 1, quiet: quietInterval, step: paceStep} }

// refusalKind is what a refusal that cuts a pace said.
type refusalKind int

const (
	rateLimited refusalKind = iota // RATE_LIMITED, or a 429 of the API without a code it knows
	overloaded                     // OVERLOADED, or a 503 of the API
	hintless                       // a 429 that is not the API's own
)

// cut is what a refusal of the kind multiplies the share by.
func (k refusalKind) cut() float64 {
	return [...]float64{rateLimited: rateLimitCut, overloaded: overloadCut, hintless: hintlessCut}[k]
}

// cut cuts the share after a refusal of kind of an attempt admitted at
// sent that asked for wait (0: none); it reports whether it did, which it
// does not when the attempt was sent before the last cut. For a hint-less
// refusal, rate is in requests a second, kept as requestRate unless the
// pace counts requests already, and passed is the rate of the calls that
// the limiter let through lately, in that unit: the limiter's own rate, as
// near as the client can tell (after a quiet spell, its last reading when
// that is more), which the share is cut to just below.
func (p *pace) cut(kind refusalKind, sent time.Time, wait time.Duration, rate, passed float64, now time.Time) bool {
	if !p.cutAt.IsZero() && !sent.After(p.cutAt) {
		return false
	}
	p.adapt(now)
	counting := p.counting(now)
	if kind == hintless {
		if !counting {
			p.requestRate = rate
		}
		rate = p.requestRate
	}
	if !p.paces(now) {
		p.tokens, p.at = p.burst(rate), now
	}
	factor := kind.cut()
	if kind != hintless || !counting {
		// Over 1 the share is of a rate of requests, which a cut of
		// another kind, or a first hint-less one, does not count.
		p.share = min(p.share, 1)
	}
	p.share = max(minPace, p.share*factor)
	p.quiet, p.step = quietInterval, paceStep
	switch {
	case kind == hintless:
		// The limiter is full now: it drains for a burst's time before
		// anything goes. While the pace counts requests, what passed
		// since an earlier refusal, when the limiter was as empty as
		// now, is its rate (meter.from), which the share it refused at
		// bounds from above; the reading is kept (limit). Before, a
		// burst was refused at no share of their rate: after a quiet
		// spell the limiter's last reading stands, as most likely it is
		// the same one, unless more passed; for a first one, what
		// passed, above the cut share.
		p.refusedAt = p.share
		read := rate > 0
		switch {
		case !read:
		case counting && passed > 0:
			p.refusedAt = max(minPace, min(p.share/factor, passed/rate))
			p.limit = p.refusedAt * rate
		case !counting && p.limit > 0:
			p.refusedAt = min(hintlessTop, max(p.limit, passed)/rate)
		case !counting && passed > 0:
			p.refusedAt = max(p.share, min(hintlessTop, passed/rate))
		default:
			read = false
		}
		if read {
			p.share = max(minPace, min(p.share, hintlessBelow*p.refusedAt))
		}
		p.quiet, p.step, p.hintless = hintlessQuiet, hintlessStep, now
		p.tokens, p.at = min(p.tokens, 0)-p.burst(rate), now
	case wait > 0:
		p.quiet = min(max(wait, minQuiet), quietInterval)
	}
	p.cutAt, p.changeAt = now, now
	p.cuts++
	return true
}

// adapt raises the share by one step per quiet interval since the last
// change; it reports whether it rose. Once a limiter that gave no hint is
// forgotten (hintlessFor), the share, of its rate of requests until then,
// steps up as after any cut, in paceStep each quietInterval.
func (p *pace) adapt(now time.Time) bool {
	p.skipIdle(now)
	if p.step == hintlessStep && !p.counting(now) {
		p.share, p.quiet, p.step = min(p.share, 1), quietInterval, paceStep
	}
	if p.share >= p.top(now) || p.changeAt.IsZero() {
		return false
	}
	steps := int(now.Sub(p.changeAt) / p.quiet)
	if steps <= 0 {
		return false
	}
	p.changeAt = p.changeAt.Add(time.Duration(steps) * p.quiet)
	for ; steps > 0 && p.share < p.top(now); steps-- {
		step := p.step
		if p.step == hintlessStep {
			// Steps in proportion to where the limiter is: fast up to
			// just below it, slowly above.
			step = hintlessStep * p.refusedAt
			if p.share >= hintlessBelow*p.refusedAt {
				step = hintlessProbe * p.refusedAt
			}
		}
		p.share = min(p.top(now), p.share+step)
	}
	return true
}

// skipIdle moves the last change and the last hint-less refusal past the
// time the pace has not bound since a burst's time after it last did,
// while a limiter that gave no hint may be in front. Calls that the share
// and its cap on calls in flight do not hold show nothing of such a
// limiter: that time neither steps the share up (also from a cut of
// another kind meanwhile) nor counts toward forgetting the limiter
// (hintlessFor), as a TCP sender that is application-limited does not
// grow its window (RFC 7661).
func (p *pace) skipIdle(now time.Time) {
	from := later(later(p.changeAt, p.boundAt.Add(paceBurst)), p.idleTo)
	if p.hintless.IsZero() || !from.Before(p.hintless.Add(hintlessFor)) {
		return
	}
	if idle := now.Sub(from); idle > 0 {
		p.changeAt = p.changeAt.Add(idle)
		p.hintless = p.hintless.Add(idle)
		p.idleTo = now
	}
}

// top is the share the pace climbs to: 1, or hintlessTop while a limiter
// that gave no hint may be in front (counting).
func (p *pace) top(now time.Time) float64 {
	if p.counting(now) {
		return hintlessTop
	}
	return 1
}

// counting reports whether the pace counts requests: a limiter that gave
// no hint refused within hintlessFor of the time the pace held calls
// (hintless, skipIdle).
func (p *pace) counting(now time.Time) bool {
	return !p.hintless.IsZero() && now.Sub(p.hintless) < hintlessFor
}

// burst is what the pace lets through at once at rate: paceBurst's worth
// of the paced rate, and at least one point.
func (p *pace) burst(rate float64) float64 {
	return max(p.now()*rate*paceBurst.Seconds(), p.minBurst, 1)
}

// refill brings the tokens up to now at share times rate, up to the
// burst, which may have shrunk since.
func (p *pace) refill(rate float64, now time.Time) {
	if now.After(p.at) {
		p.tokens += p.now() * rate * now.Sub(p.at).Seconds()
		p.at = now
	}
	p.tokens = min(p.burst(rate), p.tokens)
}

// wait is how long a call that takes amount waits for the pace at rate
// (0: it may go; also when the rate is zero, which gives the pace nothing
// to count), cut short at the next step up, when the call looks again.
func (p *pace) wait(amount, rate float64, now time.Time) time.Duration {
	if !p.paces(now) || rate <= 0 {
		return 0
	}
	p.refill(rate, now)
	deficit := min(amount, p.burst(rate)) - p.tokens
	if deficit <= 1e-9 {
		return 0
	}
	p.boundAt = now
	return min(durationOf(deficit/(p.now()*rate)), p.untilStep(now))
}

// untilStep is how long until the share's next step up; forever at its
// top.
func (p *pace) untilStep(now time.Time) time.Duration {
	if p.share >= p.top(now) || p.changeAt.IsZero() {
		return forever
	}
	return p.changeAt.Add(p.quiet).Sub(now)
}

// take takes amount of an admitted call.
func (p *pace) take(amount float64, now time.Time) {
	if p.paces(now) {
		p.tokens -= amount
	}
}

// arrived notes a call admitted at now against the pace at rate: one that
// comes before the pace is full again is held by it, as a call that waits
// is (skipIdle).
func (p *pace) arrived(rate float64, now time.Time) {
	if p.paces(now) && rate > 0 && p.tokens < p.burst(rate)-1e-9 {
		p.boundAt = now
	}
}

// capOf is the in-flight cap the key's pace allows of parallel slots: the
// share of them, at least one.
func (p *pace) capOf(parallel int) int {
	return max(1, int(math.Floor(float64(parallel)*min(p.share, 1)+1e-9)))
}
