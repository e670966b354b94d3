package budget

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/ops"
)

// The tests of the rules of the package doc, one each, named after it
// (rule 3's is in budget_test.go, rule 5's in lastmoment_test.go, rule 7's
// in redisbudget).

// admitAt admits c and reports how long it waited.
func admitAt(t *testing.T, s *State, c *Call) (*Ticket, time.Duration) {
	t.Helper()
	start := time.Now()
	tk, _, err := s.Admit(context.Background(), c)
	if err != nil {
		t.Fatalf("%s: %v", c.Op, err)
	}
	return tk, time.Since(start)
}

// tieSearch announces a learned policy "search" of 20 searches a minute to
// s and ties it to searches (q=a) with two answers that show it going
// down, 18 left.
func tieSearch(t *testing.T, s *State) {
	t.Helper()
	admitNow(t, s, call(ops.GetMe, "")).Finish(answer(`"key";q=300;w=60, "search";q=20;w=60`, `"search";r=20;t=1`))
	admitNow(t, s, call(ops.ListContacts, "q=a")).Finish(answer("", `"search";r=19;t=60`))
	admitNow(t, s, call(ops.ListContacts, "q=a")).Finish(answer("", `"search";r=18;t=60`))
}

// TestAWordWithinARefusalsWaitKeepsItsOwe: a learned policy (20 searches a
// minute), tied to searches, refuses one with a wait of 50 s; 10 s into the
// wait a word names the policy with r=0: the answer to a search sent with
// the refused one, or a status answer (GET /v1/rate_limit). When the wait
// ends one search goes, and the next waits for the refill of one more (3 s
// at the quota's rate), not the refill of the 40 s since that word all at
// once.
func TestAWordWithinARefusalsWaitKeepsItsOwe(t *testing.T) {
	for _, word := range []string{"answer", "status"} {
		t.Run(word, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New()
				search := func() *Call { return call(ops.ListContacts, "q=a") }
				tieSearch(t, s)
				slow := admitNow(t, s, search())
				admitNow(t, s, search()).Finish(refusal(http.StatusTooManyRequests, codeRateLimited, "search", 50*time.Second))
				start := time.Now()
				time.Sleep(10 * time.Second)
				if word == "answer" {
					slow.Finish(answer("", `"search";r=0;t=40`))
				} else {
					slow.Finish(answer("", ""))
					st := call(ops.GetRateLimit, "")
					st.Status = true
					admitNow(t, s, st).Finish(answer("", ""))
					s.ObserveStatus(st, []LevelStatus{{Name: "search", Remaining: 0, Reset: 40 * time.Second}})
				}
				first, _ := admitAt(t, s, search())
				if el := time.Since(start); el < 50*time.Second || el > 51*time.Second {
					t.Errorf("the first search went %v after the refusal, want at its wait's end, 50 s", el)
				}
				first.Finish(answer("", ""))
				if _, waited := admitAt(t, s, search()); waited < 2*time.Second {
					t.Errorf("the second search waited %v after the first, want the refill of one, about 3 s", waited)
				}
			})
		})
	}
}

// TestABucketRefillsThroughAWordWithinARefusalsWait: the key level, the
// contract's bucket (5 points a second), refuses a batch of 99 points with
// the wait the bucket needs, 20 s; the answer to a call in flight, 2 s in,
// says r=9. The bucket refills meanwhile, so the batch goes when the wait
// ends, not once the refill after it brings a unit more than the word.
func TestABucketRefillsThroughAWordWithinARefusalsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer("", `"key";r=100;t=100`))
		a := admitNow(t, s, call(ops.GetMe, ""))
		refuseBatch(t, s)
		start := time.Now()
		time.Sleep(2 * time.Second)
		a.Finish(answer("", `"key";r=9;t=119`))
		admitAt(t, s, batchOf(99))
		if el := time.Since(start); el > 22*time.Second {
			t.Errorf("the batch's retry went %v after the refusal, the bucket holds 99 at the server's wait's end, 20 s", el)
		}
	})
}

// TestARefusalsWaitEndsWithTheRefusedCallsNeed: the key level, the
// contract's bucket (5 points a second), refuses a batch of 99 points with
// the wait the bucket needs, 20 s. When the wait ends the bucket holds the
// batch, not the batch and the refill of the wait besides: the batch goes
// then, and a second batch waits for its own refill, about 20 s more.
func TestARefusalsWaitEndsWithTheRefusedCallsNeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer("", `"key";r=100;t=100`))
		refuseBatch(t, s)
		first, waited := admitAt(t, s, batchOf(99))
		if waited < 20*time.Second || waited > 21*time.Second {
			t.Errorf("the batch's retry went %v after the refusal, want at the wait's end, 20 s", waited)
		}
		first.Finish(answer("", ""))
		if _, waited := admitAt(t, s, batchOf(99)); waited < 18*time.Second {
			t.Errorf("a second batch went %v after the first, want after the refill of its 99 points, about 20 s", waited)
		}
	})
}

// batchOf is a batch of n points.
func batchOf(n float64) *Call {
	return &Call{Op: "batch", Cost: n, Demand: []Demand{{Key, n}, {Principal, n}, {Org, n}}, Target: "POST /v1/batch", Budgeted: true}
}

// refuseBatch admits a batch of 99 points and has the key level refuse it with the
// wait its contract's bucket needs for it, 20 s.
func refuseBatch(t *testing.T, s *State) {
	t.Helper()
	admitNow(t, s, batchOf(99)).Finish(refusal(http.StatusTooManyRequests, codeRateLimited, "key", 20*time.Second))
}

// TestARefusalsWaitEndsWithTheRefusedCallsNeedOnALogOthersTakeFrom: a
// sliding log that others take from frees for this key only what it took
// a window before. A refusal that asks for 300 ms says the refused call
// fits then: when the wait ends the level holds its need, since this key's
// own takes do not add up to it, until a word after the wait says what is
// left.
func TestARefusalsWaitEndsWithTheRefusedCallsNeedOnALogOthersTakeFrom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := orgRead(t, 40, 30*time.Second, 10)
		slow := admitNow(t, s, call(ops.GetContact, ""))
		time.Sleep(10 * time.Second) // no fall: the words are further apart than maxDropGap
		admitNow(t, s, call(ops.ListContacts, "q=a")).Finish(orgRefusal(2, 300*time.Millisecond))
		org := s.levels[Org]
		time.Sleep(300 * time.Millisecond)
		org.refill(time.Now())
		if d := org.wait(7, time.Now()); d != 0 {
			t.Errorf("the org holds the retry of the 7-point search %v after the refusal's wait, want none", d)
		}
		slow.Finish(orgAnswer(1))
		org.refill(time.Now())
		if d := org.wait(7, time.Now()); d == 0 {
			t.Error("after the wait, a word that the org has 1 left lets the 7-point search go")
		}
	})
}

// TestARefusalsRetryOnALogOthersTakeFromWaitsForWhatThisKeyTook: what
// frees at the moment a refusal on a level others take from names may be
// what they took a window before, which they take again as it frees. The
// level holds the retry's need once what this key took has left, when that
// comes before the reserve lapses (7.5 s after the refusal's word);
// later than that, it holds it when the wait ends. Either way the retry
// goes then, not behind the level's pace that the refusal cut, also when
// a take shortly before the refusal spent the pace.
func TestARefusalsRetryOnALogOthersTakeFromWaitsForWhatThisKeyTook(t *testing.T) {
	for _, tc := range []struct {
		name   string
		taken  time.Duration // how long before the refusal this key's 7-point search was answered
		wait   time.Duration // the refusal's
		before bool          // another search answered 2.5 s before the refusal
		want   time.Duration // when the retry goes, after the refusal
	}{
		{"its take frees soon", 59500 * time.Millisecond, 100 * time.Millisecond, false, 500 * time.Millisecond},
		{"its take frees soon, a take just before", 59500 * time.Millisecond, 100 * time.Millisecond, true, 500 * time.Millisecond},
		{"its take frees after the wait, before the reserve lapses", 53 * time.Second, 5 * time.Second, false, 7 * time.Second},
		{"its take frees after the reserve lapses", 52 * time.Second, 5 * time.Second, false, 5 * time.Second},
		{"its take frees late", 50 * time.Second, 100 * time.Millisecond, false, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New()
				learn(t, s)
				search := func() *Call { return call(ops.ListContacts, "q=a") }
				admitNow(t, s, search()).Finish(orgAnswer(40))
				if tc.before {
					time.Sleep(tc.taken - 2500*time.Millisecond)
					admitNow(t, s, search()).Finish(orgAnswer(30))
					time.Sleep(2500 * time.Millisecond)
				} else {
					time.Sleep(tc.taken)
				}
				admitNow(t, s, search()).Finish(orgRefusal(0, tc.wait))
				if _, waited := admitAt(t, s, search()); waited < tc.want || waited > tc.want+10*time.Millisecond {
					t.Errorf("the retry went %v after the refusal, want %v", waited, tc.want)
				}
			})
		})
	}
}

// TestARefusalsRetryGoesOnceTheReserveLapses: what such a level keeps back
// for the others holds after a refusal's wait too. After a refusal that
// showed them take 39 at once, and answers that showed the level gaining
// nothing beyond this key's own takes, the retry goes when the reserve
// lapses, 7.5 s after the refusal, not 30 s later when this key's first
// take leaves the window; the point the wait promised goes once.
func TestARefusalsRetryGoesOnceTheReserveLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := orgRead(t, 40, 30*time.Second, 39)
		get := func() *Call { return call(ops.GetContact, "") }
		admitNow(t, s, get()).Finish(orgRefusal(0, 300*time.Millisecond))
		if r := s.levels[Org].reserve(time.Now()); r != 39 {
			t.Fatalf("kept back after the refusal: %v, want the 39 the others took", r)
		}
		if _, waited := admitAt(t, s, get()); waited != 7500*time.Millisecond+1 {
			t.Errorf("the retry went %v after the refusal, want once the reserve lapses, 7.5 s", waited)
		}
		org := s.levels[Org]
		if org.refill(time.Now()); org.believed(time.Now()) > 0 {
			t.Errorf("the org holds %v once the retry took the point the wait promised, want none", org.believed(time.Now()))
		}
	})
}

// orgRead is a new state whose reads got answers naming the org, first
// with r left, then, span later, with last left.
func orgRead(t *testing.T, r float64, span time.Duration, last float64) *State {
	s := New()
	learn(t, s)
	admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(r))
	time.Sleep(span)
	admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(last))
	return s
}

