package budget

import (
	"math"
	"time"
)

// A level the server rarely names (RateLimit carries only the narrowest
// policy, so the org level of a key that others drain may show only in a
// refusal) can hold calls on a word of the server that is long out of date.
// When a call is held by such a level, the client asks GET
// /v1/rate_limit (StatusFor) and hands the answer to ObserveStatus.
const (
	// StaleAfter is how old the server's last word on a level may be
	// before a call held by it makes the client ask for the status.
	StaleAfter = 30 * time.Second
	// statusEvery spaces the status requests of one key.
	statusEvery = 30 * time.Second
	// idleStatusEvery is how old the word on a level of the API that a
	// status takes nothing from (write, delete, egress) may be, and how
	// far apart the status requests about it are, while it holds calls
	// and no other call of the key has left for as long: the key is idle,
	// so the point a status costs is little against what it does not
	// use, and an empty level the server does not name in its answers may
	// refill long before the moment its last word named. For a level that
	// takes longer to refill a unit (10 deletes a minute), that time.
	idleStatusEvery = 5 * time.Second
	// minStatusRefill is how much a level must refill between two status
	// requests to be asked about: a status costs a point, which a level
	// that refills less (a tiny quota) cannot spare.
	minStatusRefill = 20
	// maxStatusGap bounds the time between two status requests about a
	// level that refused each (statusRefusedLocked).
	maxStatusGap = 16 * statusEvery
)

// statusRequest is what the key's status requests (StatusFor) go by.
type statusRequest struct {
	at     time.Time     // when StatusFor last started one
	sentAt time.Time     // when the last budgeted call other than a status was admitted
	done   chan struct{} // closes when that request ends; nil when none is on its way
	level  *level        // the level that request was about
}

// LevelStatus is one level of the key's rate-limit status as the server
// reported it (GET /v1/rate_limit).
type LevelStatus struct {
	Name      string
	Remaining float64
	Capacity  float64 // what the level holds when full, when the server says (0: its quota)
	Reset     time.Duration
	Quota     float64       // the quota it reported; 0: not said
	Window    time.Duration // the quota's window; 0: not said
}

// statusDueLocked is when a call held by l may next ask for the status
// about it (due), and when the server's word on l is too old for the calls
// l holds (stale: due without the spacing of status requests): once l's
// word is StaleAfter old, statusEvery after the last status, and not before
// a refusal's wait on it is over (no status lifts that), for a level that
// refills at least minStatusRefill in statusEvery, which a status costs too
// much of otherwise; and for a level the status takes nothing from, while
// the key is idle, idleStatusEvery (or the time it takes to refill a unit,
// if longer) after the last status (twice the gap after a refused one,
// statusRefusedLocked), word or call. Zero when never.
func (s *State) statusDueLocked(l *level) (due, stale time.Time) {
	if l == nil {
		return due, stale
	}
	if l.grossRate()*statusEvery.Seconds() >= minStatusRefill {
		stale = later(l.seenAt.Add(StaleAfter), l.holdUntil)
		due = later(stale, later(l.statusAt.Add(l.statusGap), s.status.at.Add(statusEvery)))
	}
	if l.known && l.unit != "points" && l.grossRate() > 0 {
		// idleStatusEvery, or the time l takes to refill a unit if that
		// is longer, after the later of the server's last word on l and
		// the last call of the key other than a status.
		every := max(idleStatusEvery, durationOf(1/l.grossRate()))
		idle := later(later(l.seenAt, s.status.sentAt).Add(every), l.holdUntil)
		stale = sooner(stale, idle)
		due = sooner(due, later(idle, later(s.status.at, l.statusAt).Add(max(every, l.statusGap))))
	}
	return due, stale
}

