package budget

import "time"

// fallbackShare is what one process may use of the key while it cannot
// count on the store: its slots in flight and its part of the lockout
// guard's refusals (its part of the key's rate is the pace's ceiling).
type fallbackShare struct {
	on       bool // the process keeps to its share: the store is down or came back within rejoinWindow, and other processes share the key
	slots    int  // of the parallel quota
	refusals int  // of the refusal guard's limit
}

// shareOf is the part of total that falls to the process at rank of n: the
// parts of all ranks add up to total.
func shareOf(total, n, rank int) int {
	return (rank+1)*total/n - rank*total/n
}

// shareLocked is the share of the key this process keeps to now. It
// applies while the store is down and for rejoinWindow after it is back,
// when the key has more than one process: each takes its part of the
// parallel quota and of the guard's refusals by its place among the
// processes the store last counted, and of the key's rate by its part of
// the slots. So no number of processes exceeds the key's limits while they
// cannot see each other. The processes counted are those of the last
// answer before the outage; the count shrinks only processTTL after a
// rejoin, since a store that came back empty counts the processes anew.
func (s *State) shareLocked(now time.Time) fallbackShare {
	limited := s.shared != nil && (!s.sharedActiveLocked(now) || now.Before(s.rejoinedAt.Add(rejoinWindow)))
	if !limited && s.members.Processes > 0 &&
		(s.members.Processes >= s.share.Processes || now.Sub(s.rejoinedAt) > processTTL) {
		s.share = s.members
	}
	n := s.share.Processes
	if !limited || n <= 1 {
		s.pace.ceiling = 0
		s.partLocked(1, now)
		return fallbackShare{}
	}
	rank := min(max(s.share.Rank, 0), n-1)
	sh := fallbackShare{on: true, slots: shareOf(s.parallel, n, rank), refusals: shareOf(RefusalLimit, n, rank)}
	s.pace.ceiling = float64(sh.slots) / float64(max(s.parallel, 1))
	s.partLocked(s.pace.ceiling, now)
	return sh
}

// partLocked gives every pooled level the process's part p of it: the
// others that lost the store read the same word and take their parts. A
// part starts from the last word on the level, less what this process took
// since: the refill since then the other processes may have taken, and
// the store, which counted their takes, can no longer say. They took no
// more than the level held: it starts at zero at the least, or at the
// level's debt.
func (s *State) partLocked(p float64, now time.Time) {
	if p == s.outagePart {
		return
	}
	whole := s.outagePart == 1
	s.outagePart = p
	for _, l := range s.levels {
		if l.pooled {
			if whole && p < 1 {
				l.refill(now)
				l.tokens = max(l.tokens-l.unconfirmed, min(l.tokens, 0))
				l.unconfirmed = 0
			}
			l.parts.outage = p
		}
	}
}

// reprobeLocked is how long a call held only by the fallback share waits
// before it looks again: until the store may be tried again, or the
// rejoin window ends.
func (s *State) reprobeLocked(now time.Time) time.Duration {
	d := s.sharedRetryAt.Sub(now)
	if end := s.rejoinedAt.Add(rejoinWindow).Sub(now); end > 0 && s.sharedRetryAt.IsZero() {
		d = end
	}
	return max(d, sharedPoll)
}