// orgRefusal is a RATE_LIMITED naming the org, r left, with a wait.
func orgRefusal(r float64, wait time.Duration) Answer {
	a := refusal(http.StatusTooManyRequests, codeRateLimited, Org, wait)
	a.Header.Set("RateLimit", fmt.Sprintf(`"org";r=%g;t=60`, r))
	return a
}

// TestAWordWithinARefusalsWaitTellsTheStoreItsOwe: the owe a word within a
// refusal's wait keeps goes to the shared store with the word, so that the
// other processes do not refill the rest of the wait either.
func TestAWordWithinARefusalsWaitTellsTheStoreItsOwe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		tieSearch(t, s)
		c := call(ops.ListContacts, "q=a")
		admitNow(t, s, c).Finish(refusal(http.StatusTooManyRequests, codeRateLimited, "search", 50*time.Second))
		time.Sleep(10 * time.Second)
		s.mu.Lock()
		defer s.mu.Unlock()
		h := http.Header{}
		h.Set("RateLimit", `"search";r=0;t=40`)
		rel := &release{}
		s.observeLocked(c, h, time.Now(), rel, true)
		l := s.levels["search"]
		if len(rel.Owe) != 1 || rel.Owe[0].Amount > -10 || rel.Owe[0].Hold != 40*time.Second {
			t.Errorf("the local model owes %.2f; the store is told %+v", l.tokens, rel.Owe)
		}
	})
}

// TestTheServersWordBindsUntilItsMoment: a write level that said r=0;t=50
// on its last success holds writes until that moment and lets one go then,
// although the key's own log would free its first take only at +60 s; the
// answer to that write says how much more. A level that said r=2 lets two
// go before its moment and no third.
func TestTheServersWordBindsUntilItsMoment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		writes(t, s, 9, `"write";r=30;t=60`)
		time.Sleep(10 * time.Second)
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", `"write";r=0;t=50`))
		time.Sleep(49 * time.Second)
		if why := held(s, call(ops.CreateContact, "")); why != Write {
			t.Fatalf("a write 1 s before the moment is held by %q, want %q", why, Write)
		}
		tk, waited := admitAt(t, s, call(ops.CreateContact, ""))
		if waited != time.Second {
			t.Errorf("the write went %v after the moment was 1 s away", waited)
		}
		tk.Finish(answer("", `"write";r=2;t=30`))
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", `"write";r=1;t=30`))
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", `"write";r=0;t=30`))
		if why := held(s, call(ops.CreateContact, "")); why != Write {
			t.Errorf("a third write after r=2 is held by %q, want %q", why, Write)
		}
	})
}

// TestAMomentAddsWhatTheRefillSinceHasNot (rule 1): the moment a word
// named leaves the level at least one unit above what the word left, less
// what was taken since; a bucket's refill since the word counts toward
// that unit. After "key";r=4;t=20 on a bucket (5 points a second), calls
// take it back down to 4 every 100 ms; 100 ms after the last, at the
// moment, it holds 4.5, not 5.5: a unit on top of the refill would let
// through, every t, a call the server refuses. Left alone, it holds 104 at
// the moment, not 105. A level that does not refill still frees its one
// unit at the moment (TestTheServersWordBindsUntilItsMoment).
func TestAMomentAddsWhatTheRefillSinceHasNot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		word := func() *State {
			s := New()
			admitNow(t, s, call(ops.GetMe, "")).Finish(answer("", `"key";r=600;t=0`))
			admitNow(t, s, call(ops.GetMe, "")).Finish(answer("", `"key";r=4;t=20`))
			return s
		}
		s := word()
		for range 199 {
			time.Sleep(100 * time.Millisecond)
			s.Spend(Key, 4)
		}
		time.Sleep(100 * time.Millisecond)
		if got := availableOf(s, Key); math.Abs(got-4.5) > 1e-6 {
			t.Errorf("at the moment, taken down to 4 until 100 ms before, the key level holds %v, want 4.5", got)
		}
		s = word()
		time.Sleep(20 * time.Second)
		if got := availableOf(s, Key); math.Abs(got-104) > 1e-6 {
			t.Errorf("at the moment, left alone, the key level holds %v, want 104", got)
		}
	})
}

// TestABucketOfThisKeyAloneRefillsAtItsQuotasRate: on another plan (300
// points per 10 s, 30 a second), a key level that said r=475;t=5 holds more
// than its quota, a bucket. When it then says r=300;t=11, its t is later
// than the most it has shown (475) and the quota's rate would make it: no
// one else takes from it, so that is a bucket bigger than seen, not a
// slower refill, and two seconds later it holds 60 points more.
func TestABucketOfThisKeyAloneRefillsAtItsQuotasRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		policy := `"key";q=300;w=10;qu="points"`
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer(policy, `"key";r=475;t=5`))
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer(policy, `"key";r=300;t=11`))
		time.Sleep(2 * time.Second)
		for _, l := range s.Snapshot().Levels {
			if l.Name == Key && math.Abs(l.Remaining-360) > 1 {
				t.Errorf("2 s after r=300 the key level holds %.1f, want 360 (30 points a second)", l.Remaining)
			}
		}
	})
}

// TestAWordOnALevelACallTookNothingFromOnlyLowersIt (rule 1): a server
// that names the narrowest of all levels answers a read with the write
// level. A read sent with a write may have been counted before it, so when
// the read's r=4 comes after the write's r=2, two writes are left, not
// four.
func TestAWordOnALevelACallTookNothingFromOnlyLowersIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", `"write";r=10;t=50`))
		read := admitNow(t, s, call(ops.GetContact, ""))
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", `"write";r=2;t=58`))
		read.Finish(answer("", `"write";r=4;t=56`))
		n := 0
		for ; n < 5 && held(s, call(ops.CreateContact, "")) == ""; n++ {
			admitNow(t, s, call(ops.CreateContact, "")) // in flight until the end
		}
		if n != 2 {
			t.Errorf("%d writes went after r=2 and a read's older r=4, want 2", n)
		}
	})
}

// TestOutcomesBeatHints: a server whose every success says the key level
// has a quota of 0 and nothing left, yet is full now ("key";q=0;w=60 and
// "key";r=0;t=0), is not believed: 30 reads go at once.
func TestOutcomesBeatHints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		start := time.Now()
		for range 30 {
			tk, _ := admitAt(t, s, call(ops.GetContact, ""))
			tk.Finish(answer(`"key";q=0;w=60`, `"key";r=0;t=0`))
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("30 reads took %v on answers that contradict themselves", d)
		}
		if l := s.levels[Key]; l.quota != 300 {
			t.Errorf("key quota %v after q=0", l.quota)
		}
	})
}

// TestARefusalSlowsWhatItSpeaksOf: a refusal on the write level holds and
// slows writes only, a refusal on a policy the client did not know holds
// and slows the refused kind of call only, and an OVERLOADED, which speaks
// of the key, holds every call for its wait and cuts the key's pace, which
// steps back up in steps of that wait.
func TestARefusalSlowsWhatItSpeaksOf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		admitNow(t, s, call(ops.CreateContact, "")).Finish(refusal(http.StatusTooManyRequests, codeRateLimited, Write, 3*time.Second))
		if why := held(s, call(ops.GetContact, "")); why != "" {
			t.Errorf("a read after a write's refusal is held by %q", why)
		}
		if why := held(s, call(ops.CreateContact, "")); why != Write {
			t.Errorf("a write after a write's refusal is held by %q, want %q", why, Write)
		}
		if w, k := s.levels[Write].pace.share, s.pace.share; w != rateLimitCut || k != 1 {
			t.Errorf("after a write's refusal: write pace %v, key pace %v; want %v and 1", w, k, rateLimitCut)
		}

		admitNow(t, s, call(ops.ListInvoices, "")).Finish(refusal(http.StatusTooManyRequests, codeRateLimited, "bodo-reports", 2*time.Second))
		if why := held(s, call(ops.ListInvoices, "")); why != "bodo-reports" {
			t.Errorf("a list of invoices after its refusal is held by %q", why)
		}
		if why := held(s, call(ops.GetContact, "")); why != "" || s.pace.share != 1 {
			t.Errorf("after a refusal on an unknown policy a read is held by %q, key pace %v", why, s.pace.share)
		}

		time.Sleep(3 * time.Second)
		admitNow(t, s, call(ops.GetContact, "")).Finish(refusal(http.StatusServiceUnavailable, codeOverloaded, "", 300*time.Millisecond))
		if why := held(s, call(ops.GetContact, "")); why != ReasonServer {
			t.Errorf("a read after OVERLOADED is held by %q, want %q", why, ReasonServer)
		}
		if s.pace.share != overloadCut || s.pace.capOf(s.parallel) != 4 {
			t.Errorf("after OVERLOADED: key pace %v, cap %d; want %v and 4", s.pace.share, s.pace.capOf(s.parallel), overloadCut)
		}
		tk, waited := admitAt(t, s, call(ops.GetContact, ""))
		tk.Finish(answer("", ""))
		if waited != 300*time.Millisecond {
			t.Errorf("a read waited %v after OVERLOADED asked for 300ms", waited)
		}
		time.Sleep(300 * time.Millisecond)
		s.mu.Lock()
		s.adaptLocked(time.Now())
		share := s.pace.share
		s.mu.Unlock()
		if share != 1 {
			t.Errorf("the key's pace is %v two waits after OVERLOADED, want 1", share)
		}
	})
}

// TestARefusedCallsRetryPassesItsLevelsPace: a key that took 3 points of
// an org that others keep full, and has 10 left, is spread at 13 a minute.
// The org refuses its 7-point search with a wait of 300 ms and cuts its
// pace. The server named that moment for the search: its retry goes when
// the wait ends, not 40 s later, when the cut pace would have its turn.
// The next search waits for the pace.
func TestARefusedCallsRetryPassesItsLevelsPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := orgRead(t, 40, 30*time.Second, 10)
		time.Sleep(20 * time.Second)
		search := func() *Call { return call(ops.ListContacts, "q=a") }
		admitNow(t, s, search()).Finish(orgRefusal(3, 300*time.Millisecond))
		retry, waited := admitAt(t, s, search())
		if waited != 300*time.Millisecond {
			t.Errorf("the retry went %v after the refusal, want at the wait's end, 300 ms", waited)
		}
		retry.Finish(orgAnswer(10))
		if _, waited = admitAt(t, s, search()); waited < 10*time.Second {
			t.Errorf("the next search went %v after the retry, want once the org's cut pace has its turn, 10 s or more", waited)
		}
	})
}

