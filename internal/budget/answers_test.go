package budget

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/ops"
)

// TestRefusalsAndAttemptsLostInFlightFillTheGuard: the lockout guard
// counts every 429 and every attempt that left without an answer, which
// the server may have refused; at RefusalLimit of them it holds the key's
// calls, unbudgeted ones too.
func TestRefusalsAndAttemptsLostInFlightFillTheGuard(t *testing.T) {
	s := New()
	for i := range RefusalLimit {
		tk := admitNow(t, s, unbudgeted(ops.GetMe))
		if i%2 == 0 {
			tk.Unanswered(true, false)
		} else {
			tk.Finish(refusal(http.StatusTooManyRequests, "", "", 0))
		}
	}
	if why := held(s, unbudgeted(ops.GetMe)); why != ReasonGuard {
		t.Errorf("after %d refusals and attempts lost in flight a call is held by %q, want %q", RefusalLimit, why, ReasonGuard)
	}
}

// TestARefusalNeverReadHoldsTheKeyForItsHeadersWait: a refusal whose body
// was still being read when its attempt ended unanswered (a middleware
// made it an error) holds the key's budgeted calls for the wait its
// headers asked.
func TestARefusalNeverReadHoldsTheKeyForItsHeadersWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		tk := admitNow(t, s, call(ops.GetContact, ""))
		tk.Reading(3 * time.Second)
		tk.Unanswered(true, false)
		if d, why := holdOf(s, call(ops.GetContact, "")); why != ReasonServer || d != 3*time.Second {
			t.Errorf("after a refusal never read asked 3s in its headers a call is held %v by %q, want 3s by %q", d, why, ReasonServer)
		}
	})
}

// TestAStatusCountsWhatWasChargedAfterItWasAdmitted: what a status answer
// says is left of a level the status takes nothing from does not count
// what was charged to it after the status was admitted, which the server
// may not have counted when it answered.
func TestAStatusCountsWhatWasChargedAfterItWasAdmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		for range 57 {
			admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", ""))
		}
		sc := statusCall()
		status := admitNow(t, s, sc)
		for range 3 {
			admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", ""))
		}
		status.Finish(answer("", ""))
		s.ObserveStatus(sc, []LevelStatus{{Name: Write, Remaining: 3, Reset: 30 * time.Second}})
		if got := availableOf(s, Write); got > 0 {
			t.Errorf("a status that said 3 writes are left, answered after 3 writes admitted after it, leaves %v, want none", got)
		}
	})
}

// TestSettleTakesNothingOfANegativeAmountNorOfALevelTheKeyHasNot: Settle
// gives back only a positive amount, of a level the key models: a caller's
// negative amount takes nothing, here or in the shared store, and an
// unknown level's name does no harm.
func TestSettleTakesNothingOfANegativeAmountNorOfALevelTheKeyHasNot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &downStore{refunded: map[string]float64{}}
		s := New()
		s.UseStore(st, "k", nil)
		learn(t, s)
		c := call(ops.ListContacts, "limit=100")
		admitNow(t, s, c).Finish(answer("", ""))
		before := availableOf(s, Egress)
		s.Settle(c, Egress, -50)
		if after := availableOf(s, Egress); after < before {
			t.Errorf("settling -50 records took %v of egress", before-after)
		}
		st.mu.Lock()
		if got := st.refunded[Egress]; got != 0 {
			t.Errorf("settling -50 records gave the store %v of egress", got)
		}
		st.mu.Unlock()
		s.Settle(c, "no-such-level", 5)
		time.Sleep(time.Minute)
	})
}

// TestAnAnswerDropsALearnedLevelLeftIdle: a learned policy that no call
// used and no answer named for LevelIdleTTL is dropped by the next answer
// (here to a call outside the budget, which uses no level), also while the
// key has room for more policies.
func TestAnAnswerDropsALearnedLevelLeftIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer(`"burst";q=100;w=60`, ""))
		if _, ok := levelOf(s, "burst"); !ok {
			t.Fatal("the announced policy is not modelled")
		}
		time.Sleep(LevelIdleTTL + levelSweepEvery)
		admitNow(t, s, unbudgeted(ops.GetMe)).Finish(answer("", ""))
		if _, ok := levelOf(s, "burst"); ok {
			t.Errorf("a learned policy idle for %v is still modelled after an answer", LevelIdleTTL+levelSweepEvery)
		}
	})
}

