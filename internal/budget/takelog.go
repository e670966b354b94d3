package budget

import "time"

// takeLog is a level's own takes within its window, oldest first, with
// their sum.
type takeLog struct {
	entries []logEntry // the takes, oldest first; those before head have left the window
	head    int        // the first take still in the window
	sum     float64    // what the takes from head on add up to
	freed   float64    // what has left the window so far
}

// logEntry is one take of the log.
type logEntry struct {
	at     time.Time // when the server had surely counted it: its answer
	sent   time.Time // when it may have been counted first: its admission
	amount float64   // what it took, less what was given back since (refund)
}

// maxLogEntries bounds a log: the takes answered within the same
// maxLogEntries-th of the window (a minute's is 15 ms, finer than any
// call) are one entry, as if all had been answered with the last and
// admitted with the first, which frees them no sooner than any of them.
const maxLogEntries = 4096

// add logs amount taken by a request admitted at sent and answered at at,
// of a level whose window is window.
func (g *takeLog) add(at, sent time.Time, amount float64, window time.Duration) {
	if amount <= 0 {
		return
	}
	g.sum += amount
	grain := window / maxLogEntries
	if n := len(g.entries); n > g.head && grain > 0 && at.Truncate(grain).Equal(g.entries[n-1].at.Truncate(grain)) {
		last := &g.entries[n-1]
		last.at, last.sent, last.amount = later(last.at, at), sooner(last.sent, sent), last.amount+amount
		return
	}
	g.entries = append(g.entries, logEntry{at, sent, amount})
}

// freedBy is what l's log has freed by now.
func (l *level) freedBy(now time.Time) float64 {
	if l.window > 0 {
		l.log.prune(now.Add(-l.window))
	}
	return l.log.freed
}

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