// TestWithoutAnyHintConvergeJustBelowTheLimiter: 8 callers of 1-point
// calls, which the key level would let through at 5 a second, behind a
// leaky bucket of 1 request a second holding 5 that refuses with a bare
// 429: over 10 minutes they get at least 90 % of what the bucket lets
// through, with at most 5 % of the requests refused. The limiter counts
// requests, whatever they cost: when the calls turn costlier (2 points,
// which the key level would still let through at 2.5 a second), they go
// as fast as before; when the first burst, which the limiter refuses, was
// of costly calls (7 points), the cheaper calls after it still get 90 % of
// what it lets through in the first 2 minutes; and after 11 idle minutes,
// when the pace no longer counts requests, the 2 minutes after the next
// burst keep both bounds: the limiter is most likely the one that refused
// before.
func TestWithoutAnyHintConvergeJustBelowTheLimiter(t *testing.T) {
	check := func(t *testing.T, what string, sent []limited, from, to time.Duration, afterIdle bool) {
		t.Helper()
		accepted, refused := 0, 0
		for _, r := range sent {
			if r.at >= from && r.at < to {
				if r.ok {
					accepted++
				} else {
					refused++
				}
			}
		}
		allowed := (to - from).Seconds() * 1.0
		if from == 0 || afterIdle {
			allowed += 5
		}
		// The share of refusals binds over longer runs, and after an idle
		// gap, when the limiter's last reading paces what follows the
		// burst; in the first 2 minutes, the first burst has up to 8
		// requests in flight before anything is known of the limiter.
		share, refusedShare := float64(accepted)/allowed, float64(refused)/float64(max(accepted+refused, 1))
		t.Logf("%s: %d accepted (%.1f %% of %v), %d refused (%.2f %%)", what, accepted, 100*share, allowed, refused, 100*refusedShare)
		if share < 0.9 || refusedShare > 0.05 && (to-from > 2*time.Minute || afterIdle) {
			t.Errorf("%s behind the limiter: %.1f %% of what it allows, %.2f %% refused; want at least 90 %% and at most 5 %%", what, 100*share, 100*refusedShare)
		}
	}
	getContact := func() *Call { return call(ops.GetContact, "") }
	for _, c := range []struct {
		name              string
		run, switchAt     time.Duration // how long the callers call; when they switch from first to then
		first, then       func() *Call
		measured, measure time.Duration // from when, and for how long, the limiter's share is checked
		idle              time.Duration // from when the callers call nothing until the measure begins; 0: never
	}{
		{"cheap calls", 10 * time.Minute, 0, getContact, getContact, 0, 10 * time.Minute, 0},
		{"a costly first burst", 2 * time.Minute, 100 * time.Millisecond, func() *Call { return call(ops.ListContacts, "q=a") }, getContact, 0, 2 * time.Minute, 0},
		{"calls turning costlier", 8 * time.Minute, 3 * time.Minute, getContact, func() *Call { return call(ops.ListInvoices, "") }, 3 * time.Minute, 5 * time.Minute, 0},
		{"a burst after 11 idle minutes", 16 * time.Minute, 100 * time.Millisecond, func() *Call { return call(ops.ListContacts, "q=a") }, getContact, 14 * time.Minute, 2 * time.Minute, 3 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sent := behindHintlessLimiter(c.run, func(at time.Duration) *Call {
					switch {
					case at < c.switchAt:
						return c.first()
					case c.idle > 0 && at >= c.idle && at < c.measured:
						return nil
					}
					return c.then()
				})
				check(t, fmt.Sprintf("%v from %v", c.measure, c.measured), sent, c.measured, c.measured+c.measure, c.idle > 0)
			})
		})
	}
}

// TestAHintlessShareStaysWithItsLimiter: behind a limiter that gave no
// hint the pace's share, of a rate of requests, climbs past 1 while the
// limiter may be in front and no further once it may not; the cap on calls
// in flight stays within the parallel slots; and a cut that does not count
// requests (another kind, or the first hint-less refusal after such a
// limiter was gone) starts from at most 1.
func TestAHintlessShareStaysWithItsLimiter(t *testing.T) {
	p, at := cutByAHintlessLimiter()
	paced(p, 1, at(0), at(5*time.Minute))
	if p.share <= 1 || p.capOf(6) != 6 {
		t.Fatalf("5 minutes after a hint-less refusal at 1 request a second the share is %v and the cap %d, want past 1 and 6", p.share, p.capOf(6))
	}
	paced(p, 1, at(5*time.Minute), at(hintlessFor+time.Minute))
	atExpiry := p.share
	p.adapt(at(40 * time.Minute))
	if p.counting(at(40 * time.Minute)) {
		t.Errorf("the pace still counts requests %v after the limiter last refused, with calls held all along", 40*time.Minute)
	}
	if p.share != atExpiry {
		t.Errorf("the share climbed from %v to %v after the limiter's %v were over, want it to stay", atExpiry, p.share, hintlessFor)
	}
	p.cut(hintless, at(40*time.Minute-time.Millisecond), 0, 1, 1, at(40*time.Minute))
	if p.share > hintlessBelow {
		t.Errorf("a first hint-less refusal after %v cut the share to %v, want at most %v of what passed", hintlessFor, p.share, hintlessBelow)
	}
	p.adapt(at(45 * time.Minute))
	p.cut(rateLimited, at(45*time.Minute-time.Millisecond), 0, 1, 0, at(45*time.Minute))
	if p.share > rateLimitCut {
		t.Errorf("a RATE_LIMITED cut the share to %v, want at most %v", p.share, rateLimitCut)
	}
}

// TestAHintlessLimiterIsReadAgainAfterAQuietSpell: the first hint-less
// refusal, of a burst, leaves no reading of the limiter; one while the pace
// counts requests does (1 request a second). After hintlessFor without a
// refusal the next one starts from that reading, and from what passed
// when that is more: a limiter that now lets 5 a second through has the
// share near 4.5 a second within a minute.
func TestAHintlessLimiterIsReadAgainAfterAQuietSpell(t *testing.T) {
	p, at := cutByAHintlessLimiter()
	if p.limit != 0 {
		t.Errorf("a first hint-less refusal read the limiter at %v requests a second, want no reading", p.limit)
	}
	paced(p, 1, at(0), at(time.Minute))
	p.cut(hintless, at(time.Minute-time.Millisecond), 0, 1, 1, at(time.Minute))
	if p.limit != 1 {
		t.Fatalf("a hint-less refusal while 1 request a second passed read the limiter at %v, want 1", p.limit)
	}
	paced(p, 1, at(time.Minute), at(time.Minute+hintlessFor+time.Second))
	p.cut(hintless, at(40*time.Minute-time.Millisecond), 0, 1, 5, at(40*time.Minute))
	paced(p, 1, at(40*time.Minute), at(41*time.Minute))
	if p.share < hintlessBelow*4 {
		t.Errorf("a minute after a refusal with 5 requests a second passing the share is %v, want %v", p.share, hintlessBelow*4)
	}
}

// TestAForgottenHintlessLimiterHoldsNoMore: a limiter that let a tenth of
// the calls' rate through when it refused, and then went, is forgotten
// after hintlessFor of calls the pace held: the share then climbs as after
// any cut, and within a minute the pace holds no call.
func TestAForgottenHintlessLimiterHoldsNoMore(t *testing.T) {
	p, at := cutByAHintlessLimiter()
	p.cut(hintless, at(3*time.Second-time.Millisecond), 0, 1, 0.1, at(3*time.Second))
	paced(p, 1, at(3*time.Second), at(3*time.Second+hintlessFor+time.Minute))
	if now := at(3*time.Second + hintlessFor + time.Minute); p.counting(now) || p.paces(now) {
		t.Errorf("a minute after the limiter was forgotten the share is %v, and the pace still holds calls", p.share)
	}
}

// TestAHintlessLimiterIsReadFromWhenItWasEmpty: what passed before a
// limiter's bare 429 was its burst, which the refusal shows spent; what it
// lets through from then on is its rate. After a first call, 6 go at once
// and the limiter refuses one of them, whose 429 comes back before the
// others' answers; then 5 calls pass, a second or more apart as the pace
// lets them. The limiter reads those 5 over the time since the refused
// call was sent, and one more that it may have held then (less than a
// call, or it would have let the refused one through), not the 11 that
// passed in all.
func TestAHintlessLimiterIsReadFromWhenItWasEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer("", ""))
		var burst []*Ticket
		for range 6 {
			burst = append(burst, admitNow(t, s, call(ops.GetMe, "")))
		}
		sent := time.Now()
		time.Sleep(20 * time.Millisecond)
		burst[5].Finish(refusal(http.StatusTooManyRequests, "", "", 0))
		time.Sleep(5 * time.Millisecond)
		for _, tk := range burst[:5] {
			tk.Finish(answer("", ""))
		}
		for range 5 {
			time.Sleep(time.Second)
			tk, _, err := s.Admit(context.Background(), call(ops.GetMe, ""))
			if err != nil {
				t.Fatal(err)
			}
			tk.Finish(answer("", ""))
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		since := time.Since(sent)
		if got, want := s.passed.rate(time.Now()), 6/since.Seconds(); math.Abs(got-want) > 1e-9 {
			t.Errorf("%v after the refused call was sent, with 5 calls sent and passed since, it reads %.2f a second, want %.2f", since, got, want)
		}
	})
}

// TestACapHeldByTheShareBindsThePace: calls held at the cap that a cut
// share puts on the calls in flight show the limiter as much as calls the
// pace holds: 8 callers of 8-second calls after a hint-less refusal, which
// the cap of 4 holds, raise the share to the full cap within minutes.
func TestACapHeldByTheShareBindsThePace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer("", ""))
		admitNow(t, s, call(ops.GetMe, "")).Finish(refusal(http.StatusTooManyRequests, "", "", 0))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					tk, _, err := s.Admit(ctx, call(ops.GetMe, ""))
					if err != nil {
						return
					}
					time.Sleep(8 * time.Second)
					tk.Finish(answer("", ""))
				}
			})
		}
		wg.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		if capped := s.pace.capOf(s.parallel); capped != s.parallel {
			t.Errorf("5 minutes of calls held at the cut cap left the cap at %d of %d", capped, s.parallel)
		}
	})
}