// TestANewPolicyWithoutAWindowOrPastTheBoundIsNotModelled: a policy
// announced without a window would hold its calls forever, and one past
// MaxLearnedPolicies is past the bound on what answers make a key learn:
// neither becomes a level.
func TestANewPolicyWithoutAWindowOrPastTheBoundIsNotModelled(t *testing.T) {
	s := New()
	admitNow(t, s, call(ops.GetMe, "")).Finish(answer(`"forever";q=100`, ""))
	if _, ok := levelOf(s, "forever"); ok {
		t.Error("a new policy without a window is modelled")
	}
	var policies []string
	for i := range MaxLearnedPolicies + 8 {
		policies = append(policies, fmt.Sprintf(`"policy-%d";q=100;w=60`, i))
	}
	admitNow(t, s, call(ops.GetMe, "")).Finish(answer(strings.Join(policies, ", "), ""))
	if n := learnedLevels(s, "policy-"); n != MaxLearnedPolicies {
		t.Errorf("%d policies announced, %d modelled, want %d", len(policies), n, MaxLearnedPolicies)
	}
}

// learnedLevels counts s's levels whose names start with prefix.
func learnedLevels(s *State, prefix string) int {
	n := 0
	for _, l := range s.Snapshot().Levels {
		if strings.HasPrefix(l.Name, prefix) {
			n++
		}
	}
	return n
}

// TestRefusalsNamingManyPoliciesLearnAtMostTheBound: refusals that name
// policies the key never heard of make levels of at most
// MaxLearnedPolicies of them.
func TestRefusalsNamingManyPoliciesLearnAtMostTheBound(t *testing.T) {
	s := New()
	for i := range MaxLearnedPolicies + 8 {
		admitNow(t, s, unbudgeted(ops.GetMe)).Finish(refusal(http.StatusServiceUnavailable, codeRateLimited, fmt.Sprintf("policy-%d", i), 0))
	}
	if n := learnedLevels(s, "policy-"); n != MaxLearnedPolicies {
		t.Errorf("%d policies refused on, %d modelled, want %d", MaxLearnedPolicies+8, n, MaxLearnedPolicies)
	}
}

// TestAnAnnouncedPlanOtherThanTheContractsEndsThePrior is rule 8 through
// RateLimit-Policy: a key quota other than the contract's is another plan,
// whose key level holds its quota, not the contract's bucket of 600.
func TestAnAnnouncedPlanOtherThanTheContractsEndsThePrior(t *testing.T) {
	s := New()
	admitNow(t, s, call(ops.GetMe, "")).Finish(answer(`"key";q=150;w=60`, ""))
	if l, ok := levelOf(s, Key); !ok || l.Capacity != 150 {
		t.Errorf("after a policy of 150 a minute the key level holds %d when full, want 150", l.Capacity)
	}
}

// TestAPolicyLearnedInAnOutageIsPartedToo is rule 7 while the store is
// down: a policy first announced then is a level the process takes only
// its part of, as of the levels it knew before.
func TestAPolicyLearnedInAnOutageIsPartedToo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &downStore{refunded: map[string]float64{}}
		s := keyAfter(t, st, `"key";r=600;t=0`)
		st.setDown(true)
		tk := admitWithin(t, s, call(ops.GetContact, ""), 2*leaseTTL, "a read while the store is down")
		tk.Finish(answer(`"burst";q=100;w=60`, `"burst";r=50;t=30`))
		key, _ := levelOf(s, Key)
		burst, ok := levelOf(s, "burst")
		if !ok || key.Share >= 1 || burst.Share != key.Share {
			t.Errorf("in an outage the key's share is %v and the share of a policy learned then %v (modelled: %v), want the same part", key.Share, burst.Share, ok)
		}
		storeBack(st)
	})
}

