package budget

import (
	"context"
	"time"
)

// No request leaves after an answer that asks to wait, also not one
// admitted before that answer was read: a call admitted while another's
// refusal was on its way may wait inside the transport for a connection,
// and get the one the refusal came on the moment its body is read. At the
// last moment before its request is written, an attempt asks Bound whether
// a wait announced since it was admitted binds it.

// readingWait bounds how long a request waits at its last moment for
// refusals of the key that are still being read.
const readingWait = time.Second

// reading counts the refusals of a key whose answers are being read; done
// closes when the count falls to zero.
type reading struct {
	n     int
	done  chan struct{}
	until time.Time // the latest end of a wait their headers asked (Retry-After)
}

// Reading marks that the answer to t is a refusal (a 429 or 503) whose body
// is still being read, its headers asking for a wait of wait (Retry-After;
// zero when they ask none): until Finish or Unanswered ends t, a request of the
// key about to be written waits for it (Bound), since the body may ask for
// a wait that its headers did not say. Ended by Unanswered, the refusal
// never read, its headers' wait holds the key's budgeted calls.
func (t *Ticket) Reading(wait time.Duration) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.reading || t.ended {
		return
	}
	t.reading = true
	t.readUntil = time.Now().Add(min(max(wait, 0), maxHold))
	if s.read.n == 0 {
		s.read.done, s.read.until = make(chan struct{}), time.Time{}
	}
	s.read.n++
	s.read.until = later(s.read.until, t.readUntil)
}

// endReadingLocked ends t's mark of Reading, if it has one.
func (t *Ticket) endReadingLocked() {
	s := t.s
	t.ended = true
	if !t.reading {
		return
	}
	t.reading = false
	if s.read.n--; s.read.n == 0 {
		close(s.read.done)
	}
}

// Bound is for the last moment before t's request is written: it reports
// how long t's call must still wait for a wait the server announced since
// the call was admitted (a lockout, an exhausted quota the call would
// meet, a wait asked of every call of the key, a refusal's wait on a level
// the call takes from), and why (a Reason or the level's name); zero when
// none binds.
// It first waits for the key's refusals still being read (Reading), at most
// readingWait or until ctx ends; a budgeted call that one is still being
// read then binds is held as long as its headers asked, as the answer may
// be to a call of any level.
func (t *Ticket) Bound(ctx context.Context) (time.Duration, string) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	deadline := time.Now().Add(readingWait)
	for s.read.n > 0 && !t.reading && ctx.Err() == nil {
		d := time.Until(deadline)
		if d <= 0 {
			break
		}
		done := s.read.done
		s.mu.Unlock()
		timer := time.NewTimer(d)
		select {
		case <-done:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		s.mu.Lock()
	}
	until, why := s.lockedUntil, ReasonLockout
	bind := func(u time.Time, reason string) {
		if u.After(until) {
			until, why = u, reason
		}
	}
	if e, ok := s.blockedLocked(t.c, time.Now()).(*ExhaustedError); ok {
		bind(e.Until, e.Policy)
	}
	if t.c.Budgeted {
		bind(s.heldUntil, ReasonServer)
		if s.read.n > 0 && !t.reading {
			bind(s.read.until, ReasonServer)
		}
		for _, tk := range t.taken {
			bind(tk.l.holdUntil, tk.l.name)
		}
	}
	if d := time.Until(until); d > 0 {
		return d, why
	}
	return 0, ""
}