// TestSlowStartsFlightIsAnsweredBeforeMoreGo: the flight that goes when slow
// start's lone call is answered (after 30 ms) is as many calls as the cap;
// a call after it waits until the flight is answered in full, so that the
// bare 429s of a limiter in front that refused part of it have cut the
// pace before it goes, also when the flight went 100 ms after that answer.
// A flight call that gets no answer holds the calls after it for twice the
// first call's round trip at most after the flight's last call went, and a
// call whose deadline the flight's answers meet waits for them rather than
// fail at once.
func TestSlowStartsFlightIsAnsweredBeforeMoreGo(t *testing.T) {
	firstAnswer := func(t *testing.T, s *State) {
		tk := admitNow(t, s, call(ops.GetContact, ""))
		time.Sleep(30 * time.Millisecond)
		tk.Finish(answer("", ""))
	}
	for _, late := range []time.Duration{0, 100 * time.Millisecond} {
		t.Run(fmt.Sprintf("flight sent %v after the first answer", late), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New()
				firstAnswer(t, s)
				time.Sleep(late)
				var flight []*Ticket
				for range s.parallel {
					flight = append(flight, admitNow(t, s, call(ops.GetContact, "")))
				}
				time.Sleep(30 * time.Millisecond)
				for _, tk := range flight[:4] {
					tk.Finish(answer("", ""))
				}
				if why := held(s, call(ops.GetContact, "")); why != ReasonInFlight {
					t.Errorf("a call after the flight sent %v after the first answer, 4 of its 6 answered, is held by %q, want %q", late, why, ReasonInFlight)
				}
				for _, tk := range flight[4:] {
					tk.Finish(refusal(http.StatusTooManyRequests, "", "", 0))
				}
				if why := held(s, call(ops.GetContact, "")); why != ReasonPace {
					t.Errorf("a call after the flight sent %v after the first answer, 2 of it refused by a limiter in front, is held by %q, want %q", late, why, ReasonPace)
				}
			})
		})
	}
	t.Run("a deadline the flight's answers meet", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := New()
			firstAnswer(t, s)
			var flight []*Ticket
			for range s.parallel {
				flight = append(flight, admitNow(t, s, call(ops.GetContact, "")))
			}
			go func() {
				time.Sleep(40 * time.Millisecond)
				for _, tk := range flight {
					tk.Finish(answer("", ""))
				}
			}()
			admitWithin(t, s, call(ops.GetContact, ""), 50*time.Millisecond, "a call whose deadline the flight's answers meet").Finish(answer("", ""))
		})
	})
	t.Run("a flight call without an answer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := New()
			firstAnswer(t, s)
			admitNow(t, s, call(ops.GetContact, "")) // never answered
			for range s.parallel - 2 {
				admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
			}
			time.Sleep(10 * time.Millisecond)
			if why := held(s, call(ops.GetContact, "")); why != "" {
				t.Errorf("the flight's last call is held by %q", why)
			}
			admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
			if why := held(s, call(ops.GetContact, "")); why != ReasonInFlight {
				t.Errorf("a call after the flight, 5 of its 6 answered, is held by %q, want %q", why, ReasonInFlight)
			}
			tk, waited := admitAt(t, s, call(ops.GetContact, ""))
			if waited != 60*time.Millisecond {
				t.Errorf("a flight call without an answer held the next %v after the flight's last call, want 60ms", waited)
			}
			tk.Finish(answer("", ""))
		})
	})
}

// cutByAHintlessLimiter returns a pace that a limiter that gave no hint
// refused at its start, with 1 request a second passing, and the time from
// that start.
func cutByAHintlessLimiter() (*pace, func(time.Duration) time.Time) {
	start := time.Unix(0, 0)
	p := newPace()
	p.cut(hintless, start.Add(-time.Millisecond), 0, 1, 1, start)
	return &p, func(d time.Duration) time.Time { return start.Add(d) }
}

// paced has a caller always ready send 1-request calls through p at rate
// from from until to, as p lets them go, looking every 10 ms.
func paced(p *pace, rate float64, from, to time.Time) {
	for now := from; now.Before(to); now = now.Add(10 * time.Millisecond) {
		p.adapt(now)
		if p.wait(1, rate, now) == 0 {
			p.arrived(rate, now)
			p.take(1, now)
		}
	}
}

// TestAnIdlePaceKeepsItsHintlessLimiter: time in which the calls go
// slower than the pace would let them shows nothing of a limiter that gave
// no hint: the share climbs only while the pace holds calls, and the
// limiter is forgotten only after hintlessFor of that.
func TestAnIdlePaceKeepsItsHintlessLimiter(t *testing.T) {
	p, at := cutByAHintlessLimiter()
	paced(p, 1, at(0), at(10*time.Second))
	p.adapt(at(10*time.Second + paceBurst)) // a burst's time after the last call held still counts
	share := p.share
	p.adapt(at(hintlessFor + time.Hour))
	if p.share != share || !p.counting(at(hintlessFor+time.Hour)) {
		t.Errorf("after an idle hour the share went from %v to %v and the pace counts requests: %v; want it as it was, counting",
			share, p.share, p.counting(at(hintlessFor+time.Hour)))
	}
	paced(p, 1, at(hintlessFor+time.Hour), at(2*hintlessFor+time.Hour-30*time.Second))
	if !p.counting(at(2*hintlessFor + time.Hour - 30*time.Second)) {
		t.Errorf("the limiter was forgotten before %v of calls held by the pace", hintlessFor)
	}
	paced(p, 1, at(2*hintlessFor+time.Hour-30*time.Second), at(2*hintlessFor+time.Hour))
	if p.share <= share || p.counting(at(2*hintlessFor+time.Hour)) {
		t.Errorf("after %v of calls held by the pace the share is %v (from %v) and the pace counts requests: %v; want it higher, and the limiter forgotten",
			hintlessFor, p.share, share, p.counting(at(2*hintlessFor+time.Hour)))
	}
}

// limited is a request behind the limiter of behindHintlessLimiter: when it
// was sent, from the start, and whether the limiter let it through.
type limited struct {
	at time.Duration
	ok bool
}

// behindHintlessLimiter runs 8 callers of the calls that next returns
// (given the time since the start) for run behind a leaky bucket of 1
// request a second holding 5 that refuses with a bare 429, on a new State,
// with 20 ms per answer; it returns their requests.
func behindHintlessLimiter(run time.Duration, next func(time.Duration) *Call) []limited {
	const rate, burst = 1.0, 5.0
	s := New()
	var mu sync.Mutex
	var sent []limited
	start := time.Now()
	level, last := 0.0, start
	pass := func() bool {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		level = max(0, level-rate*now.Sub(last).Seconds())
		last = now
		ok := level+1 <= burst
		if ok {
			level++
		}
		sent = append(sent, limited{at: now.Sub(start), ok: ok})
		return ok
	}
	end := start.Add(run)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(end) {
				ctx, cancel := context.WithDeadline(context.Background(), end)
				c := next(time.Since(start))
				if c == nil {
					cancel()
					time.Sleep(time.Second)
					continue
				}
				tk, _, err := s.Admit(ctx, c)
				cancel()
				if err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
				if pass() {
					tk.Finish(answer("", ""))
				} else {
					tk.Finish(refusal(http.StatusTooManyRequests, "", "", 0))
				}
			}
		})
	}
	wg.Wait()
	return sent
}

// TestTheDocumentedLimitsAreThePrior: before any answer the key level is
// the contract's bucket of 600 points, and Snapshot says so; the server's
// first word on it (a plan of 150 points a minute) decides.
func TestTheDocumentedLimitsAreThePrior(t *testing.T) {
	t.Run("before any answer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := New()
			key := func() LevelSnapshot {
				l, ok := levelOf(s, Key)
				if !ok {
					t.Fatal("no key level")
				}
				return l
			}
			if l := key(); l.Remaining != 600 || l.Capacity != 600 {
				t.Errorf("before any answer the key level holds %v of %d, want 600 of 600", l.Remaining, l.Capacity)
			}
			admitNow(t, s, call(ops.GetMe, "")).Finish(answer(`"key";q=150;w=60`, `"key";r=149;t=1`))
			if l := key(); l.Remaining != 149 || l.Quota != 150 {
				t.Errorf("after the server's first word the key level holds %v of quota %d, want 149 of 150", l.Remaining, l.Quota)
			}
		})
	})
	// The contract's bucket holds 600 points, twice its quota a minute: a
	// batch of 400 fits it and goes at once. Once a word ends the prior, the
	// key level of the documented quota may still be that bucket: a batch
	// of 400 waits for it, and is not refused as one that never fits.
	t.Run("a batch the bucket holds after the prior ends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := New()
			admitNow(t, s, batchOf(400)).Finish(answer("", `"key";r=0;t=60`))
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			var never *NeverFitsError
			if _, _, err := s.Admit(ctx, batchOf(400)); errors.As(err, &never) {
				t.Errorf("a batch of 400 on the documented key level after the prior ended: %v", err)
			}
		})
	})
	// Drained at once, the contract's bucket says r=0;t=120 and frees 5
	// points a second: the prior stands on that word. One it would not
	// say (a sliding log's t=60) ends it.
	t.Run("a drained bucket's word", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := New()
			tk := admitNow(t, s, call(ops.GetMe, ""))
			s.Spend(Key, 0)
			tk.Finish(answer("", `"key";r=0;t=120`))
			if why := held(s, call(ops.GetMe, "")); why != Key {
				t.Fatalf("a call right after r=0 is held by %q, want %q", why, Key)
			}
			time.Sleep(time.Second)
			tk = admitNow(t, s, call(ops.GetMe, ""))
			tk.Finish(answer("", `"key";r=0;t=60`))
			time.Sleep(time.Second)
			if why := held(s, call(ops.GetMe, "")); why != Key {
				t.Errorf("a second after a sliding log's r=0;t=60 a call is held by %q, want %q: the prior ends there, and the key level refills no more as the contract's bucket", why, Key)
			}
		})
	})
	// A refusal on the key level, which the contract's bucket would have let
	// through, ends the prior; so does a status that reports another plan,
	// however its r and t add up.
	drained := func(t *testing.T) *State {
		s := New()
		tk := admitNow(t, s, call(ops.GetMe, ""))
		s.Spend(Key, 0)
		tk.Finish(answer("", `"key";r=0;t=120`))
		time.Sleep(time.Second)
		return s
	}
	t.Run("a refusal on the drained level", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := drained(t)
			admitNow(t, s, call(ops.GetMe, "")).Finish(refusal(http.StatusTooManyRequests, codeRateLimited, Key, time.Second))
			time.Sleep(time.Second)
			admitNow(t, s, call(ops.GetMe, "")).Finish(answer("", ""))
			time.Sleep(time.Second)
			if why := held(s, call(ops.GetMe, "")); why != Key {
				t.Errorf("after a refusal on the drained key level and the call its wait let through, a call a second later is held by %q, want %q", why, Key)
			}
		})
	})
	t.Run("a status of another plan", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := drained(t)
			s.ObserveStatus(nil, []LevelStatus{{Name: Key, Remaining: 0, Reset: 120 * time.Second, Capacity: 300, Quota: 150, Window: time.Minute}})
			time.Sleep(time.Second)
			if why := held(s, call(ops.GetMe, "")); why != Key {
				t.Errorf("a second after a status of a plan of 150 a minute a call is held by %q, want %q", why, Key)
			}
		})
	})
}

