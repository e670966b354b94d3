package budget

import (
	"net/http"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
)

// Answer is what the server said to an attempt.
type Answer struct {
	Status int
	Header http.Header
	// Problem is the refusal or error of a non-2xx answer; nil otherwise.
	Problem *Problem
}

// Problem is what the budget reads of a problem answer.
type Problem struct {
	Code       string
	Policy     string
	RetryAfter time.Duration // the server's wait, when Hinted
	Hinted     bool
	ResetsAt   time.Time
}

// Finish ends an admitted attempt with its answer: it frees the slot, counts
// a refusal, gives back what a refused call was not charged, follows the
// RateLimit headers, holds the calls a refusal's wait concerns and cuts the
// AIMD state on a refusal that speaks of the key's rate.
func (t *Ticket) Finish(a Answer) { t.end(&a, false, false) }

// Unanswered ends an attempt that got no answer; sent says it may have
// reached the server, cancelled that the caller's context ended it. One
// that was sent keeps its slot in flight while the server may still be
// working on it (lingerLocked), and counts for the lockout guard as a
// refusal, also when its caller gave up on it: the server may have
// refused it without the client ever reading that, and counts the refusal
// toward a lockout all the same.
func (t *Ticket) Unanswered(sent, cancelled bool) { t.end(nil, sent, cancelled) }

func (t *Ticket) end(a *Answer, sent, cancelled bool) {
	t.once.Do(func() {
		s, c := t.s, t.c
		s.mu.Lock()
		now := time.Now()
		unknown := sent && !cancelled
		linger := time.Duration(0)
		if a == nil && sent && c.Budgeted {
			linger = s.lingerLocked(t, now)
		}
		rel := s.releaseFor(t, linger)
		s.reserved--
		s.lastUse = now
		refused := a != nil && a.Status == http.StatusTooManyRequests
		// Nothing is charged for a refusal, an OVERLOADED, or an attempt
		// that never left (a middleware ended it, a dial failed, it was
		// held back).
		uncharged := refused || a != nil && a.Status == http.StatusServiceUnavailable || a == nil && !sent
		mayBeRefused := refused || a == nil && sent
		if mayBeRefused {
			s.refusals = append(s.refusals, now)
		}
		if a != nil && !(refused && (a.Problem == nil || a.Problem.Code == "")) {
			s.passed.add(t.start) // a limiter in front let it through (rule 6)
		}
		if c.Budgeted {
			s.open = s.open.minus(sentCount{1, c.Cost})
			if unleased := t.unleased; linger > 0 {
				leased := t.lease != ""
				if leased {
					s.lingering++
				}
				time.AfterFunc(linger, func() { s.freeSlot(unleased, leased) })
			} else {
				s.freeSlotLocked(unleased)
			}
			// An error answer, or a redirect the client does not follow,
			// returns no records: what a read reserved of egress is given
			// back (a 304 is settled by the caller).
			noRecords := a != nil && a.Status >= http.StatusMultipleChoices && a.Status != http.StatusNotModified
			// A replay repeats the first answer, a problem too: 1 point, no write.
			replayed := a != nil && !uncharged && a.Header.Get("Idempotent-Replayed") == "true"
			// The attempt that did the call is charged already: an earlier
			// one of this call, or for a key the caller chose, another call.
			replay := replayed && (c.kept || c.OwnKey && !c.sentBefore)
			if replayed && !replay {
				s.replayedLocked(t, now)
			}
			c.sentBefore = c.sentBefore || a != nil || sent
			c.kept = c.kept || unknown || a != nil && !uncharged
			// A replay, an attempt that never left or a refusal whose
			// wait holds every call of the key takes no turn of a level
			// it is not counted on: its turn goes back, here and in the
			// store (the next refill caps it at the burst). Any other
			// refusal keeps it: one by the level says it had no room at
			// that turn, and one that holds nothing would be retried at
			// once.
			turn := replay || a == nil && !sent || holdsTheKey(a)
			var took []budgetstore.Level
			for _, tk := range t.taken {
				l := tk.l
				l.inflight -= tk.amount
				l.answered(t.start, tk.probe, a != nil && !uncharged, c.Status, now)
				back := 0.0
				switch {
				case uncharged || noRecords && l.name == Egress:
					back = tk.amount
				case replay:
					back = replayBack(l, tk.amount)
				}
				if back > 0 {
					l.give(back)
					if turn {
						l.pace.take(-back, now)
					}
					rel.refund(l, back, turn, now)
				}
				if used := tk.amount - back; used > 0 {
					l.log.add(now, t.start, used, l.window)
					l.charged += used
					if t.lease == "" && s.shared != nil {
						took = append(took, storeLevel(l, -used, now))
					}
				}
				l.gate.wakeHead()
			}
			s.tookLocallyLocked(took, now)
			leaveRuns(c, false, a != nil && a.Status >= http.StatusOK && a.Status < http.StatusMultipleChoices)
			s.slotGate.wakeHead()
		}
		s.guardGate.wakeHead()
		if a != nil {
			if !s.slowStart.learned {
				s.openFlightLocked(t.start, now)
				s.slotGate.wakeHead() // also when no budgeted call ended: the flight may go
			}
			s.observeLocked(c, a.Header, now, rel, !uncharged)
			if a.Problem != nil {
				s.refusedLocked(c, t.taken, t.start, a.Status, a.Problem, now, rel)
			}
		}
		s.leaveFlightLocked(t)
		if a == nil && t.reading && now.Before(t.readUntil) {
			// A refusal whose body the call never read (a middleware
			// made it an error): its headers' wait binds the key's
			// budgeted calls, as it did while the body was being read.
			s.heldUntil = later(s.heldUntil, t.readUntil)
		}
		t.endReadingLocked() // the answer's waits are in: requests held at their last moment look again
		overflow, logger := s.bounds.overflowDue, s.logger
		s.bounds.overflowDue = false
		s.releaseSharedLocked(rel, mayBeRefused, now) // unlocks
		s.logOverflow(overflow, logger)
	})
}