// TestANewPartitionKeyMovesTheTargetsPartition: a target is in one
// partition of a policy: an answer that names another pk for it moves its
// partition there, and makes no second one.
func TestANewPartitionKeyMovesTheTargetsPartition(t *testing.T) {
	s := New()
	update := call(ops.UpdateContact, "")
	update.Target = "PATCH /v1/contacts/con_1"
	admitNow(t, s, update).Finish(answer(`"per-contact";q=2;w=60`, `"per-contact";r=1;t=60;pk=:AQ==:`))
	admitNow(t, s, update).Finish(answer("", `"per-contact";r=1;t=60;pk=:Ag==:`))
	var scopes []string
	for _, l := range s.Snapshot().Levels {
		if l.Name == "per-contact" && strings.HasPrefix(l.Scope, "partition") {
			scopes = append(scopes, l.Scope)
		}
	}
	if len(scopes) != 1 {
		t.Errorf("one target named in two partitions of a policy is in %d: %q", len(scopes), scopes)
	}
}

// TestAPaceUnderACeilingHoldsCallsAtItsPart: a pace under a ceiling (a
// process's part of the key while the store is down) paces its calls at
// that part of the rate, though its share is whole.
func TestAPaceUnderACeilingHoldsCallsAtItsPart(t *testing.T) {
	p := newPace()
	p.ceiling = 0.25
	now := time.Unix(0, 0)
	for i := 0; p.wait(1, 4, now) == 0; i++ {
		if i == 10 {
			t.Fatal("10 calls went at once at a pace of 4 a second under a ceiling of a quarter")
		}
		p.take(1, now)
	}
	if d := p.wait(1, 4, now); d != time.Second {
		t.Errorf("a call after the burst waits %v for a pace of 4 a second under a ceiling of a quarter, want 1s", d)
	}
}

// TestACutStartsFromAFullBurst: a pace that held no calls starts a cut with
// a full burst, whatever its calls ran it into before it was whole again.
func TestACutStartsFromAFullBurst(t *testing.T) {
	p := newPace()
	start := time.Unix(0, 0)
	p.cut(rateLimited, start.Add(-time.Millisecond), 0, 1, 0, start)
	if p.wait(100, 1, start) != 0 {
		t.Fatal("a call bigger than the burst waits for the cut pace")
	}
	p.take(100, start) // which runs it into debt
	for now := start; p.share < 1; now = now.Add(quietInterval) {
		p.adapt(now)
	}
	at := start.Add(time.Minute)
	if p.paces(at) {
		t.Fatal("the pace still holds calls a minute after its cut")
	}
	p.cut(rateLimited, at.Add(-time.Millisecond), 0, 1, 0, at)
	if d := p.wait(1, 1, at); d != 0 {
		t.Errorf("the first call after a new cut waits %v, want it to go on the burst", d)
	}
}

// fiveMinutesBehindAHintlessLimiter is a pace cut by a limiter that gave
// no hint, after 5 minutes of a caller always ready at 1 request a second
// behind it, which took its share past 1 (checked).
func fiveMinutesBehindAHintlessLimiter(t *testing.T) (*pace, func(time.Duration) time.Time) {
	t.Helper()
	p, at := cutByAHintlessLimiter()
	paced(p, 1, at(0), at(5*time.Minute))
	if p.share <= 1 {
		t.Fatalf("5 minutes behind the limiter the share is %v, want past 1", p.share)
	}
	return p, at
}

// TestACutOfAnotherKindStartsFromAWholeShare: while the pace counts
// requests for a limiter that gave no hint its share may be past 1; a
// RATE_LIMITED then cuts a share of at most 1.
func TestACutOfAnotherKindStartsFromAWholeShare(t *testing.T) {
	p, at := fiveMinutesBehindAHintlessLimiter(t)
	p.cut(rateLimited, at(5*time.Minute), 0, 1, 0, at(5*time.Minute+time.Millisecond))
	if p.share > rateLimitCut {
		t.Errorf("a RATE_LIMITED while the pace counts requests cut the share to %v, want at most %v", p.share, rateLimitCut)
	}
}