// TestALevelOthersTakeFromIsSpreadAtWhatThisKeyHasOfIt: this key took 32
// of an org that others keep full (its answers 30 s apart showed it
// gaining nothing beyond this key's own takes) and has 29 left. A second
// before the 31 it took first leave the window, it spreads what it has,
// 61 a window: a tenth of that at once, then about a point a second.
// Spread at what would last until those 31 leave, 29 a second, nearly all
// of it would go at once, and a window later come back as one burst.
func TestALevelOthersTakeFromIsSpreadAtWhatThisKeyHasOfIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		get := func() *Call { return call(ops.GetContact, "") }
		for range 29 {
			admitNow(t, s, get()).Finish(answer("", ""))
		}
		admitNow(t, s, get()).Finish(orgAnswer(30))
		time.Sleep(31 * time.Second)
		admitNow(t, s, get()).Finish(orgAnswer(29))
		time.Sleep(28 * time.Second)
		went := 0
		for held(s, get()) == "" && went < 29 {
			admitNow(t, s, get()).Finish(answer("", ""))
			went++
		}
		if went > 7 {
			t.Errorf("%d of the 29 points left went at once, want a tenth of the 61 this key has of the org a window", went)
		}
		if _, waited := admitAt(t, s, get()); waited < 500*time.Millisecond || waited > 1500*time.Millisecond {
			t.Errorf("the next point went %v later, want about a second, at 61 a window", waited)
		}
	})
}

// TestALevelThatFreesInStepsIsSpread: a write level whose t after a write
// is a window's (a sliding log: full again when the newest write leaves it)
// spreads its writes at its quota's rate after a burst of a tenth of it, so
// that it never frees nothing for a window; one whose t is what a bucket
// needs to be full again lets 30 writes go at once.
func TestALevelThatFreesInStepsIsSpread(t *testing.T) {
	for _, bucket := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			s := New()
			admitNow(t, s, call(ops.GetMe, "")).Finish(answer("", `"key";r=600;t=0`))
			start := time.Now()
			for i := range 30 {
				tk, _ := admitAt(t, s, call(ops.CreateContact, ""))
				r, reset := 59-i, 60
				if bucket {
					reset = i + 1
				}
				tk.Finish(answer("", fmt.Sprintf(`"write";r=%d;t=%d`, r, reset)))
			}
			el := time.Since(start)
			switch {
			case bucket && el != 0:
				t.Errorf("30 writes on a bucket took %v, want no wait", el)
			case !bucket && (el < 23*time.Second || el > 27*time.Second):
				t.Errorf("30 writes on a level that frees in steps took %v, want 24-27 s (6 at once, then what is left of the window spread over it)", el)
			}
		})
	}
}

// TestASlidingLogUntilFullIsNoBucket: a sliding log whose t runs until it
// is full again (the newest take leaves the window) moves that moment by
// the time between takes; two writes a second apart, each after an answer,
// look in whole seconds like a bucket's moment moved by what they took, and
// must not make the write level refill continuously.
func TestASlidingLogUntilFullIsNoBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		r := 30 // below half the quota, so that t=60 reads as no step (learnSteps): nothing spreads the writes
		for range 6 {
			for range 2 {
				r--
				admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", fmt.Sprintf(`"write";r=%d;t=60`, r)))
			}
			time.Sleep(time.Second)
		}
		if l := s.levels[Write]; l.bucket || l.refills() {
			t.Errorf("the write level after 12 writes on a sliding log until full: bucket %v, want none", l.bucket)
		}
	})
}

// TestAFallTooSmallToTellIsNoBucket: a sliding log at its last writes
// answers r=2, and half a second later, to two writes answered at once,
// r=1 and r=0, its t the window each time. A bucket of 60 refilling one a
// second would say the same to the whole second, and falls of a write
// cannot tell them apart (minShapeFall): the write level does not refill
// continuously.
func TestAFallTooSmallToTellIsNoBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", `"write";r=2;t=60`))
		time.Sleep(time.Second / 2)
		a, b := admitNow(t, s, call(ops.CreateContact, "")), admitNow(t, s, call(ops.CreateContact, ""))
		a.Finish(answer("", `"write";r=1;t=60`))
		b.Finish(answer("", `"write";r=0;t=60`))
		if l := s.levels[Write]; l.bucket || l.refills() {
			t.Errorf("the write level after falls of a write: bucket %v, want none", l.bucket)
		}
	})
}

// TestABucketTakenOverSecondsShowsIt: writes three a second on a bucket of
// 60 refilling one a second; between two answers seconds apart the moment
// moves by the fall of r plus the refill meanwhile, and the write level
// refills continuously before the writes have emptied it.
func TestABucketTakenOverSecondsShowsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		v, at := 60.0, time.Now() // the bucket
		for range 36 {
			tk, _ := admitAt(t, s, call(ops.CreateContact, ""))
			v = min(60, v+time.Since(at).Seconds()) - 1
			at = time.Now()
			tk.Finish(answer("", fmt.Sprintf(`"write";r=%d;t=%d`, int(v), int(math.Ceil(60-v)))))
			time.Sleep(time.Second / 3)
		}
		if l := s.levels[Write]; !l.bucket {
			t.Errorf("the write level after 36 writes in 12 s on a bucket: no bucket (r=%d)", int(v))
		}
	})
}

// say gives s the RateLimit line limit as the answer to a call of op, now.
func say(s *State, op *ops.Operation, limit string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observeLocked(call(op, ""), http.Header{"Ratelimit": {limit}}, time.Now(), nil, true)
}

// answerWritesAt gives s each RateLimit line, answering a write, at its offset from
// now, in turn.
func answerWritesAt(s *State, words map[time.Duration]string) {
	start := time.Now()
	for _, d := range slices.Sorted(maps.Keys(words)) {
		time.Sleep(time.Until(start.Add(d)))
		say(s, ops.CreateContact, words[d])
	}
}

// TestASlowFallIsNoBucketsMove: a sliding log until full (t a window
// after its newest take) taken one write every 6 s with little left: its
// moment moves by the time between takes, which over a fall of 4 writes in
// 24 s is within t's rounding of what a bucket's would move (the fall and
// the refill meanwhile), and r and t add up to its size. Only a fall at
// the quota's rate or faster tells them apart: after two such falls the
// write level must not refill continuously.
func TestASlowFallIsNoBucketsMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		answerWritesAt(s, map[time.Duration]string{
			0: `"write";r=5;t=60`, 6 * time.Second: `"write";r=4;t=60`, 12 * time.Second: `"write";r=3;t=60`,
			18 * time.Second: `"write";r=2;t=60`, 24 * time.Second: `"write";r=1;t=60`,
			30 * time.Second: `"write";r=5;t=54`, // the first takes left the window
			36 * time.Second: `"write";r=4;t=60`, 42 * time.Second: `"write";r=3;t=60`,
			48 * time.Second: `"write";r=2;t=60`, 54 * time.Second: `"write";r=1;t=60`,
		})
		if l := s.levels[Write]; l.bucket || l.refills() {
			t.Error("a sliding log taken one write every 6 s read as a bucket")
		}
	})
}

// TestABucketThatRoseIsReadFromTheRise: a write bucket (60, one a second)
// refilled while idle from 30 to 50; the writes that follow, 6 a second,
// move its moment from there. The reading starts again where r rose, not
// from the answer before it, and the write level refills continuously.
func TestABucketThatRoseIsReadFromTheRise(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		answerWritesAt(s, map[time.Duration]string{
			0: `"write";r=30;t=30`, 20 * time.Second: `"write";r=50;t=10`,
			21 * time.Second: `"write";r=44;t=16`, 22 * time.Second: `"write";r=38;t=22`,
		})
		if l := s.levels[Write]; !l.bucket {
			t.Error("a write bucket that rose while idle and then fell 6 a second did not read as a bucket")
		}
	})
}

// TestASlidingLogAcrossAGapIsNoBucket: reads whose answers name the write
// level (a server that names the narrowest of all) show a sliding log
// until full across a gap in its takes: after the takes of a minute ago
// leave, r rises and t names a take of seconds ago, and the writes that
// follow move that moment as a bucket's would. r and t do not add up to
// the level's size, so the write level must not refill continuously.
func TestASlidingLogAcrossAGapIsNoBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		start := time.Now()
		var takes []time.Time
		word := func() string { // a sliding log of 60 a minute, t until it is full again
			for len(takes) > 0 && time.Since(takes[0]) >= time.Minute {
				takes = takes[1:]
			}
			reset := 0
			if len(takes) > 0 {
				reset = int(math.Ceil(time.Until(takes[len(takes)-1].Add(time.Minute)).Seconds()))
			}
			return fmt.Sprintf(`"write";r=%d;t=%d`, 60-len(takes), reset)
		}
		at := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }
		write := func() {
			tk, _ := admitAt(t, s, call(ops.CreateContact, ""))
			takes = append(takes, time.Now())
			tk.Finish(answer("", word()))
		}
		for cycle := range 3 {
			base := time.Duration(cycle) * time.Minute
			if cycle == 0 {
				for range 5 {
					write()
				}
			}
			at(base + 56*time.Second)
			write()
			at(base + 60*time.Second + 200*time.Millisecond)
			tk, _ := admitAt(t, s, call(ops.GetContact, ""))
			tk.Finish(answer("", word()))
			for range 4 {
				write()
			}
		}
		if l := s.levels[Write]; l.bucket {
			t.Errorf("the write level after a sliding log's answers across a gap: bucket")
		}
	})
}

