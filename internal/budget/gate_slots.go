package budget

import "time"

// SlowStartHold is how long the call out alone in slow start (no answer
// yet) holds the key's other calls: then slow start ends, and calls go up
// to the adaptive cap (at most the parallel quota), so that calls that
// never get an answer hold the others for SlowStartHold at most, however
// many there are.
const SlowStartHold = 30 * time.Second

// slowStart is where slow start stands: the key's first call goes alone,
// and on its answer a flight of calls up to the cap, which the calls after
// it wait for (slowStartDueLocked).
type slowStart struct {
	learned bool          // slow start is over: an answer came, or SlowStartHold passed without one
	at      time.Time     // when slow start let its call out alone
	flight  int           // calls of the flight not ended yet
	left    int           // the calls the flight still takes: the cap at its first answer, less those it took
	hold    time.Duration // how long at most the flight holds the calls after it once its last call went
	until   time.Time     // the flight holds the calls after it until then at most
}

// slowStartDueLocked reports whether slow start holds calls, and how long
// at most until it ends: while the call let out alone has no answer, up to
// SlowStartHold (then slow start ends without an answer); after that
// answer, once the flight that goes on it (the first calls admitted after
// it, as many as the cap on calls in flight) is full, while the flight has
// calls unanswered, up to twice the first call's round trip after its last
// call went, so that the refusals of a limiter in front that refused part
// of the flight are read before more calls go.
func (s *State) slowStartDueLocked(now time.Time) (time.Duration, bool) {
	until := s.slowStart.until
	switch {
	case !s.slowStart.learned && s.inflight > 0:
		if until = s.slowStart.at.Add(SlowStartHold); !until.After(now) {
			s.slowStart.learned = true
		}
	case !s.slowStart.learned || s.slowStart.flight == 0 || s.slowStart.left > 0:
		return 0, false
	}
	d := until.Sub(now)
	return d, d > 0
}

// openFlightLocked lets slow start's flight go on the first answer, to a
// call sent at start.
func (s *State) openFlightLocked(start, now time.Time) {
	s.slowStart.left, s.slowStart.hold = s.pace.capOf(s.parallel), min(2*now.Sub(start), SlowStartHold)
}

// joinFlightLocked counts c, admitted now, into slow start's flight if it
// passed the gates while the flight took calls.
func (s *State) joinFlightLocked(c *Call, now time.Time) {
	if !c.flight {
		return
	}
	s.slowStart.flight++
	s.slowStart.until = now.Add(s.slowStart.hold)
	s.slowStart.left = max(s.slowStart.left-1, 0)
}

// leaveFlightLocked takes t, answered or given up on, out of slow start's
// flight if it went in it (the end of a budgeted call, as each of the
// flight is, wakes the slots).
func (s *State) leaveFlightLocked(t *Ticket) {
	if t.flight {
		s.slowStart.flight--
	}
}

// slotLocked holds w while the calls in flight are at the adaptive cap, or
// at the slots of the fallback share while that applies.
func (s *State) slotLocked(w *waiter, share fallbackShare, now time.Time) (*gate, time.Duration, string) {
	if _, held := s.slowStartDueLocked(now); s.slowStart.learned && held {
		return &s.slotGate, forever, ReasonInFlight // the flight's answers end it (or the timer of hold.go)
	}
	limit := 1 // slow start: one call until an answer has shown the server's policies
	if s.slowStart.learned {
		limit = s.pace.capOf(s.parallel)
	}
	if g, d, why := s.overShareLocked(share, now); g != nil {
		return g, d, why
	}
	if s.inflight >= limit || s.slotGate.ahead(w) {
		return &s.slotGate, s.pace.untilStep(now), ReasonInFlight // until a call ends or a cut cap steps up
	}
	return nil, 0, ""
}

// overShareLocked holds a call while the calls in flight fill the slots of
// the fallback share, until the store may be tried again.
func (s *State) overShareLocked(share fallbackShare, now time.Time) (*gate, time.Duration, string) {
	if share.on && s.inflight >= share.slots {
		return &s.slotGate, s.reprobeLocked(now), ReasonInFlight
	}
	return nil, 0, ""
}

// lingerLocked is how much longer the slot of t, which was sent and got no
// answer, stays taken: until a call as long as the longest that ended
// lately (the drain, storeResult) would have ended, at most leaseTTL. The server
// counts a request in flight until it is done with it, whether or not
// the client still waits for the answer, so a slot freed when the client
// stops waiting lets one call too many reach it.
func (s *State) lingerLocked(t *Ticket, now time.Time) time.Duration {
	return min(s.rollLongestLocked(now)-now.Sub(t.start), leaseTTL)
}

// freeSlot frees the slot of an attempt whose linger ended.
func (s *State) freeSlot(unleased, leased bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if leased {
		s.lingering--
	}
	s.freeSlotLocked(unleased)
	s.slotGate.wakeHead()
}

// freeSlotLocked frees the slot of an attempt that ended, unleased when
// the store gave it no lease.
func (s *State) freeSlotLocked(unleased bool) {
	s.inflight--
	if unleased {
		s.unleased--
	}
}
