package budget

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// stepsPolicy is a policy "burst" the contract does not document, counted
// per minute as a server that frees in steps counts it: in fixed windows
// (t until the window resets), or in a sliding log whose t is until its
// oldest take leaves (more frees then) or until its newest does (it is full
// again then).
type stepsPolicy struct {
	shape string // "window", "log" or "full"
	quota float64
	unit  string
	start time.Time
	log   []stepsTake
}

type stepsTake struct {
	at time.Time
	n  float64
}

// used prunes the takes that no longer count and sums the others.
func (p *stepsPolicy) used(now time.Time) float64 {
	cut := now.Add(-time.Minute)
	if p.shape == "window" {
		cut = p.start.Add(now.Sub(p.start).Truncate(time.Minute)).Add(-1)
	}
	for len(p.log) > 0 && !p.log[0].at.After(cut) {
		p.log = p.log[1:]
	}
	sum := 0.0
	for _, e := range p.log {
		sum += e.n
	}
	return sum
}

// reset is t: when the window resets, the oldest take leaves or the newest.
func (p *stepsPolicy) reset(now time.Time) time.Duration {
	switch {
	case p.shape == "window":
		return p.start.Add(now.Sub(p.start).Truncate(time.Minute) + time.Minute).Sub(now)
	case len(p.log) == 0:
		return 0
	case p.shape == "log":
		return p.log[0].at.Add(time.Minute).Sub(now)
	}
	return p.log[len(p.log)-1].at.Add(time.Minute).Sub(now)
}

// wait is how long until n more fit.
func (p *stepsPolicy) wait(n float64, now time.Time) time.Duration {
	if p.shape == "window" {
		return p.reset(now)
	}
	over := p.used(now) + n - p.quota
	for _, e := range p.log {
		if over -= e.n; over <= 1e-9 {
			return e.at.Add(time.Minute).Sub(now)
		}
	}
	return time.Minute
}

// serve answers the attempt of tk, which takes n now: RateLimit on every
// answer, and a refusal with the exact wait when n does not fit.
func (p *stepsPolicy) serve(tk *Ticket, n float64, now time.Time) bool {
	used := p.used(now)
	ok := used+n <= p.quota+1e-9
	if ok {
		p.log = append(p.log, stepsTake{now, n})
		used += n
	}
	limit := fmt.Sprintf(`"burst";r=%d;t=%d`, int(p.quota-used), int64(math.Ceil(p.reset(now).Seconds())))
	a := answer(fmt.Sprintf(`"burst";q=%g;w=60;qu=%q`, p.quota, p.unit), limit)
	if !ok {
		a = refusal(http.StatusTooManyRequests, codeRateLimited, "burst", p.wait(n, now).Round(time.Millisecond)+time.Millisecond)
		a.Header.Set("RateLimit", limit)
	}
	tk.Finish(a)
	return ok
}

// TestALevelRefusedBeforeItsMomentRefillsOnlyFromThen (rule 1): a policy
// the contract does not document is refilled between answers at its
// quota's rate, since others may take from it too. Counted in steps, it
// frees nothing before the moment its word named: one reader who calls as
// soon as the model lets it was refused once in every window of 2 reads,
// and several times a minute on a sliding log of 10 whose reads went at
// once. A refusal of a call that this refill let go before the moment
// (level.early) shows that; from then on the level gains nothing between
// a word and its moment, and refills from then until the next word
// (level.learnEarly, level.defers); a t that says when the level is full
// again is cut short to when this key's oldest take leaves the window
// (level.momentOf). Over 30 minutes the reader is refused at most twice.
// It makes nearly every call a window allows and 90 % of what a sliding log
// allows, which the model spreads at its rate; with 7-point searches on a
// log of 21 points whose t names when its oldest take leaves, 75 %: the
// unit its moment frees is not a call, and the refill after the moment
// makes up the rest. The shared store is told so with every word: no
// process refills the level before the word's moment (rule 7).
func TestALevelRefusedBeforeItsMomentRefillsOnlyFromThen(t *testing.T) {
	read := func() *Call { return call(ops.GetContact, "") }
	search := func() *Call { return call(ops.ListContacts, "q=a") }
	for _, tc := range []struct {
		shape, unit string
		quota       float64
		call        func() *Call
		allowed     int     // what the policy allows the reader in 30 minutes
		least       float64 // the part of it the reader makes
	}{
		{"window", "requests", 2, read, 60, 0.95},
		{"log", "requests", 10, read, 300, 0.9},
		{"full", "requests", 10, read, 300, 0.9},
		{"log", "points", 21, search, 90, 0.75},
		{"window", "points", 21, search, 90, 0.95},
	} {
		t.Run(fmt.Sprintf("%s of %g %s", tc.shape, tc.quota, tc.unit), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New()
				start := time.Now()
				p := &stepsPolicy{shape: tc.shape, quota: tc.quota, unit: tc.unit, start: start}
				accepted, refused := 0, 0
				for time.Since(start) < 30*time.Minute {
					c := tc.call()
					tk, _ := admitAt(t, s, c)
					n := 1.0
					if tc.unit == "points" {
						n = c.Cost
					}
					if p.serve(tk, n, time.Now()) {
						accepted++
					} else {
						refused++
					}
				}
				if refused > 2 || float64(accepted) < tc.least*float64(tc.allowed) {
					t.Errorf("30 minutes: %d calls accepted of the %d the policy allows, %d refused; want at least %.0f %%, at most 2 refused",
						accepted, tc.allowed, refused, 100*tc.least)
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				h, rel := http.Header{}, &release{}
				h.Set("RateLimit", `"burst";r=0;t=30`)
				s.observeLocked(tc.call(), h, time.Now(), rel, true)
				if len(rel.Left) != 1 || !rel.Left[0].Steps || rel.Left[0].Rate != 0 {
					t.Errorf("the shared store is told of a word %+v, want Steps and no refill: no process refills the level before its moment", rel.Left)
				}
			})
		})
	}
}
