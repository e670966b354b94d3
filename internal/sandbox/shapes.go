package sandbox

import (
	"fmt"
	"math"
	"time"
)

// Shape is how a level counts. Every shape admits a call of n units when n
// fits now, and a refusal's retryAfterMs is the exact wait until the refused
// call fits on the refusing level, rounded up to a millisecond (Retry-After:
// the same rounded up to a second, at least 1). What RateLimit reports for a
// level of quota q depends on the shape; see the constants.
type Shape string

// The shapes a level can have. Windows of FixedWindow and SlidingWindow are
// counted from the server's origin (its start, truncated to a second).
const (
	// TokenBucket holds its capacity (KeyCapacity for key, the quota for the
	// other levels) and refills quota per window continuously. r is
	// floor(tokens), t the seconds until the bucket is full again.
	TokenBucket Shape = "token-bucket"
	// SlidingLog counts every unit taken in the last window (a unit taken at
	// a leaves it at a + window). r is q minus the units counted, t the
	// seconds until the oldest counted unit leaves the window, when more
	// becomes available (0 when nothing is counted).
	SlidingLog Shape = "sliding-log"
	// SlidingLogUntilFull counts as SlidingLog does, but t is the seconds
	// until the newest counted unit leaves the window: until the level is
	// full again, as bodo-api.md words t (and as bodo-staging has it). Every
	// take then moves t to a whole window.
	SlidingLogUntilFull Shape = "sliding-log-until-full"
	// SlidingWindow is a sliding-window counter: it estimates the count as
	// the previous fixed window's count weighted by the part of it still
	// inside the sliding window, plus the current window's count. r is
	// floor(q − estimate), t the seconds (rounded up) until the estimate has
	// dropped enough for one more unit (0 when the estimate is 0).
	SlidingWindow Shape = "sliding-window"
	// FixedWindow counts units in fixed windows. r is q minus the units used
	// in the current window, t the seconds until it resets (0 when nothing is
	// used).
	FixedWindow Shape = "fixed-window"
)

func (sh Shape) valid() bool {
	switch sh {
	case TokenBucket, SlidingLog, SlidingLogUntilFull, SlidingWindow, FixedWindow:
		return true
	}
	return false
}

// eps absorbs float rounding so that waiting exactly retryAfterMs is enough.
const eps = 1e-9

// limiter is one level (or one partition of one) as admit, charge, the
// RateLimit field and GET /v1/rate_limit see it. Every method but advance
// works at the time of the last advance.
type limiter interface {
	// advance brings the level up to now; it never goes back in time.
	advance(now time.Time)
	// has reports whether n units fit now.
	has(n float64) bool
	// take uses n units; it is only called after has(n).
	take(n float64)
	// remaining is r of the RateLimit field.
	remaining() int
	// wait is how long until n units fit; never when they never will.
	wait(n float64, never time.Duration) time.Duration
	// reset is t of the RateLimit field.
	reset(never time.Duration) time.Duration
	// full is what the level holds when nothing is used.
	full() float64
}

// newLimiter makes a level of the given shape holding quota units per
// window. capacity is what a token bucket holds (window shapes hold quota).
// foreign is a constant load by someone else in units per second: a bucket
// is drained by it (taking at most what it holds); window shapes count
// foreign × window units in every window, as if the stream had always run,
// so that they leave quota − foreign × window to the others.
func newLimiter(shape Shape, quota, capacity float64, window time.Duration, origin, now time.Time, foreign float64) limiter {
	reserved := foreign * window.Seconds()
	switch shape {
	case SlidingLog, SlidingLogUntilFull:
		return &slidingLog{quota: quota, reserved: reserved, length: window, at: now, untilFull: shape == SlidingLogUntilFull}
	case SlidingWindow:
		w := &slidingCounter{quota: quota, reserved: reserved, length: window, origin: origin, idx: math.MinInt64, at: now}
		w.advance(now)
		return w
	case FixedWindow:
		return newFixedWindow(quota, window, origin, now, reserved)
	case TokenBucket, "":
		return &bucket{level: capacity, capacity: capacity, rate: quota / window.Seconds(), drain: foreign, at: now}
	}
	panic(fmt.Sprintf("sandbox: unknown limiter shape %q", shape))
}

// greedy is a level another key takes chunk units from at once, every
// every, whenever they fit (WithGreedyForeignLoadEvery): it competes for
// what the level frees.
type greedy struct {
	limiter
	chunk float64
	every time.Duration
	next  time.Time            // its next take
	taken float64              // what it took so far
	drain bool                 // it takes what the level holds when the chunk does not fit
	late  func() time.Duration // how long after its tick a take lands; nil for none
	lands time.Time            // when the take of next lands, once drawn

	origin   time.Time     // where the windows of byWindow start
	window   time.Duration // their length
	byWindow []float64     // what every key took of the level in each window from origin, up to maxWindowsCounted
	at       time.Time     // the last advance
}

