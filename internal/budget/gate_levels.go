package budget

import "time"

// levelsLocked holds c at the first level it takes from that holds it: a
// refusal's wait on the level, the level's tokens, or the level's pace
// (its spread when it frees in steps; not the first call once a refusal's
// wait has ended, keepsPromise); also behind the calls that wait for
// the level already, unless it may pass the first (level.backfills). A
// PastLevels call passes the levels others take from whose word is
// StaleAfter old; of a level of this key alone the model counts every take,
// and a status it holds no room for would be refused.
func (s *State) levelsLocked(c *Call, now time.Time) (*gate, time.Duration, string) {
	w := &c.w
	for _, t := range s.takesLocked(c) {
		l := t.l
		l.refill(now)
		d := max(l.holdUntil.Sub(now), 0)
		if c.PastLevels && d == 0 && now.Sub(l.seenAt) >= StaleAfter && (l.shared || l.pooled || !l.known) {
			continue
		}
		if d == 0 {
			d = l.wait(l.need(t.amount), now)
		}
		why := l.name
		if d == 0 && !l.keepsPromise(now) {
			if l.pace.adapt(now) {
				l.gate.wakeHead()
			}
			if d = l.pace.wait(l.need(t.amount), l.paceRate(now), now); d > 0 {
				why = ReasonPace // the level's pace, not what the level holds: no status would help
			}
		}
		if d > 0 || l.gate.ahead(w) && !l.backfills(l.gate.head(), t.amount, now) {
			if w.at != &l.gate {
				// Out of the gate it waited in first: that gate's queue
				// of its size is found by the need it entered with.
				w.leave()
				w.need = l.need(t.amount)
			}
			return &l.gate, d, why
		}
	}
	return nil, 0, ""
}
