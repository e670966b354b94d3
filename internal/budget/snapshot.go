package budget

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// Snapshot is the local view of the key's budget.
type Snapshot struct {
	Levels      []LevelSnapshot // in the order the levels were made; parallel after write
	InFlight    int             // budgeted attempts in flight
	InFlightCap int             // the adaptive cap on them, at most the parallel quota
	Pace        float64         // the share of the key's rate that calls speaking of the key as a whole may take: 1 uncut
	Cuts        int             // the key's pace was cut so many times so far
	Waiting     int             // calls waiting in Admit
	Waits       int64           // calls that waited so far
	Waited      time.Duration   // how long they waited in all
	Refusals    int             // 429 answers in the last RefusalWindow
	PausedUntil time.Time       // the later of a lockout and a wait the server asked of every call
}

// LevelSnapshot is the model of one level.
type LevelSnapshot struct {
	Name              string
	Unit              string        // points, requests, records, concurrent-requests
	Quota             int           // per Window
	Share             float64       // the part of the quota this key may use: of this process's keys that share it, its part; while the shared store is down, of this process's part
	Window            time.Duration // the quota's window
	Capacity          int           // what it holds when full (level.size), at least the quota
	Remaining         float64       // what the model believes is left now
	FullIn            time.Duration // how long until it is full again and no refusal's wait holds it (level.fullIn)
	ReportedRemaining float64       // r of the server's last word on it
	ReportedReset     time.Duration // t of that word
	ReportedAt        time.Time     // when that word came; zero when none did
	HeldUntil         time.Time     // the end of a refusal's wait on it; zero when none runs
	Waiting           int           // calls waiting for it
	// Scope says which calls the level holds: "" for the documented scope,
	// else the operations the server tied it to, "none" for a policy that is
	// only announced, and "partition PK of TARGET" for one partition.
	Scope string
}

// Snapshot returns the local view of the key's budget.
func (s *State) Snapshot() Snapshot {
	s = s.lock()
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
			Name: l.name, Unit: l.unit, Quota: int(l.quota), Share: l.share * l.part(), Window: l.window,
			Capacity: int(max(l.size(), l.quota)), Remaining: l.available(now), FullIn: l.fullIn(now),
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
