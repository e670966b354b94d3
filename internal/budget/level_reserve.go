package budget

import "time"

// otherTakes is what the answers showed of the other keys' takes from a level
// they take from too. Such a level frees for this key what this key took a
// window before, and besides refills at what its answers show beyond that:
// r plus what the server had counted of this key's takes, less what left
// this key's log (the mark), grows at that rate. t says only when the
// level would be full if no one took more, which they do.
type otherTakes struct {
	freedSeen  float64   // the part of the level's log.freed already in its tokens
	mark       float64   // the mark of the last answer
	pending    float64   // what the server had not counted of this key's takes then
	markAt     time.Time // when that answer came
	drops      drops     // what the others took at once between two answers within a window (reserve)
	answeredAt time.Time // the last answer that charged a call, not to a status request
	probeAt    time.Time // when the call the others wait for (sent) went; zero once it ended
	gain       netRefill // the refill the marks showed (learnGain)
}

// reserve is what a level others take from keeps back, whatever its
// shape (othersTake): the most the others took at once between two of its
// answers (maxDropGap) within the last window. They take in bursts (of
// what frees for them, a window after their last, or of what a bucket
// shows left), and a call sent on the last r would meet the next; a key
// of another process that reads the same r would take it twice. Of a
// bucket, what is kept back costs nothing while it is not full. Answers
// that name another level, to calls that take from this one, say nothing
// of what the others took, and keep the reserve. Nothing is kept back once
// for an eighth of the window (reserveLapseWindow) no call that took from
// the level has been answered (charged) and no answer has named it
// (RateLimit): the calls it held sent nothing meanwhile, so the others'
// next take has come or will not, and only a call sent can tell what is
// left. One goes, and the reserve holds again while it is in flight. A
// status answer does not count: asked while the key is idle, it would keep
// the reserve from ever lapsing.
func (l *level) reserve(now time.Time) float64 {
	if !l.othersTake() || now.After(l.reserveLapse()) {
		return 0
	}
	return l.others.drops.max(now.Add(-l.window))
}

// reserveLapse is the last moment the level's reserve holds: an eighth of
// the window (reserveLapseWindow) after the last answer to a call that
// named it or took from it, or after the call that went once it lapsed or
// on a guess (sent), while that call is in flight.
func (l *level) reserveLapse() time.Time {
	return later(later(l.others.markAt, l.others.answeredAt), l.others.probeAt).Add(l.window / reserveLapseWindow)
}

// sent notes a call admitted at now that took from the level and reports
// whether it is the one the others wait for: the first once its reserve
// lapsed, or one that went on a guess (guesses, of what it left over the
// reserve).
func (l *level) sent(now time.Time) bool {
	if now.After(l.reserveLapse()) || l.guesses(l.reserve(now), now) {
		l.others.probeAt = now
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
	return l.frees(now) && l.named(now) && !l.others.markAt.Before(l.others.answeredAt) &&
		(l.tokens-l.unconfirmed < n-1e-9 || now.Sub(l.others.markAt) > l.maxDropGap() && l.reserve(now) > 0)
}

// answered notes the end of a call admitted at start that took from the
// level (probe: the one the others wait for, sent): an answer that charged
// it, unless to a status request, keeps the reserve, and the call the
// others wait for is no longer in flight.
func (l *level) answered(start time.Time, probe, charged, status bool, now time.Time) {
	if charged && !status {
		l.others.answeredAt = now
	}
	if probe && start.Equal(l.others.probeAt) {
		l.others.probeAt = time.Time{}
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

// reserveLapseWindow divides a level's window into how long its reserve
// holds after the last answer naming it (7.5 s of a minute): under the 10 s
// without a call that make a stall.
const reserveLapseWindow = 8

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
