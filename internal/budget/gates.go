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
// The gates come in the order of the package's doc; an unbudgeted call
// meets only the first two.
func (s *State) holdLocked(c *Call, now time.Time) (*gate, time.Duration, string) {
	w := &c.w
	if g, d, why := s.pauseLocked(c, now); g != nil {
		return g, d, why
	}
	share := s.shareLocked(now)
	if g, d, why := s.guardLocked(w, share, now); g != nil {
		return g, d, why
	}
	if !c.Budgeted {
		return nil, 0, ""
	}
	if g, d, why := s.scopeLocked(c, now); g != nil {
		return g, d, why
	}
	if s.sharedActiveLocked(now) {
		return s.sharedLocked(c, share, now)
	}
	if g, d, why := s.drainingLocked(share, now); g != nil {
		return g, d, why
	}
	s.adaptLocked(now)
	g, d, why := s.levelsLocked(c, now)
	if g == nil {
		g, d, why = s.paceLocked(c, now)
	}
	if g == nil {
		return s.slotLocked(w, share, now)
	}
	if share.on {
		d = min(d, s.reprobeLocked(now)) // the store back may let it go at once
	}
	return g, d, why
}
