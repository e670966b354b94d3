package budget

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
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

// TestACallThatWentOnTheServersWordIsNotEarly (rule 1): a learned policy
// "burst" (10 a minute, t until full, as a bucket's) is tied to reads, and
// its last word left nothing or 1. A read then goes on the server's own
// word, not on the refill between words: the 1 a word left after a read
// that took it never left (its take given back); the 1 a status answer
// said is left; or the need a refusal's wait promised. It did not go early
// (level.early), so its refusal (another client took the unit) says
// nothing of whether the level refills between words: after the refusal's
// wait and a read that empties the level, the next read waits for the
// refill of one unit (6 s), as after a read on a word ("plain").
func TestACallThatWentOnTheServersWordIsNotEarly(t *testing.T) {
	for _, how := range []string{"plain", "a take given back", "a status word", "a refusal's promise"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New()
				read := func() *Call { return call(ops.GetContact, "") }
				refused := func() Answer {
					a := refusal(http.StatusTooManyRequests, codeRateLimited, "burst", 6*time.Second)
					a.Header.Set("RateLimit", `"burst";r=0;t=60`)
					return a
				}
				admitNow(t, s, call(ops.GetMe, "")).Finish(answer(`"key";q=300;w=60, "burst";q=10;w=60`, `"burst";r=10;t=0`))
				time.Sleep(time.Second)
				admitNow(t, s, read()).Finish(answer("", `"burst";r=9;t=6`))
				time.Sleep(time.Second)
				admitNow(t, s, read()).Finish(answer("", `"burst";r=8;t=12`))
				time.Sleep(time.Second)
				last := `"burst";r=1;t=54`
				if how == "a status word" {
					last = `"burst";r=0;t=60`
				}
				admitNow(t, s, read()).Finish(answer("", last))
				if scope := scopeOf(s, "burst"); scope != read().kind() {
					t.Fatalf("burst scope %q, want reads tied (the test's premise)", scope)
				}
				time.Sleep(time.Second)
				var tk *Ticket
				switch how {
				case "a take given back":
					admitNow(t, s, read()).Unanswered(false, false)
				case "a status word":
					s.ObserveStatus(nil, []LevelStatus{{Name: "burst", Remaining: 1, Reset: 54 * time.Second}})
				case "a refusal's promise":
					admitNow(t, s, read()).Finish(refused())
					var waited time.Duration
					if tk, waited = admitAt(t, s, read()); waited > 7*time.Second {
						t.Fatalf("the read after the refusal's wait waited %v", waited)
					}
				}
				if tk == nil {
					tk = admitNow(t, s, read())
				}
				tk.Finish(refused())
				tk, waited := admitAt(t, s, read())
				if waited > 7*time.Second {
					t.Fatalf("the read after the refusal's wait waited %v", waited)
				}
				tk.Finish(answer("", `"burst";r=0;t=60`))
				if _, waited := admitAt(t, s, read()); waited > 7*time.Second {
					t.Errorf("a read on the emptied level waited %v, want about 6 s (the quota's refill of one unit)", waited)
				}
			})
		})
	}
}

// refusedEarly ties a learned policy "burst" of quota a minute to reads,
// empties it (r=0;t=59) and has a read that its refill let go before that
// moment refused with wait, so that the level refills only from its
// moments (level.learnEarly).
func refusedEarly(t *testing.T, s *State, quota int, wait time.Duration) {
	t.Helper()
	read := func() *Call { return call(ops.GetContact, "") }
	admitNow(t, s, call(ops.GetMe, "")).Finish(answer(fmt.Sprintf(`"key";q=300;w=60, "burst";q=%d;w=60`, quota), fmt.Sprintf(`"burst";r=%d;t=0`, quota)))
	time.Sleep(time.Second)
	admitNow(t, s, read()).Finish(answer("", fmt.Sprintf(`"burst";r=%d;t=60`, quota-1)))
	time.Sleep(time.Second)
	admitNow(t, s, read()).Finish(answer("", `"burst";r=0;t=59`))
	if scope := scopeOf(s, "burst"); scope != read().kind() {
		t.Fatalf("burst scope %q, want reads tied (the test's premise)", scope)
	}
	tk, _ := admitAt(t, s, read())
	a := refusal(http.StatusTooManyRequests, codeRateLimited, "burst", wait)
	a.Header.Set("RateLimit", fmt.Sprintf(`"burst";r=0;t=%d`, int(wait.Seconds())))
	tk.Finish(a)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.levels["burst"].resets {
		t.Fatalf("no resets after an early read's refusal (the test's premise)")
	}
}

