package budget

import "time"

// nextFree is how long until the key's log frees its oldest take, or the
// level's moment comes; forever when neither will.
func (l *level) nextFree(now time.Time) time.Duration {
	d := forever
	if now.Before(l.moment.at) {
		d = l.moment.at.Sub(now)
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
// only an answer or a release can help. A level the server never sized
// holds no call on what it counts.
func (l *level) wait(n float64, now time.Time) time.Duration {
	if !l.sized() {
		return 0
	}
	d := time.Duration(0)
	if reserve, left := l.reserve(now), l.believed(now); left-reserve < n-1e-9 {
		d = l.boundsWait(n+reserve, now)
		if reserve > 0 {
			// n fits once every fall larger than what is left over n
			// has left the window, or once the reserve lapses (or the
			// call sent when it did is answered).
			until := sooner(l.others.drops.lastOver(left-n, now.Add(-l.window)).Add(l.window), l.reserveLapse().Add(1))
			d = min(d, max(until.Sub(now), time.Millisecond))
		}
	} else if !l.others.probeAt.IsZero() && !now.After(l.reserveLapse()) && l.guesses(n+reserve, now) {
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
	return l.logFreesAfter(missing, now, now)
}

// logFreesAfter is how long from now until the oldest takes of the key's
// log that leave the window after from add up to missing; forever when
// they add up to less.
func (l *level) logFreesAfter(missing float64, from, now time.Time) time.Duration {
	for i := l.log.head; i < len(l.log.entries); i++ {
		e := l.log.entries[i]
		if !e.at.Add(l.window).After(from) {
			continue
		}
		if missing -= e.amount; missing <= 1e-9 {
			return e.at.Add(l.window).Sub(now)
		}
	}
	return forever
}

// boundsWait is how long until the larger of the lower bounds holds n.
func (l *level) boundsWait(n float64, now time.Time) time.Duration {
	d := l.refillWait(n-l.tokens, 1, now)
	if now.Before(l.moment.at) && l.tokens+l.momentUnit(now) >= n-1e-9 {
		d = min(d, l.moment.at.Sub(now))
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

// fullIn is how long until the level is full again and no refusal's wait
// holds it: as long as a call of the level's size would wait, and for a
// level others take from at least until the moment the server's last word
// named (t), since what the others take the model cannot tell and a wait
// cut short where the model looks again is not when the level is full. A
// t past the level's window is absurd, and ignored. 0 when it never is.
func (l *level) fullIn(now time.Time) time.Duration {
	hold := max(l.holdUntil.Sub(now), 0)
	full := l.size() * l.part() // of a level this key shares with keys or processes, its part
	if l.available(now) >= full-1e-9 {
		return hold
	}
	d := l.wait(full, now)
	if d == forever {
		d = 0
	}
	if full := l.reported.at.Add(l.reported.reset); l.shared && l.reported.reset <= l.window && now.Before(full) {
		d = max(d, full.Sub(now))
	}
	if d == 0 {
		return 0
	}
	return max(d, hold)
}

// leastWait is the shortest wait for amount that the server's last word
// allows, whatever the level's shape: a bucket refilling at the quota's
// rate from what the word left. A moment further away than that may be a
// bucket's full one, which is no wait the server asks of one call.
func (l *level) leastWait(amount float64) time.Duration {
	missing := l.need(amount) - max(l.tokens, 0)
	if missing <= 0 {
		return 0
	}
	if r := l.grossRate(); r > 0 {
		return durationOf(missing / r)
	}
	return forever
}
