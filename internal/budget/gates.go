package budget

import "time"

// Reasons a call waits, as WaitEvent and the hold errors name them (besides
// a level's name).
const (
	ReasonInFlight = "in-flight"
	ReasonPace     = "pace"
	ReasonGuard    = "refusal-guard"
	ReasonLockout  = Lockout
	ReasonServer   = "server-wait" // a wait the server asked of every call of the key
	ReasonStore    = "shared-store"
)

// holdLocked returns the first gate that holds c now, how long at least it
// must wait there (forever when only a release or an answer can help) and
// why; nil when c may go (or, with the shared store active, may ask it).
func (s *State) holdLocked(c *Call, now time.Time) (*gate, time.Duration, string) {
	w := &c.w
	pausedUntil := s.lockedUntil
	why := ReasonLockout
	if c.Budgeted && s.heldUntil.After(pausedUntil) {
		pausedUntil, why = s.heldUntil, s.heldWhy
	}
	if now.Before(pausedUntil) || s.pauseGate.ahead(w) {
		return &s.pauseGate, max(pausedUntil.Sub(now), 0), why
	}
	s.pruneRefusalsLocked(now)
	share := s.shareLocked(now)
	guard := RefusalLimit
	if share.on {
		guard = share.refusals
	}
	if len(s.refusals)+s.reserved >= guard || s.guardGate.ahead(w) {
		d := forever
		if len(s.refusals)+s.reserved < guard {
			d = 0
		} else if len(s.refusals) > 0 {
			d = s.refusals[0].Add(RefusalWindow).Sub(now)
		}
		if share.on {
			d = min(d, s.reprobeLocked(now))
		}
		return &s.guardGate, d, ReasonGuard
	}
	if !c.Budgeted {
		return nil, 0, ""
	}
	if s.sharedActiveLocked(now) {
		if s.storeGate.ahead(w) {
			return &s.storeGate, 0, ReasonStore
		}
		if _, held := s.slowStartDueLocked(now); held || s.slotGate.ahead(w) {
			return &s.slotGate, forever, ReasonInFlight
		}
		if share.on && s.inflight >= share.slots {
			return &s.slotGate, s.reprobeLocked(now), ReasonInFlight
		}
		return nil, 0, ""
	}
	if share.on && now.Before(s.drainUntil) {
		return &s.slotGate, s.drainUntil.Sub(now), ReasonInFlight
	}
	s.adaptLocked(now)
	for _, t := range s.takesLocked(c) {
		l := t.l
		l.refill(now)
		d := max(l.holdUntil.Sub(now), 0)
		if c.PastLevels && d == 0 && now.Sub(l.seenAt) >= StaleAfter {
			continue
		}
		if d == 0 {
			d = l.wait(l.need(t.amount), now)
		}
		why := l.name
		if d == 0 {
			if l.pace.adapt(now) {
				l.gate.wakeHead()
			}
			rate := l.rate(now)
			if l.pace.spread, l.pace.minBurst = l.spreads(), spreadBurst*l.size(); l.pace.spread {
				rate = l.spreadRate(now)
			}
			if d = l.pace.wait(l.need(t.amount), rate, now); d > 0 {
				why = ReasonPace // the level's pace, not what the level holds: no status would help
			}
		}
		if d > 0 || l.gate.ahead(w) && !l.backfills(l.gate.head(), t.amount, now) {
			if w.at != &l.gate {
				w.need = l.need(t.amount)
			}
			return &l.gate, d, why
		}
	}
	if !c.PastLevels {
		amount, rate := s.paceUnitLocked(c, now)
		d := s.pace.wait(amount, rate, now)
		if until := s.levels[Key].observedUntil; d > 0 && now.Before(until) {
			d = min(d, until.Sub(now)) // the rate changes then: look again
		}
		if d > 0 || s.paceGate.ahead(w) {
			return &s.paceGate, d, ReasonPace
		}
	}
	return s.slotLocked(w, share, now)
}
