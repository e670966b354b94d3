package budget

import "time"

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
	return l.window > 0 && l.window <= spreadWindow && (l.steps && !l.bucket || l.frees(now) && l.named(now))
}

// paceRate is the rate of the level's pace at a share of 1: its spread's
// when it spreads (spreads), else its own; it brings the pace's spread
// up to date.
func (l *level) paceRate(now time.Time) float64 {
	rate, burst := l.spread(now)
	if l.pace.spread, l.pace.minBurst = l.spreads(now), burst; l.pace.spread {
		return rate
	}
	return l.rate(now)
}

func (l *level) named(now time.Time) bool {
	return !l.reported.at.IsZero() && now.Sub(l.reported.at) < l.window
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

// spread is the rate a spread level's calls go at and what they may take
// at once (its burst).
//
// The rate is its quota's, or slower while what is left would not last
// until the key's log frees its oldest take (a burst took much of the
// window): lastingRate. The burst is spreadBurst of a window's worth at
// that rate (of its size when the key's log is empty). A tenth of the size
// when little is left for long would leave nothing for most of the window;
// when much frees soon, the burst that took it goes again. A level the
// contract documents as a bucket keeps a tenth of its size: its steps may
// be a drained bucket's t read as a step's.
//
// Of a level that frees what this key took, both follow what this key has
// of it (what it took within the window and what is left): a hole in its
// takes would come back a window later as a hole in what frees. The rate
// adds the refill beyond that.
func (l *level) spread(now time.Time) (rate, burst float64) {
	if l.frees(now) {
		has := l.log.sum + max(l.available(now), 0)
		return min(l.grossRate(), has/l.window.Seconds()+l.rate(now)), spreadBurst * min(l.size(), has)
	}
	rate, burst = l.grossRate(), spreadBurst*l.size()
	if secs := l.oldestFree(now); secs > 0 {
		lasting := l.lastingRate(secs, now)
		rate = min(rate, lasting)
		if !l.documentedBucket() {
			burst = spreadBurst * min(l.size(), lasting*l.window.Seconds())
		}
	}
	return rate, burst
}
