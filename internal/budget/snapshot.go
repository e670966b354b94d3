package budget

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// Snapshot is the local view of the key's budget.
type Snapshot struct {
	Levels      []LevelSnapshot
	InFlight    int
	InFlightCap int
	Pace        float64
	Cuts        int
	Waiting     int
	Waits       int64
	Waited      time.Duration
	Refusals    int
	PausedUntil time.Time // the later of a lockout and a wait the server asked of every call
}

// LevelSnapshot is the model of one level.
type LevelSnapshot struct {
	Name              string
	Unit              string
	Quota             int
	Share             float64
	Window            time.Duration
	Capacity          int
	Remaining         float64
	FullIn            time.Duration
	ReportedRemaining float64
	ReportedReset     time.Duration
	ReportedAt        time.Time
	HeldUntil         time.Time
	Waiting           int
	// Scope says which calls the level holds: "" for the documented scope,
	// else the operations the server tied it to, "none" for a policy that is
	// only announced, and "partition PK of TARGET" for one partition.
	Scope string
}

// Snapshot returns the local view of the key's budget.
func (s *State) Snapshot() Snapshot {
	s = s.live()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.adaptLocked(now)
	s.pruneRefusalsLocked(now)
	b := Snapshot{
		InFlight:    s.inflight,
		InFlightCap: s.pace.capOf(s.parallel),
		Pace:        min(s.pace.share, 1),
		Cuts:        s.pace.cuts,
		Waiting:     s.waiting,
		Waits:       s.waits,
		Waited:      s.waited,
		Refusals:    len(s.refusals),
		PausedUntil: later(s.lockedUntil, s.heldUntil),
	}
	for _, l := range s.order {
		l.refill(now)
		ls := LevelSnapshot{
			Name: l.name, Unit: l.unit, Quota: int(l.quota), Share: l.share, Window: l.window,
			Capacity: int(max(l.fitSize(), l.quota)), Remaining: l.available(now), FullIn: l.fullIn(now),
			ReportedRemaining: l.reported.remaining, ReportedReset: l.reported.reset, ReportedAt: l.reported.at,
			Waiting: len(l.gate.q.ws),
		}
		if now.Before(l.holdUntil) {
			ls.HeldUntil = l.holdUntil
		}
		if !l.known {
			switch {
			case len(l.scope.ops) == 0:
				ls.Scope = "none"
			case l.partition != "":
				ls.Scope = "partition " + l.partition + " of " + l.target
			default:
				ls.Scope = strings.Join(slices.Sorted(maps.Keys(l.scope.ops)), ",")
			}
		}
		b.Levels = append(b.Levels, ls)
		if l.name == Write {
			// The server lists parallel after write; the model keeps it
			// as the slots in flight, not as a level.
			b.Levels = append(b.Levels, LevelSnapshot{Name: Parallel, Unit: "concurrent-requests", Quota: s.parallel,
				Share: 1, Capacity: s.parallel, Remaining: float64(s.parallel - s.inflight)})
		}
	}
	return b
}