// maxWindowsCounted bounds greedy.byWindow: a day of minutes.
const maxWindowsCounted = 24 * 60

// take takes n for a key at the last advance.
func (g *greedy) take(n float64) {
	g.limiter.take(n)
	g.count(g.at, n)
}

// count adds n, taken at at, to its window.
func (g *greedy) count(at time.Time, n float64) {
	if g.window <= 0 || at.Before(g.origin) {
		return
	}
	i := int(at.Sub(g.origin) / g.window)
	if i >= maxWindowsCounted {
		return
	}
	for len(g.byWindow) <= i {
		g.byWindow = append(g.byWindow, 0)
	}
	g.byWindow[i] += n
}

func (g *greedy) advance(now time.Time) {
	for g.chunk > 0 {
		if g.late != nil && g.lands.IsZero() {
			g.lands = g.next.Add(min(g.late(), g.every-1))
		}
		at := g.next
		if !g.lands.IsZero() {
			at = g.lands
		}
		if at.After(now) {
			break
		}
		g.limiter.advance(at)
		n := g.chunk
		if g.drain {
			n = min(n, float64(max(g.limiter.remaining(), 0)))
		}
		if n > 0 && g.limiter.has(n) {
			g.limiter.take(n)
			g.taken += n
			g.count(at, n)
		}
		g.next, g.lands = g.next.Add(g.every), time.Time{}
	}
	g.limiter.advance(now)
	if now.After(g.at) {
		g.at = now
	}
}

// bucket is a token bucket evaluated lazily: level is brought up to date
// from the time elapsed whenever it is looked at. drain is a constant
// consumption by someone else (the foreign load on the org bucket); it takes
// at most what the bucket holds.
type bucket struct {
	level, capacity float64
	rate, drain     float64 // points per second
	at              time.Time
}

func (b *bucket) advance(now time.Time) {
	if !now.After(b.at) {
		return
	}
	dt := now.Sub(b.at).Seconds()
	b.level = min(max(b.level+(b.rate-b.drain)*dt, 0), b.capacity)
	b.at = now
}

func (b *bucket) has(n float64) bool { return b.level+eps >= n }

func (b *bucket) take(n float64) { b.level = max(b.level-n, 0) }

func (b *bucket) remaining() int { return max(int(math.Floor(b.level+eps)), 0) }

func (b *bucket) full() float64 { return b.capacity }

// wait is how long until n points are there; never is returned when the
// foreign drain eats every refill.
func (b *bucket) wait(n float64, never time.Duration) time.Duration {
	if b.has(n) {
		return 0
	}
	net := b.rate - b.drain
	if net <= 0 || n > b.capacity+eps {
		return never
	}
	return ceilNanos((n - b.level) / net * 1e9)
}

// reset is how long until the bucket is full again.
func (b *bucket) reset(never time.Duration) time.Duration {
	if b.level+eps >= b.capacity {
		return 0
	}
	return b.wait(b.capacity, never)
}

// fixedWindow is a quota counted in fixed windows from origin. reserved
// units (a foreign load) are counted from the start of every window.
type fixedWindow struct {
	quota    float64
	reserved float64
	length   time.Duration
	origin   time.Time
	idx      int64
	used     float64 // this window's units, reserved included
	at       time.Time
}

func newFixedWindow(quota float64, length time.Duration, origin, now time.Time, reserved float64) *fixedWindow {
	w := &fixedWindow{quota: quota, reserved: reserved, length: length, origin: origin, idx: math.MinInt64, at: now}
	w.advance(now)
	return w
}

func (w *fixedWindow) advance(now time.Time) {
	if now.Before(w.at) {
		return
	}
	w.at = now
	if i := int64(now.Sub(w.origin) / w.length); i != w.idx {
		w.idx, w.used = i, w.reserved
	}
}

func (w *fixedWindow) has(n float64) bool { return w.used+n <= w.quota+eps }

func (w *fixedWindow) take(n float64) { w.used += n }

func (w *fixedWindow) remaining() int { return max(int(math.Floor(w.quota-w.used+eps)), 0) }

func (w *fixedWindow) full() float64 { return w.quota }

// resetsAt is when the current window ends.
func (w *fixedWindow) resetsAt() time.Time {
	return w.origin.Add(time.Duration(w.idx+1) * w.length)
}

func (w *fixedWindow) wait(n float64, never time.Duration) time.Duration {
	if w.has(n) {
		return 0
	}
	if w.reserved+n > w.quota+eps {
		return never
	}
	return w.resetsAt().Sub(w.at)
}

func (w *fixedWindow) reset(time.Duration) time.Duration {
	if w.used <= eps {
		return 0
	}
	return w.resetsAt().Sub(w.at)
}

// slidingLog remembers when every unit was taken. reserved units (a
// foreign load) are counted in every window.
type slidingLog struct {
	quota     float64
	reserved  float64
	length    time.Duration
	log       []logEntry // oldest first
	used      float64    // the units in log
	at        time.Time
	untilFull bool // t is until the newest unit leaves (SlidingLogUntilFull)
}