// replayPoints is what the API charges for an idempotent replay.
const replayPoints = 1

// replayBack is what a retry answered by an idempotent replay gives back of
// amount, its take from l: the replay costs replayPoints and is no write,
// so it keeps replayPoints of a level that counts points and nothing of
// the levels that count writes and deletes. The attempt whose answer was
// lost did the call, and keeps its take. A policy the client learned keeps
// what it took: what it counts of a replay is the server's.
func replayBack(l *level, amount float64) float64 {
	switch {
	case l.unit == "points":
		return max(0, amount-replayPoints)
	case l.name == Write || l.name == Delete || l.name == DeleteDay:
		return amount
	}
	return 0
}

// replayedLocked counts what the server charged for the attempt of a call
// whose answer is a replay when no earlier attempt that may have reached
// the server kept its take, and the client made the key (which no other
// call had): something sent the request before, unseen
// (a RoundTripper of the caller's that resends; package bodo holds back
// net/http's own resends), and the server charged that request in full and
// the replay besides. The attempt took the call's cost; the replay's point
// is taken now from the levels it counts points on.
func (s *State) replayedLocked(t *Ticket, now time.Time) {
	for _, tk := range t.taken {
		if l := tk.l; l.unit == "points" {
			l.take(replayPoints, now)
			l.charged += replayPoints
			l.log.add(now, t.start, replayPoints, l.window)
		}
	}
}

// chargedSince is what was charged to l after c's last attempt was admitted,
// less c's own take when the server charged it: answers to calls sent at
// once arrive in any order, and a call admitted earlier may have reached
// the server later. A Status call knows it of every level (chargedAt),
// other calls of the levels they take from; known is false for a level
// the call took nothing from.
func (c *Call) chargedSince(l *level, charged bool) (since float64, known bool) {
	took := false
	for _, t := range c.ticket.taken {
		if t.l == l {
			took = true
			d := l.charged - t.charged
			if charged {
				d -= t.amount
			}
			since += max(0, d)
		}
	}
	mark, ok := c.chargedAt[l]
	if ok && !took {
		since = max(0, l.charged-mark)
	}
	return since, took || ok
}

// freedSince is what l's log freed since c took from it, which the
// server may have counted still when it answered c; -1 when c took
// nothing from l.
func (c *Call) freedSince(l *level, now time.Time) float64 {
	for _, t := range c.ticket.taken {
		if t.l == l {
			return l.freedBy(now) - t.freed
		}
	}
	return -1
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Settle gives back amount of a level that c's answered attempt reserved
// but did not use (the records a list did not return). When the answer's
// RateLimit named the level, what is left is the server's word already and
// only the key's own log is corrected.
func (s *State) Settle(c *Call, name string, amount float64) {
	if amount <= 0 {
		return
	}
	s = s.lock()
	now := time.Now()
	l := s.levels[name]
	if l == nil {
		s.mu.Unlock()
		return
	}
	l.refill(now)
	l.log.refund(amount)
	if c.reported == l {
		s.mu.Unlock()
		return
	}
	l.give(min(amount, max(l.size()-l.tokens, 0)))
	l.gate.wakeHead()
	s.refundSharedLocked(c, l, amount, now) // unlocks
}

// holdsTheKey reports whether a is a refusal of the API whose wait holds
// every call of the key (refusedLocked): an OVERLOADED, a lockout, or a
// refusal naming no level or parallel, with a wait.
func holdsTheKey(a *Answer) bool {
	if a == nil || a.Problem == nil {
		return false
	}
	p := a.Problem
	return p.Code != "" && p.Code != codeQuotaExhausted && p.Hinted && p.RetryAfter > 0 &&
		(a.Status == http.StatusTooManyRequests || a.Status == http.StatusServiceUnavailable) &&
		!namesALevel(a.Status, p)
}