// TestABucketShowsInAnyOrderOfItsAnswers: six writes sent at once arrive
// at once, the server counts them in one order and their answers are read
// in another, while each caller sends its next write as soon as it has its
// answer. A bucket's r and t (t until full again, at the quota's rate)
// still show it: the write level refills continuously before the writes
// have emptied it. The same r with a sliding log's t (a window after the
// newest take) or a fixed window's (its end) shows no bucket.
func TestABucketShowsInAnyOrderOfItsAnswers(t *testing.T) {
	for _, shape := range []string{"bucket", "sliding log", "fixed window"} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			reset := func(left int) int {
				switch shape {
				case "bucket":
					return 60 - left
				case "sliding log":
					return 60
				}
				return 37 - int(time.Since(start).Seconds()) // the window ends 37 s after the first write
			}
			s := New()
			admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", `"write";r=59;t=1`))
			var flight []*Ticket
			for range 6 {
				tk, _ := admitAt(t, s, call(ops.CreateContact, ""))
				flight = append(flight, tk)
			}
			counted := 1
			for counted < 40 {
				time.Sleep(30 * time.Millisecond)
				// The six arrived at once and the server counted them in
				// one order; their answers are read in another.
				for _, i := range []int{1, 0, 4, 5, 3, 2} {
					left := 60 - counted - []int{5, 6, 2, 1, 3, 4}[i]
					flight[i].Finish(answer("", fmt.Sprintf(`"write";r=%d;t=%d`, left, reset(left))))
					flight[i], _ = admitAt(t, s, call(ops.CreateContact, "")) // its caller sends the next at once
				}
				counted += 6
			}
			if l := s.levels[Write]; l.bucket != (shape == "bucket") {
				t.Errorf("the write level after %d writes on a %s, answered out of order: bucket %v", counted, shape, l.bucket)
			}
		})
	}
}

// TestASharedLevelFreesWhatTheAnswersShow (rules 1 and 2 for a level others
// take from): its t says when it would be full if no one took more, and
// the refill that implies is a hint the answers contradict. Others keep
// the org nearly full; what frees for this key is what it took a window
// before, plus the refill the answers show beyond that. After a create
// took the last 5 of the org, nothing is left 30 s later (the quota's
// rate would have given 750) and 5 once the create has left the window;
// once the answers show the org refilling by 5 points/s, 5 are there 1 s
// after r=0.
func TestASharedLevelFreesWhatTheAnswersShow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		left := func() float64 { return availableOf(s, Org) }
		cost := call(ops.CreateContact, "").Cost
		admitNow(t, s, call(ops.CreateContact, "")).Finish(orgAnswer(cost))
		time.Sleep(30 * time.Second)
		admitNow(t, s, call(ops.CreateContact, "")).Finish(orgAnswer(0))
		time.Sleep(29 * time.Second)
		if got := left(); got != 0 {
			t.Errorf("%v left of the org 29 s after it said r=0, want 0", got)
		}
		time.Sleep(time.Second)
		if want := cost + call(ops.GetMe, "").Cost; left() != want { // learn's call left the window too
			t.Errorf("%v left of the org once the first create left the window, want %v", left(), want)
		}

		s = New()
		learn(t, s)
		for r := 100.0; r <= 250; r += 50 {
			admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(r))
			time.Sleep(10 * time.Second)
		}
		admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(0))
		time.Sleep(time.Second)
		if got := left(); got < 0.95*cost || got > 1.05*cost {
			t.Errorf("%v left 1 s after r=0 of an org whose answers showed it refilling by %v points/s, want about %v", got, cost, cost)
		}
	})
}

// TestACallWaitsForThisKeysTakeToLeaveALevelOthersTakeFrom: of an org that
// others keep full, whose answers 31 s apart showed it gaining nothing
// beyond this key's own takes, what frees for this key is what it took a
// window before. A call that finds nothing left goes when this key's first
// take leaves the window, 29 s on, not once the measure of no refill has
// expired a window after it was taken.
func TestACallWaitsForThisKeysTakeToLeaveALevelOthersTakeFrom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := orgRead(t, 10, 31*time.Second, 0)
		if _, waited := admitAt(t, s, call(ops.GetContact, "")); waited != 29*time.Second {
			t.Errorf("a call that found the org empty went %v later, want 29 s, when the first take left the window", waited)
		}
	})
}

// TestASharedLevelWhoseAnswersShowNoRefillGetsNone (rules 1 and 2 before
// the first measure of a level others take from, which spans half a
// window): an org whose answers show it freeing nothing but this key's own
// takes for a second or more frees nothing more, not the quota's refill,
// until an answer shows it moving; meanwhile it frees in steps, so a call
// that fits goes before a costlier one that waits.
func TestASharedLevelWhoseAnswersShowNoRefillGetsNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		get := func() *Call { return call(ops.GetContact, "") }
		r := 5.0
		admitNow(t, s, get()).Finish(orgAnswer(r))
		time.Sleep(500 * time.Millisecond)
		r -= get().Cost
		admitNow(t, s, get()).Finish(orgAnswer(r))
		time.Sleep(400 * time.Millisecond)
		if got := availableOf(s, Org); got < r+8 {
			t.Fatalf("%v left of the org 0.4 s after r=%v, its answers having shown no refill for 0.5 s, want the quota's refill (%v and more)", got, r, r+8)
		}
		time.Sleep(100 * time.Millisecond)
		r -= get().Cost
		admitNow(t, s, get()).Finish(orgAnswer(r))
		time.Sleep(2 * time.Second)
		if got := availableOf(s, Org); got > r+0.5 {
			t.Errorf("%v left of the org 2 s after r=%v, its answers having shown no refill for 1 s, want %v", got, r, r)
		}

		costly := call(ops.CreateContact, "") // 5 points, more than is left
		var wg sync.WaitGroup
		admitLater(t, s, &wg, costly)
		if b := s.Snapshot(); b.Waiting != 1 {
			t.Fatalf("%d waiting, want the create", b.Waiting)
		}
		if why := held(s, get()); why != "" {
			t.Errorf("a call that fits what is left, behind one that waits for the org: held by %q, want it to go", why)
		}

		r += 20 // it refilled: the quota's refill stands again
		admitNow(t, s, get()).Finish(orgAnswer(r))
		time.Sleep(time.Second)
		if got := availableOf(s, Org); got < r+10 {
			t.Errorf("%v left of the org 1 s after an answer showed it refilling, want the quota's refill (%v and more)", got, r+10)
		}
		wg.Wait()

		// A fall beyond this key's takes (others took) ends it too.
		s = flatOrg(t, 30)
		time.Sleep(2 * time.Second)
		tk, _ := admitAt(t, s, get())
		tk.Finish(orgAnswer(30 - get().Cost - 20))
		time.Sleep(time.Second)
		if got, want := availableOf(s, Org), 9.0+20; got < want {
			t.Errorf("%v left of the org 1 s after an answer showed others taking, want the quota's refill (%v and more)", got, want)
		}

		// Unnamed for an eighth of the window, it binds no more: a call
		// too costly for what is left goes then and asks.
		s = flatOrg(t, 3)
		tk, d := admitAt(t, s, call(ops.ListContacts, "q=a")) // 7 points
		if d < 5*time.Second || d > 8*time.Second {
			t.Errorf("a 7-point call on r=3 of an org unnamed since waited %v, want until an eighth of the window after the last answer", d)
		}
		tk.Finish(orgAnswer(0))
	})
}

// flatOrg is a state whose org answers showed r falling by this key's takes
// alone for a second, to r.
func flatOrg(t *testing.T, r float64) *State {
	s := New()
	learn(t, s)
	for _, r := range []float64{r + 2, r + 1, r} {
		admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(r))
		time.Sleep(500 * time.Millisecond)
	}
	return s
}

// TestAFreeTheServersWordCountsIsNotFreedAgain: a take of this key's on a
// level others take from leaves the server's window a window after the
// server counted it, which may be before the model logs it free (a window
// after its answer was read); an answer counted in between says what it
// freed, and the model must not free it once more.
func TestAFreeTheServersWordCountsIsNotFreedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		time.Sleep(10 * time.Second)
		cost := call(ops.CreateContact, "").Cost
		tk := admitNow(t, s, call(ops.CreateContact, ""))
		time.Sleep(time.Second) // counted at once, its answer read a second later
		tk.Finish(orgAnswer(0))
		time.Sleep(59*time.Second + 500*time.Millisecond)
		const r = 5
		admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(r)) // counts the create's free
		time.Sleep(time.Second)
		if got := availableOf(s, Org); got >= r+cost/2 {
			t.Errorf("%v left of the org a window after the create's answer, want about the %v the last answer said: the create's %v was freed again", got, r, cost)
		}
	})
}

// TestAReplayTakesNoTurnOfASpreadLevel: a write level that frees in steps
// spreads its writes, a turn a second; the retry of a write whose answer
// was lost waits for a turn like any write, but when its answer says it
// was an idempotent replay, the server counted no write, and the turn goes
// to the next write at once.
func TestAReplayTakesNoTurnOfASpreadLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		r := spreadWrites(t, s)
		c := call(ops.CreateContact, "")
		writeTurn(t, s)
		admitNow(t, s, c).Unanswered(true, false) // committed, the answer lost
		writeTurn(t, s)
		replay := answer("", fmt.Sprintf(`"write";r=%d;t=60`, r-1))
		replay.Header.Set("Idempotent-Replayed", "true")
		admitNow(t, s, c).Finish(replay)
		if why := held(s, call(ops.CreateContact, "")); why != "" {
			t.Errorf("the write after a replayed retry is held by %q: the replay took a turn of the spread", why)
		}
	})
}