type logEntry struct {
	at time.Time
	n  float64
}

func (l *slidingLog) advance(now time.Time) {
	if now.Before(l.at) {
		return
	}
	l.at = now
	i := 0
	for i < len(l.log) && !l.log[i].at.Add(l.length).After(now) {
		l.used -= l.log[i].n
		i++
	}
	if i > 0 {
		l.log = append(l.log[:0], l.log[i:]...)
		if len(l.log) == 0 {
			l.used = 0
		}
	}
}

func (l *slidingLog) count() float64 { return l.used + l.reserved }

func (l *slidingLog) has(n float64) bool { return l.count()+n <= l.quota+eps }

func (l *slidingLog) take(n float64) {
	if n == 0 {
		return // a call that takes nothing from the level leaves no entry for t to name
	}
	if last := len(l.log) - 1; last >= 0 && l.log[last].at.Equal(l.at) {
		l.log[last].n += n
	} else {
		l.log = append(l.log, logEntry{at: l.at, n: n})
	}
	l.used += n
}

func (l *slidingLog) remaining() int { return max(int(math.Floor(l.quota-l.count()+eps)), 0) }

func (l *slidingLog) full() float64 { return l.quota }

// wait is how long until enough of the oldest units have left the window
// for n more.
func (l *slidingLog) wait(n float64, never time.Duration) time.Duration {
	if l.has(n) {
		return 0
	}
	left := l.used
	for _, e := range l.log {
		left -= e.n
		if left+l.reserved+n <= l.quota+eps {
			return e.at.Add(l.length).Sub(l.at)
		}
	}
	return never
}

func (l *slidingLog) reset(time.Duration) time.Duration {
	if len(l.log) == 0 {
		return 0
	}
	if l.untilFull {
		return l.log[len(l.log)-1].at.Add(l.length).Sub(l.at)
	}
	return l.log[0].at.Add(l.length).Sub(l.at)
}

// slidingCounter is a sliding-window counter over fixed windows from
// origin. reserved units (a foreign load) are counted in every window.
type slidingCounter struct {
	quota     float64
	reserved  float64
	length    time.Duration
	origin    time.Time
	idx       int64   // the current fixed window
	prev, cur float64 // units of the previous and the current window, reserved not included
	at        time.Time
}

func (w *slidingCounter) advance(now time.Time) {
	if now.Before(w.at) {
		return
	}
	w.at = now
	switch i := int64(now.Sub(w.origin) / w.length); {
	case i == w.idx:
	case w.idx != math.MinInt64 && i == w.idx+1:
		w.idx, w.prev, w.cur = i, w.cur, 0
	default:
		w.idx, w.prev, w.cur = i, 0, 0
	}
}

func (w *slidingCounter) start() time.Time { return w.origin.Add(time.Duration(w.idx) * w.length) }

// estimate is the count now: the previous window weighted by the part of
// it still inside the sliding window, plus the current one.
func (w *slidingCounter) estimate() float64 {
	frac := float64(w.at.Sub(w.start())) / float64(w.length)
	return w.prev*(1-frac) + w.cur + w.reserved
}

func (w *slidingCounter) has(n float64) bool { return w.estimate()+n <= w.quota+eps }

func (w *slidingCounter) take(n float64) { w.cur += n }

func (w *slidingCounter) remaining() int {
	return max(int(math.Floor(w.quota-w.estimate()+eps)), 0)
}

func (w *slidingCounter) full() float64 { return w.quota }

// wait solves for the first moment the estimate, which only falls while
// nothing is taken, leaves room for n: within the current window the
// previous window's weight falls; in the next one the current window's.
func (w *slidingCounter) wait(n float64, never time.Duration) time.Duration {
	if w.has(n) {
		return 0
	}
	target := w.quota - n // the estimate must not pass this
	if w.reserved > target+eps {
		return never
	}
	start := w.start()
	end := start.Add(w.length)
	if need := target - w.cur - w.reserved; w.prev > 0 && need >= -eps {
		if x := 1 - max(need, 0)/w.prev; x < 1 {
			t := start.Add(ceilNanos(x * float64(w.length)))
			if t.Before(end) {
				return max(t.Sub(w.at), 0)
			}
		}
	}
	need := target - w.reserved
	if w.cur <= need+eps {
		return end.Sub(w.at)
	}
	x := 1 - need/w.cur
	return end.Add(ceilNanos(x * float64(w.length))).Sub(w.at)
}

// ceilNanos rounds a float number of nanoseconds up, forgiving float
// rounding far below a nanosecond.
func ceilNanos(ns float64) time.Duration { return time.Duration(math.Ceil(ns - 1e-3)) }

// reset is how long until the estimate has dropped enough for one more
// unit than remaining says.
func (w *slidingCounter) reset(never time.Duration) time.Duration {
	if w.estimate() <= eps {
		return 0
	}
	return w.wait(float64(w.remaining()+1), never)
}