// TestALaterWordOnALevelThatRefillsFromItsMomentsBinds (rule 1): a
// learned policy that refills only from its moments is emptied, and the
// server's later words say when a read may go again. One shows it holds
// more than its quota (r=19 of 10): a bucket, which refills as it goes, so
// that emptied it frees a read in 6 s at its quota's rate, not at the
// moment of its word (t until full, 120 s). Another is a status answer 30 s
// after a word of r=0;t=60, saying it frees more in 5 s: a read goes then,
// not at the older word's moment 25 s later.
func TestALaterWordOnALevelThatRefillsFromItsMomentsBinds(t *testing.T) {
	read := func() *Call { return call(ops.GetContact, "") }
	for _, tc := range []struct {
		name  string
		quota int
		words func(s *State)
	}{
		{"a bucket's", 10, func(s *State) {
			admitNow(t, s, read()).Finish(answer("", `"burst";r=19;t=6`))
			time.Sleep(time.Second)
			admitNow(t, s, read()).Finish(answer("", `"burst";r=0;t=120`))
		}},
		{"a status answer's", 40, func(s *State) {
			admitNow(t, s, read()).Finish(answer("", `"burst";r=0;t=60`))
			time.Sleep(30 * time.Second)
			s.ObserveStatus(nil, []LevelStatus{{Name: "burst", Remaining: 0, Reset: 5 * time.Second}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New()
				refusedEarly(t, s, tc.quota, 10*time.Second)
				time.Sleep(2 * time.Minute)
				tc.words(s)
				if _, waited := admitAt(t, s, read()); waited > 7*time.Second {
					t.Errorf("a read after %s word waited %v, want at most 7 s", tc.name, waited)
				}
			})
		})
	}
}

// TestTheRefusalThatShowsTheStepsTellsTheStore (rules 1 and 7): the
// refusal that shows a learned policy refills only from its moments
// carries a word too (r=0;t=53). It goes to the shared store as the model
// now takes it, with Steps and no refill, or the other processes refill
// the level at the quota's rate until this process's next answer.
func TestTheRefusalThatShowsTheStepsTellsTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stepsLogStore{}
		s := New()
		s.UseStore(st, "k", nil)
		refusedEarly(t, s, 10, 53*time.Second)
		time.Sleep(100 * time.Millisecond) // the release goes out
		st.mu.Lock()
		var last budgetstore.Level
		if len(st.left) > 0 {
			last = st.left[len(st.left)-1]
		}
		st.mu.Unlock()
		if !last.Steps || last.Rate != 0 {
			t.Errorf("the refusal's word went to the store as %+v, want Steps and Rate 0", last)
		}
		time.Sleep(time.Minute) // the lease keeper ends
	})
}

// stepsLogStore is a downStore that keeps every level named "burst" that
// its requests carry: in left the Left of its releases, in all those and
// the levels of its Acquires and Owes.
type stepsLogStore struct {
	downStore
	mu        sync.Mutex
	left, all []budgetstore.Level
}

func (d *stepsLogStore) keep(to *[]budgetstore.Level, ls []budgetstore.Level) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range ls {
		if l.Name == "burst" {
			*to = append(*to, l)
		}
	}
}

func (d *stepsLogStore) Acquire(ctx context.Context, key string, a budgetstore.Acquire) (budgetstore.Grant, error) {
	d.keep(&d.all, a.Levels)
	return d.downStore.Acquire(ctx, key, a)
}

func (d *stepsLogStore) Release(ctx context.Context, key string, r budgetstore.Release) error {
	d.keep(&d.left, r.Left)
	d.keep(&d.all, r.Left)
	d.keep(&d.all, r.Owe)
	return d.downStore.Release(ctx, key, r)
}

// TestARefusalWithoutAWordTellsTheStoreTheSteps (rules 1 and 7): a
// learned policy "burst" tied to reads is emptied (r=0;t=59) and a read
// that its refill let go before that moment is refused with a wait of
// 20 s, the refusal naming burst in its problem but carrying no RateLimit
// member for it. The model learns that the level refills only from its
// moments (level.learnEarly) and refills it for nothing until the word's
// moment 50 s on. The shared store must hear so (a level with Steps),
// or the other processes, which give it their quota's rate, refill it
// before the moment: Rate 0 without a Window does not stop them
// (budgetstore.Level).
func TestARefusalWithoutAWordTellsTheStoreTheSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stepsLogStore{}
		s := New()
		s.UseStore(st, "k", nil)
		read := func() *Call { return call(ops.GetContact, "") }
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer(`"key";q=300;w=60, "burst";q=10;w=60`, `"burst";r=10;t=0`))
		time.Sleep(time.Second)
		admitNow(t, s, read()).Finish(answer("", `"burst";r=9;t=60`))
		time.Sleep(time.Second)
		admitNow(t, s, read()).Finish(answer("", `"burst";r=0;t=59`))
		tk, _ := admitAt(t, s, read())
		tk.Finish(refusal(http.StatusTooManyRequests, codeRateLimited, "burst", 20*time.Second))
		s.mu.Lock()
		resets := s.levels["burst"].resets
		s.mu.Unlock()
		if !resets {
			t.Fatalf("no resets after an early read's refusal (the test's premise)")
		}
		time.Sleep(21 * time.Second) // the refusal's wait
		tk, _ = admitAt(t, s, read())
		tk.Unanswered(false, false)
		time.Sleep(100 * time.Millisecond)
		st.mu.Lock()
		steps, heard := false, ""
		for _, l := range st.all {
			steps = steps || l.Steps
			heard += fmt.Sprintf(" {Amount:%g Rate:%.3g Reset:%v Hold:%v Steps:%v}", l.Amount, l.Rate, l.Reset, l.Hold, l.Steps)
		}
		st.mu.Unlock()
		if !steps {
			t.Errorf("the store heard of burst only%s: no Steps, so other processes refill it before the moment", heard)
		}
		time.Sleep(time.Minute) // the lease keeper ends
	})
}