// TestARefusalTakesNoTurnOfASpreadLevel: a write level that frees in
// steps spreads its writes, a turn a second. A write refused at its turn
// by an OVERLOADED took nothing of the level, and the OVERLOADED's wait
// holds every call of the key: its turn goes back, so that once the wait
// is over the write goes again at once instead of a turn later. Under a
// spread that runs at the level's rate, a turn not given back is a write
// the level would have let through and never gets. Any other refusal
// keeps the turn: one by the level says there was no room at it (the
// retry goes at the level's moment all the same, rule 1), and one whose
// wait holds nothing, or holds only a level the call takes from, would be
// retried at once, again and again, with the turn given back (a 503 whose
// body was cut off has no problem at all).
func TestARefusalTakesNoTurnOfASpreadLevel(t *testing.T) {
	const wait = 100 * time.Millisecond
	cutOff := Answer{Status: http.StatusServiceUnavailable, Header: http.Header{}}
	for _, tc := range []struct {
		name    string
		refused Answer
		back    bool
	}{
		{"OVERLOADED", refusal(http.StatusServiceUnavailable, codeOverloaded, "", wait), true},
		{"RATE_LIMITED on write", refusal(http.StatusTooManyRequests, codeRateLimited, Write, wait), false},
		{"RATE_LIMITED on key", refusal(http.StatusTooManyRequests, codeRateLimited, Key, wait), false},
		{"503 without a problem", cutOff, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New()
				spreadWrites(t, s)
				writeTurn(t, s)
				tk := admitNow(t, s, call(ops.CreateContact, ""))
				turns := func() float64 {
					s.mu.Lock()
					defer s.mu.Unlock()
					return s.levels[Write].pace.tokens
				}
				before := turns()
				tk.Finish(tc.refused)
				if after := turns(); (after > before+0.5) != tc.back {
					t.Errorf("the spread holds %.2f turns after the refusal, %.2f before it; want the turn back: %v", after, before, tc.back)
				}
				if !tc.back {
					return
				}
				if _, waited := admitAt(t, s, call(ops.CreateContact, "")); waited > wait {
					t.Errorf("after a write refused at its turn, the next waited %v, want the refusal's wait of %v", waited, wait)
				}
			})
		})
	}
}

// TestARefusalGivesItsTurnBackInTheStoreToo: with a shared store, the
// release of a write refused with an OVERLOADED refunds the write level
// with its pace, so that the store gives the turn back to every process;
// the release of one the level refused refunds no turn.
func TestARefusalGivesItsTurnBackInTheStoreToo(t *testing.T) {
	for _, refused := range []Answer{
		refusal(http.StatusServiceUnavailable, codeOverloaded, "", time.Second),
		refusal(http.StatusTooManyRequests, codeRateLimited, Write, time.Second),
	} {
		name := refused.Problem.Code
		if p := refused.Problem.Policy; p != "" {
			name += " on " + p
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &refundLogStore{downStore: downStore{refunded: map[string]float64{}}}
				s := New()
				s.UseStore(st, "k", nil)
				admitNow(t, s, call(ops.GetMe, "")).Finish(answer("", `"key";r=600;t=0`))
				for r := 59; r > 50; r-- {
					admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", fmt.Sprintf(`"write";r=%d;t=60`, r)))
				}
				s.mu.Lock()
				spreads := s.levels[Write].spreads(time.Now())
				s.mu.Unlock()
				if !spreads {
					t.Fatal("the write level does not spread")
				}
				admitNow(t, s, call(ops.CreateContact, "")).Finish(refused)
				w, ok := st.refundOf(Write)
				if gaveBack := refused.Problem.Policy != Write; !ok || (w.Pace > 0) != gaveBack {
					t.Errorf("the release refunded %+v of the write level (found %v), want its turn back: %v", w, ok, gaveBack)
				}
				time.Sleep(time.Minute)
			})
		})
	}
}

// refundLogStore is a downStore that keeps the last refund of each level
// that a release carried.
type refundLogStore struct {
	downStore
	mu      sync.Mutex
	refunds map[string]budgetstore.Level
}

func (d *refundLogStore) Release(ctx context.Context, key string, r budgetstore.Release) error {
	d.mu.Lock()
	for _, l := range r.Refund {
		if d.refunds == nil {
			d.refunds = map[string]budgetstore.Level{}
		}
		d.refunds[l.Name] = l
	}
	d.mu.Unlock()
	return d.downStore.Release(ctx, key, r)
}

func (d *refundLogStore) refundOf(name string) (budgetstore.Level, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.refunds[name]
	return l, ok
}

// spreadWrites has s's write level show that it frees in steps (a t of a
// window after each write) until its spread holds the next write; it
// returns what the next write's answer leaves.
func spreadWrites(t *testing.T, s *State) (r int) {
	t.Helper()
	admitNow(t, s, call(ops.GetMe, "")).Finish(answer("", `"key";r=600;t=0`))
	r = 59
	for ; r >= 0 && held(s, call(ops.CreateContact, "")) == ""; r-- {
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", fmt.Sprintf(`"write";r=%d;t=60`, r)))
	}
	if why := held(s, call(ops.CreateContact, "")); why != ReasonPace {
		t.Fatalf("the write after %d is held by %q, want the spread's pace", 59-r, why)
	}
	return r
}

// writeTurn waits until a write may go, at most a minute.
func writeTurn(t *testing.T, s *State) {
	t.Helper()
	for end := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		why := held(s, call(ops.CreateContact, ""))
		if why == "" {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("a write is still held by %q after a minute", why)
		}
	}
}

// TestASpreadLevelSpreadsWhatIsLeft: a write level that frees in steps
// and has only 11 left until its oldest write leaves the window (others
// took the rest) spreads those 11 over that time, a tenth of them at
// once: a burst of a tenth of its size (6) would leave 5 for the 58 s
// after it, and every caller that waits on a write would wait 11 s and
// more between them.
func TestASpreadLevelSpreadsWhatIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer("", `"key";r=600;t=0`))
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", `"write";r=59;t=60`))
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", `"write";r=11;t=60`))
		start, last := time.Now(), time.Now()
		var gaps []time.Duration
		for range 11 {
			tk, _ := admitAt(t, s, call(ops.CreateContact, ""))
			gaps = append(gaps, time.Since(last))
			last = time.Now()
			tk.Finish(answer("", ""))
		}
		if el := time.Since(start); el > 60*time.Second || el < 50*time.Second {
			t.Errorf("the 11 writes left took %v, want them spread over the 60 s until the window frees", el)
		}
		for i, g := range gaps {
			if g > 7*time.Second {
				t.Errorf("write %d of the 11 left waited %v after the one before, want at most 7 s (11 spread over 60 s): %v", i+1, g, gaps)
				break
			}
		}
	})
}

// TestASpreadPolicyCountsItsRefill: a policy the contract does not
// document (20 searches a minute), tied to searches by two answers that
// show it going down, frees in steps (t=60 with 18 left). The model
// refills it at its quota's rate, since others may take from it too; its
// spread counts that refill beside what is left until the key's oldest
// search leaves the window, so that drained searches go as the refill lets
// them, one every 3 s, and not one a minute.
func TestASpreadPolicyCountsItsRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		search := func() *Call { return call(ops.ListContacts, "q=a") }
		admitNow(t, s, search()).Finish(answer(`"search";q=20;w=60`, `"search";r=19;t=60`))
		admitNow(t, s, search()).Finish(answer("", `"search";r=18;t=60`))
		admitNow(t, s, search()).Finish(answer("", `"search";r=0;t=60`))
		start := time.Now()
		for range 5 {
			tk, _ := admitAt(t, s, search())
			tk.Finish(answer("", `"search";r=0;t=60`))
		}
		if el := time.Since(start); el > 20*time.Second || el < 12*time.Second {
			t.Errorf("5 searches on a drained policy that refills 1 every 3 s took %v, want about 15 s", el)
		}
	})
}

// TestALevelOthersTakeFromInChunksKeepsAChunkBack: the answers of the org
// show no refill beyond what this key takes over half a window, and then
// another key taking 30 points at once between two of them. With 40
// left, a 7-point search goes and a second waits: 30 of them are kept back
// for the other key's next take, which a call sent on the last r would
// meet. What is kept back binds while answers name the org: with 20 left
// and nothing refilling, the search waits until the org has gone unnamed
// for an eighth of its window (7.5 s), when the other key's next take has
// come or will not, and then goes as the org's spread over its window lets
// it (at 10.7 s). A fall since an answer 20 s before is no take at once:
// nothing is kept back.
func TestALevelOthersTakeFromInChunksKeepsAChunkBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		search := func() *Call { return call(ops.ListContacts, "q=a") }
		admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(100))
		time.Sleep(31 * time.Second)
		admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(99)) // no refill beyond this key's takes
		admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(68)) // the other key took 30
		took := time.Now()
		admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(40))
		first := admitNow(t, s, search())
		if why := held(s, search()); why != Org {
			t.Errorf("a second search with 33 of the org left, 30 of them kept back: held by %q, want %q", why, Org)
		}
		first.Finish(orgAnswer(20))
		if why := held(s, search()); why != Org {
			t.Errorf("a search with 20 of the org left, the other key's take of 30 just now: held by %q, want %q", why, Org)
		}
		_, waited := admitAt(t, s, search())
		if goes := time.Since(took); goes < 7500*time.Millisecond || goes > 15*time.Second {
			t.Errorf("the search went %v after the other key's take and the last word on the org (waited %v), want 7.5 s to 15 s: once no answer has named the org for 7.5 s", goes, waited)
		}

		// 20 s without word on the org, which falls by 79 meanwhile:
		// many takes and refills, not one at once, and nothing is kept
		// back.
		s = New()
		learn(t, s)
		admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(100))
		time.Sleep(31 * time.Second)
		admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(99))
		time.Sleep(20 * time.Second)
		admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(20))
		if why := held(s, search()); why != "" {
			t.Errorf("a search with 20 of the org left, which fell by 79 over 20 s without word: held by %q, want none", why)
		}
	})
}

// TestAReserveLapsesWhileNoAnswerNamesTheLevel: what the org keeps back for
// the other key's next take holds calls while the server names the org,
// and not once it has gone unnamed for an eighth of its window (7.5 s):
// the calls it held sent nothing that could show that take. The next
// answer naming the org brings it back.
func TestAReserveLapsesWhileNoAnswerNamesTheLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := orgFallen(t)
		get := func() *Call { return call(ops.GetContact, "") }
		org := s.levels[Org]
		if d := org.wait(120, time.Now()); d != 7500*time.Millisecond+1 {
			t.Errorf("120 of the 148 left, 50 kept back, nothing refilling: waits %v, want 7.5 s, until the reserve lapses", d)
		}
		time.Sleep(7500 * time.Millisecond)
		if r := org.reserve(time.Now()); r != 50 {
			t.Errorf("kept back 7.5 s after the last answer naming the org: %v, want 50", r)
		}
		time.Sleep(time.Millisecond)
		if r := org.reserve(time.Now()); r != 0 {
			t.Errorf("kept back once the org has gone unnamed for more than 7.5 s: %v, want none", r)
		}
		admitNow(t, s, get()).Finish(orgAnswer(147))
		if r := org.reserve(time.Now()); r != 50 {
			t.Errorf("kept back after the next answer naming the org: %v, want the 50 again", r)
		}
	})
}