// TestAHintlessRefusalCutsToJustBelowWhatPassed: a hint-less refusal while
// the pace counts requests cuts the share to just below the rate that
// passed since the limiter was last empty, however far above it the share
// had climbed.
func TestAHintlessRefusalCutsToJustBelowWhatPassed(t *testing.T) {
	p, at := fiveMinutesBehindAHintlessLimiter(t)
	p.cut(hintless, at(5*time.Minute), 0, 1, 0.5, at(5*time.Minute+time.Millisecond))
	if want := hintlessBelow * 0.5; p.share > want+1e-9 {
		t.Errorf("with half a request a second passing the refusal cut the share to %v, want at most %v", p.share, want)
	}
}

// TestAPaceReportsARiseOnlyWhenItStepsUp: adapt reports a rise, which wakes
// the calls the pace holds, only once a quiet interval has passed since
// the last change, and never at the top.
func TestAPaceReportsARiseOnlyWhenItStepsUp(t *testing.T) {
	p := newPace()
	start := time.Unix(0, 0)
	if p.adapt(start) {
		t.Error("an uncut pace reports a rise")
	}
	p.cut(rateLimited, start.Add(-time.Millisecond), 0, 1, 0, start)
	if p.adapt(start.Add(quietInterval - time.Millisecond)) {
		t.Error("a pace reports a rise before a quiet interval passed")
	}
	if !p.adapt(start.Add(quietInterval)) {
		t.Error("a pace reports no rise after a quiet interval")
	}
	p.adapt(start.Add(time.Hour))
	if p.adapt(start.Add(2 * time.Hour)) {
		t.Error("a pace at its top reports a rise")
	}
}

// TestCallsSlowerThanAHintlessPaceLetItKeepItsLimiter: calls that find
// the pace full show nothing of a limiter that gave no hint: however long
// they go on, it is not forgotten.
func TestCallsSlowerThanAHintlessPaceLetItKeepItsLimiter(t *testing.T) {
	p, at := cutByAHintlessLimiter()
	for now := at(10 * time.Second); now.Before(at(hintlessFor + time.Minute)); now = now.Add(10 * time.Second) {
		p.adapt(now)
		if p.wait(1, 1, now) != 0 {
			t.Fatalf("a call %v after the refusal, 10 s after the last, waits", now.Sub(at(0)))
		}
		p.arrived(1, now)
		p.take(1, now)
	}
	if !p.counting(at(hintlessFor + time.Minute)) {
		t.Error("calls slower than the pace made it forget the limiter")
	}
}

// TestCallsThatComeBeforeTheHintlessPaceIsFullStepItUp: calls that go
// without waiting but find the pace less than full are held by it, as calls
// that wait are: the time counts, and the share steps up.
func TestCallsThatComeBeforeTheHintlessPaceIsFullStepItUp(t *testing.T) {
	p, at := cutByAHintlessLimiter()
	p.adapt(at(10 * time.Second))
	share := p.share
	for now := at(10 * time.Second); now.Before(at(15 * time.Second)); now = now.Add(500 * time.Millisecond) {
		p.adapt(now)
		if p.wait(0.5, 1, now) != 0 {
			t.Fatalf("a call %v after the refusal waits", now.Sub(at(0)))
		}
		p.arrived(1, now)
		p.take(0.5, now)
	}
	p.adapt(at(15 * time.Second))
	if p.share <= share {
		t.Errorf("5 s of calls that found the pace less than full left its share at %v", p.share)
	}
}

// TestAWaitTheServerDidNotGiveIsNoStep: a refusal without a hint of a wait
// steps its cut pace up each quietInterval, whatever its RetryAfter field
// holds.
func TestAWaitTheServerDidNotGiveIsNoStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		refused := refusal(http.StatusTooManyRequests, codeRateLimited, "", 0)
		refused.Problem.RetryAfter = 300 * time.Millisecond
		admitNow(t, s, call(ops.GetMe, "")).Finish(refused)
		time.Sleep(quietInterval / 2)
		if pace := s.Snapshot().Pace; pace != rateLimitCut {
			t.Errorf("%v after a RATE_LIMITED that gave no wait the pace is %v, want %v until a quiet interval passed", quietInterval/2, pace, rateLimitCut)
		}
	})
}