// sooner is the earlier of a and b, where zero is never.
func sooner(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// statusRefusedLocked hears that the level refused the status request
// about it: the model held its calls rightly, and the next status about
// it, which would be refused as well while the level stays empty, waits
// twice as long as the last, up to maxStatusGap. A status that finds more
// left than the model believed resets the gap (ObserveStatus).
func (l *level) statusRefusedLocked() {
	l.statusGap = min(max(2*l.statusGap, 2*statusEvery), maxStatusGap)
}

// StatusFor tells a caller held by the named level whether the server's
// word on it is stale and a status request should put it right
// (statusDueLocked): it returns the channel that closes when that request
// has ended, and start true when the caller must make it (and then call
// StatusDone), false when one is on its way already. It returns nil for a
// level whose word is fresh (statusDueLocked's stale), and starts at most one
// request per statusEvery, or per idleStatusEvery while the key is idle.
func (s *State) StatusFor(name string, now time.Time) (done <-chan struct{}, start bool) {
	s = s.lock()
	defer s.mu.Unlock()
	l := s.levels[name]
	due, stale := s.statusDueLocked(l)
	if due.IsZero() || now.Before(stale) {
		return nil, false
	}
	if s.status.done != nil {
		return s.status.done, false
	}
	if now.Before(due) {
		return nil, false
	}
	s.status.at, l.statusAt, s.status.level = now, now, l
	s.status.done = make(chan struct{})
	return s.status.done, true
}

// StatusDone ends the status request StatusFor started, answered or not,
// and lets the calls that wait for it look again; sent says whether it
// left. One the budget did not let out takes no turn: the next call held
// by a stale level may ask at once.
func (s *State) StatusDone(sent bool) {
	s = s.lock()
	defer s.mu.Unlock()
	if !sent {
		s.status.at = time.Time{}
		if s.status.level != nil {
			s.status.level.statusAt = time.Time{}
		}
	}
	if s.status.done != nil {
		close(s.status.done)
		s.status.done = nil
	}
}

// ObserveKeyStatus takes a rate-limit status's word on the key as a whole:
// a lockout until lockedUntil (zero: none) holds every call, as a refusal
// naming it does, for at most MaxLockout; refusals is what the server
// counted in the last RefusalWindow, which the lockout guard counts as its
// own where it knows of fewer (another process's, another client's).
func (s *State) ObserveKeyStatus(lockedUntil time.Time, refusals int) {
	s = s.lock()
	defer s.mu.Unlock()
	now := time.Now()
	if lockedUntil.After(now) {
		s.lockedUntil = later(s.lockedUntil, now.Add(min(lockedUntil.Sub(now), MaxLockout)))
	}
	s.pruneRefusalsLocked(now)
	for range min(refusals, RefusalLimit) - len(s.refusals) {
		s.refusals = append(s.refusals, now)
	}
}

// ObserveStatus takes the server's word on every level of a rate-limit
// status (parallel's quota sets the slots in flight), the answer to c (a
// Status call, or nil): what it reports left, less what the server cannot
// have counted when it answered, the attempts in flight and what was
// charged to the level after c was admitted (a call sent beside c may have
// reached the server after it). A refusal's wait still
// holds its level until it ends.
func (s *State) ObserveStatus(c *Call, levels []LevelStatus) {
	s = s.lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, st := range levels {
		if st.Name == Parallel {
			s.setParallelLocked(st.Quota)
			continue
		}
		l := s.levels[st.Name]
		if l == nil {
			continue
		}
		chargedSince, freedSince := 0.0, -1.0
		if c != nil {
			chargedSince, _ = c.chargedSince(l, true)
			freedSince = c.freedSince(l, now)
		}
		if l == s.status.level && st.Remaining-l.inflight-chargedSince > l.available(now)+1 {
			l.statusGap = 0 // the model held calls the level had room for
		}
		if st.Quota > 0 && st.Quota != l.docQuota || st.Window > 0 && st.Window != l.window {
			l.endPrior() // another plan
		}
		reset := min(st.Reset, maxHold)
		l.observe(st.Remaining, max(st.Remaining, st.Capacity), chargedSince, freedSince, int64(math.Ceil(reset.Seconds())), false, now)
		l.keepOwe(st.Remaining, now)
		l.reported = reported{remaining: st.Remaining, reset: reset, at: now, others: s.othersFrom(c)}
		if reset > 0 {
			l.said(now)
		} else {
			l.moment.left = l.tokens // no moment said: the last one stands
		}
		l.gate.wakeHead()
	}
}