// TestAReserveHoldsWhileCallsTakeFromTheLevel: answers that name another
// level (the key) to calls that take from the org say nothing of what the
// other key took of the org meanwhile, so what the org keeps back for its
// next take holds as long as such calls are answered; status answers do
// not keep it. It lapses an eighth of the window (7.5 s) after the last of
// them; then one call goes, and it holds again while that call is in
// flight (not while an older one is): a costly call waits for that call's
// answer, not in steps of a millisecond.
func TestAReserveHoldsWhileCallsTakeFromTheLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := orgFallen(t)
		org := s.levels[Org]
		get := func() *Call { return call(ops.GetContact, "") }
		long := admitNow(t, s, get()) // in flight throughout
		for range 10 {
			time.Sleep(2 * time.Second)
			admitNow(t, s, get()).Finish(answer("", `"key";r=500;t=20`))
		}
		if r := org.reserve(time.Now()); r != 50 {
			t.Errorf("kept back after 20 s of reads answered naming the key: %v, want 50", r)
		}
		for range 4 {
			time.Sleep(5 * time.Second)
			status := call(ops.GetRateLimit, "")
			status.Status = true
			admitNow(t, s, status).Finish(answer("", ""))
		}
		if r := org.reserve(time.Now()); r != 0 {
			t.Errorf("kept back 20 s after the last answer to a call that took from the org, with status answers since: %v, want none", r)
		}
		probe := admitNow(t, s, get())
		if r := org.reserve(time.Now()); r != 50 {
			t.Errorf("kept back while the call sent once it lapsed is in flight: %v, want 50 again", r)
		}
		if d := org.wait(120, time.Now()); d < time.Second {
			t.Errorf("120 of the org, held by the reserve while that call is in flight: waits %v, want until its answer or 7.5 s", d)
		}
		probe.Finish(refusal(http.StatusServiceUnavailable, codeOverloaded, "", 0))
		if r := org.reserve(time.Now()); r != 0 {
			t.Errorf("kept back after the call sent once it lapsed ended unanswered by the org, an older one still in flight: %v, want none", r)
		}
		long.Finish(answer("", ""))
	})
}

// orgFallen is a state whose org showed no refill beyond this key's takes
// over half a window and then fell by 50 that another key took at once.
func orgFallen(t *testing.T) *State {
	s := New()
	learn(t, s)
	admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(200))
	time.Sleep(31 * time.Second)
	admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(199))
	admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(148))
	return s
}

// orgAnswer is an answer naming the org, a minute's 3000, with r left.
func orgAnswer(r float64) Answer {
	return answer(`"org";q=3000;w=60`, fmt.Sprintf(`"org";r=%g;t=60`, r))
}

// TestTheLargestRecentFallIsKeptBack: of the falls others caused within
// the last window, the largest is kept back, also after a smaller later
// one; once it has left the window, the next largest binds. A larger later
// fall ends a smaller earlier one.
func TestTheLargestRecentFallIsKeptBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := orgFallen(t) // 148 left, after a fall of 50
		get := func() *Call { return call(ops.GetContact, "") }
		org := s.levels[Org]
		left := 148.0
		say := func(fall float64) { // an answer naming the org, after a fall
			left -= 1 + fall
			admitNow(t, s, get()).Finish(orgAnswer(left))
		}
		for range 4 { // 20 s with word on the org every 5 s, no fall
			time.Sleep(5 * time.Second)
			say(0)
		}
		say(20)
		if r := org.reserve(time.Now()); r != 50 {
			t.Errorf("kept back after falls of 50 and then 20: %v, want 50", r)
		}
		for range 8 { // the fall of 50 leaves the window
			time.Sleep(5 * time.Second)
			say(0)
		}
		if r := org.reserve(time.Now()); r != 20 {
			t.Errorf("kept back once the fall of 50 has left the window: %v, want the 20 of the later one", r)
		}
		say(30)
		if r, n := org.reserve(time.Now()), len(org.others.drops); r != 30 || n != 1 {
			t.Errorf("kept back after a fall of 30 that came after one of 20: %v of %d falls, want 30 of 1", r, n)
		}
		for range 13 {
			time.Sleep(5 * time.Second)
			say(0)
		}
		if r := org.reserve(time.Now()); r != 0 {
			t.Errorf("kept back once every fall has left the window: %v, want none", r)
		}
	})
}

// TestAGuessGoesAlone: of a level others take from, what this key's takes
// freed since the server's last word on it the others may have taken by
// now, and so may they, where they take in chunks, what a word older than
// the reserve measures. One
// call takes of it; the others take only what a recent word left until
// that call's answer says what is left, or for at most an eighth of the
// window.
func TestAGuessGoesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, first, guess := guessing(t)
		create := func() *Call { return call(ops.CreateContact, "") }
		if why := held(s, create()); why != Org {
			t.Errorf("a third call while the one that took of what was freed is in flight: held by %q, want the org", why)
		}
		if d := s.levels[Org].wait(5, time.Now()); d <= 0 || d > 7500*time.Millisecond+1 {
			t.Errorf("the third call waits %v, want until the answer or at most 7.5 s", d)
		}
		guess.Finish(orgAnswer(276)) // no one else took what was freed
		if why := held(s, create()); why != "" {
			t.Errorf("a third call once the answer said 276 were left: held by %q, want it to go", why)
		}
		first.Finish(orgAnswer(249)) // the others took 27 at once
		if r := s.levels[Org].reserve(time.Now()); r <= 0 {
			t.Fatalf("kept back after a fall of 27: %v, want some", r)
		}

		time.Sleep(3 * time.Second) // the word is older than the reserve measures
		alone := admitNow(t, s, create())
		if why := held(s, create()); why != Org {
			t.Errorf("a call while one sent on a word 3 s old is in flight: held by %q, want the org", why)
		}
		alone.Finish(orgAnswer(244))
		if why := held(s, create()); why != "" {
			t.Errorf("a call once the answer said 244 were left: held by %q, want it to go", why)
		}
	})
}

// guessing is a state whose org the server named 1.5 s ago with 6 left,
// after 280 points this key took a window before were freed: first took
// 5 of the word, guess goes on what was freed.
func guessing(t *testing.T) (s *State, first, guess *Ticket) {
	s = New()
	learn(t, s)
	for range 40 {
		admitNow(t, s, call(ops.ListContacts, "q=a")).Finish(answer("", ""))
	}
	time.Sleep(59500 * time.Millisecond)
	admitNow(t, s, call(ops.GetContact, "")).Finish(orgAnswer(6))
	time.Sleep(1500 * time.Millisecond)
	first = admitNow(t, s, call(ops.CreateContact, ""))
	guess = admitNow(t, s, call(ops.CreateContact, ""))
	return s, first, guess
}

// TestAGuessWaitsAtMostUntilTheReserveLapses: a call held behind a guess
// whose answer does not come goes once an eighth of the window has passed,
// and the others then wait for it.
func TestAGuessWaitsAtMostUntilTheReserveLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, first, guess := guessing(t)
		create := func() *Call { return call(ops.CreateContact, "") }
		time.Sleep(7500 * time.Millisecond)
		if why := held(s, create()); why != Org {
			t.Errorf("a guess 7.5 s after the one in flight went: held by %q, want the org", why)
		}
		time.Sleep(time.Millisecond)
		next := admitNow(t, s, create())
		if why := held(s, create()); why != Org {
			t.Errorf("a guess while the one sent once the reserve lapsed is in flight: held by %q, want the org", why)
		}
		first.Finish(answer("", ""))
		guess.Finish(answer("", ""))
		next.Finish(answer("", ""))
	})
}

// TestAGuessIsNoneWhereAnswersNameAnotherLevel: once the answers to calls
// that take from the org name another level, their words say nothing of
// the org, and a call on the org's refill goes beside the one in flight.
func TestAGuessIsNoneWhereAnswersNameAnotherLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, first, guess := guessing(t)
		first.Finish(answer("", `"key";r=500;t=20`))
		if why := held(s, call(ops.CreateContact, "")); why != "" {
			t.Errorf("a call on the org's refill once an answer named the key: held by %q, want it to go", why)
		}
		guess.Finish(answer("", ""))
	})
}

// TestTheFallsKeptBackAreThoseOfAPartOfTheWindow: what others took at once
// is read between two answers at most a 30th of the level's window apart
// (2 s of a minute); on a server that counts in shorter windows, the
// same part of them.
func TestTheFallsKeptBackAreThoseOfAPartOfTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, left := New(), 400.0
		learn(t, s)
		org := s.levels[Org]
		say := func(after time.Duration, fall float64) {
			time.Sleep(after)
			left -= 1 + fall
			admitNow(t, s, call(ops.GetContact, "")).Finish(answer(`"org";q=500;w=10`, fmt.Sprintf(`"org";r=%g;t=1`, left)))
		}
		say(0, 0)
		say(500*time.Millisecond, 40) // a 20th of the window: many takes
		if r := org.reserve(time.Now()); r != 0 {
			t.Errorf("kept back after a fall across half a second of a 10 s window: %v, want none", r)
		}
		say(300*time.Millisecond, 40) // a 33rd of it: one take
		if r := org.reserve(time.Now()); r != 40 {
			t.Errorf("kept back after a fall across 0.3 s of a 10 s window: %v, want 40", r)
		}
	})
}

// TestAWordsMomentPastTheCallsMaxHoldFailsIt (rule 1): a word that leaves
// a level nothing until a moment a day away ("delete-day";r=0;t=86000) is
// a wait the server asks, as a refusal would: a delete that may sit out a
// minute (MaxHold) fails at once with ErrHoldTooLong and the wait, and
// does not wait a day. One a word leaves waiting less than that goes at
// the moment.
func TestAWordsMomentPastTheCallsMaxHoldFailsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.DeleteContact, "")).Finish(answer("", `"delete-day";r=0;t=86000`))
		del := call(ops.DeleteContact, "")
		del.MaxHold = time.Minute
		if why, wait := holdTooLong(t, s, del); why != DeleteDay || wait != 86000*time.Second {
			t.Errorf("a delete a day before delete-day's moment, sitting out a minute: held by %s for %v; want ErrHoldTooLong at once, for delete-day's day", why, wait)
		}

		writes(t, s, 9, `"write";r=30;t=60`)
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", `"write";r=0;t=50`))
		w := call(ops.CreateContact, "")
		w.MaxHold = time.Minute
		if _, waited := admitAt(t, s, w); waited != 50*time.Second {
			t.Errorf("a write 50 s before the write level's moment, sitting out a minute, went after %v, want 50 s", waited)
		}
	})
}