// TestAQuotaExhaustedThatSaysNoResetBlocksNothing: a QUOTA_EXHAUSTED with
// neither resetsAt nor a wait says nothing of when the quota comes back:
// it blocks no call.
func TestAQuotaExhaustedThatSaysNoResetBlocksNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		admitNow(t, s, call(ops.DeleteContact, "")).Finish(refusal(http.StatusTooManyRequests, codeQuotaExhausted, DeleteDay, 0))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		tk, _, err := s.Admit(ctx, call(ops.DeleteContact, ""))
		var exhausted *ExhaustedError
		if errors.As(err, &exhausted) {
			t.Fatalf("a delete after a QUOTA_EXHAUSTED that named no reset: %v", err)
		}
		if tk != nil {
			tk.Finish(answer("", ""))
		}
	})
}

// blockLogStore is a downStore that keeps the exhausted quotas the
// releases it got carried.
type blockLogStore struct {
	downStore
	mu     sync.Mutex
	blocks map[string]time.Time
}

func (d *blockLogStore) Release(ctx context.Context, key string, r budgetstore.Release) error {
	if r.Block != "" {
		d.mu.Lock()
		d.blocks[r.Block] = r.BlockUntil
		d.mu.Unlock()
	}
	return d.downStore.Release(ctx, key, r)
}

// TestAnExhaustedQuotaTellsTheStore is rule 7 of an exhausted quota: a
// QUOTA_EXHAUSTED of a level the key models is in the release that ends
// the refused attempt, until its resetsAt.
func TestAnExhaustedQuotaTellsTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &blockLogStore{downStore: downStore{refunded: map[string]float64{}}, blocks: map[string]time.Time{}}
		s := New()
		s.UseStore(st, "k", nil)
		learn(t, s)
		refused := refusal(http.StatusTooManyRequests, codeQuotaExhausted, DeleteDay, 0)
		resets := time.Now().Add(time.Hour)
		refused.Problem.ResetsAt = resets
		admitNow(t, s, call(ops.DeleteContact, "")).Finish(refused)
		st.mu.Lock()
		until, ok := st.blocks[DeleteDay]
		st.mu.Unlock()
		if !ok || !until.Equal(resets) {
			t.Errorf("the store was told of the exhausted %s until %v (told: %v), want until %v", DeleteDay, until, ok, resets)
		}
		time.Sleep(time.Minute)
	})
}

// TestStatusForAsksOnlyAboutALevelItMayAskAbout: StatusFor starts no
// status request about a level the key does not model, one that refills
// too little to spare a status's point, or one whose word is fresh.
func TestStatusForAsksOnlyAboutALevelItMayAskAbout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer(`"tiny";q=5;w=60`, `"key";r=0;t=60`))
		for _, name := range []string{"no-such-level", "tiny", Key} {
			if done, start := s.StatusFor(name, time.Now()); done != nil || start {
				t.Errorf("StatusFor(%q) asks (start %v)", name, start)
				s.StatusDone(false)
			}
		}
	})
}

// TestAStatusLockoutHoldsEveryCall: a lockout a status reports holds every
// call of the key, as a refusal naming it does.
func TestAStatusLockoutHoldsEveryCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		s.ObserveKeyStatus(time.Now().Add(30*time.Second), 0)
		if d, why := holdOf(s, unbudgeted(ops.GetMe)); why != ReasonLockout || d != 30*time.Second {
			t.Errorf("after a status reported a lockout of 30s a call is held %v by %q, want 30s by %q", d, why, ReasonLockout)
		}
	})
}

// TestAStatusSetsTheSlotsInFlight: a status's parallel quota sets the
// slots in flight.
func TestAStatusSetsTheSlotsInFlight(t *testing.T) {
	s := New()
	s.ObserveStatus(nil, []LevelStatus{{Name: Parallel, Quota: 2}})
	if got := s.Snapshot().InFlightCap; got != 2 {
		t.Errorf("after a status of a parallel quota of 2 the cap in flight is %d", got)
	}
}
