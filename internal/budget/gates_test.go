package budget

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/ops"
)

// TestAddDemandSumsLevelByLevel: the demand of calls added up holds each
// level once, with what all of them take from it, so that a batch bigger
// than a level is seen as such.
func TestAddDemandSumsLevelByLevel(t *testing.T) {
	sum := AddDemand(nil, []Demand{{Key, 2}, {Write, 1}})
	sum = AddDemand(sum, []Demand{{Key, 3}, {Egress, 20}, {Write, 1}})
	want := []Demand{{Key, 5}, {Write, 2}, {Egress, 20}}
	if len(sum) != len(want) {
		t.Fatalf("added up: %v, want %v", sum, want)
	}
	for i := range want {
		if sum[i] != want[i] {
			t.Errorf("added up: %v, want %v", sum, want)
			break
		}
	}
}

// TestAWaitEndedByItsContextFailsWithTheContextsError: a call whose
// context ends while it waits fails with the context's own error, and with
// the cause as well when the context was given another.
func TestAWaitEndedByItsContextFailsWithTheContextsError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.GetMe, "")) // slow start: the next call waits for its answer
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		_, _, err := s.Admit(ctx, call(ops.GetMe, ""))
		var he *HoldError
		if !errors.As(err, &he) || he.Err != context.Canceled {
			t.Errorf("a wait whose context was cancelled: %v, want a HoldError of context.Canceled itself", err)
		}

		why := errors.New("the caller gave up")
		ctx, cancelCause := context.WithCancelCause(context.Background())
		time.AfterFunc(time.Second, func() { cancelCause(why) })
		_, _, err = s.Admit(ctx, call(ops.GetMe, ""))
		if !errors.Is(err, context.Canceled) || !errors.Is(err, why) {
			t.Errorf("a wait whose context was cancelled with a cause: %v, want both context.Canceled and the cause", err)
		}
	})
}

// TestAnExhaustedQuotaRefusesNothingOnceItResets: the local refusal of an
// exhausted quota ends at the moment the server said it resets.
func TestAnExhaustedQuotaRefusesNothingOnceItResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := getsExhausted(t, "monthly")
		var ee *ExhaustedError
		if _, _, err := s.Admit(context.Background(), call(ops.GetContact, "")); !errors.As(err, &ee) {
			t.Fatalf("a get while its quota is exhausted: %v, want an ExhaustedError", err)
		}
		time.Sleep(time.Hour)
		admitWithin(t, s, call(ops.GetContact, ""), time.Minute, "a get once its exhausted quota reset").Finish(answer("", ""))
	})
}

// TestTheGuardLetsCallsGoAsItsOldestRefusalLeavesTheWindow: a key whose
// refusals fill the lockout guard holds its calls until the oldest of them
// leaves the guard's window, and no longer: no answer needs to come.
func TestTheGuardLetsCallsGoAsItsOldestRefusalLeavesTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		s.mu.Lock()
		for i := range RefusalLimit {
			s.refusals = append(s.refusals, time.Now().Add(time.Duration(i)*time.Second))
		}
		s.mu.Unlock()
		time.Sleep(RefusalLimit * time.Second)
		c := unbudgeted(ops.GetMe)
		if why := held(s, c); why != ReasonGuard {
			t.Fatalf("a call with %d refusals in the guard's window is held by %q, want %q", RefusalLimit, why, ReasonGuard)
		}
		start := time.Now()
		admitWithin(t, s, c, RefusalWindow, "a call held by the guard").Finish(answer("", ""))
		if want := RefusalWindow - RefusalLimit*time.Second; time.Since(start) != want {
			t.Errorf("a call held by the guard went after %v, want %v, when the oldest refusal left its window", time.Since(start), want)
		}
	})
}

// TestACallBehindAnotherAtTheGuardWaitsOnlyForItsTurn: with room in the
// lockout guard, a call that finds another queued there waits for that one
// to go, not for a refusal to leave the guard's window: a deadline before
// then does not fail it at once.
func TestACallBehindAnotherAtTheGuardWaitsOnlyForItsTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		s.mu.Lock()
		s.refusals = append(s.refusals, time.Now())
		first := unbudgeted(ops.GetMe)
		s.seq++
		first.w.seq, first.w.c = s.seq, first
		first.w.enter(&s.guardGate)
		s.mu.Unlock()
		if d, why := holdOf(s, unbudgeted(ops.GetMe)); why != ReasonGuard || d != 0 {
			t.Errorf("a call behind another at a guard with room is held %v by %q, want its turn at %q", d, why, ReasonGuard)
		}
		s.mu.Lock()
		first.w.leave()
		s.mu.Unlock()
	})
}

// TestAStatusPassesTheKeysPace: the client's own status request is not
// held by the key's pace, which the status is there to correct.
func TestAStatusPassesTheKeysPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		tk := admitNow(t, s, call(ops.GetContact, ""))
		time.Sleep(30 * time.Millisecond)
		tk.Finish(answer("", ""))
		var flight []*Ticket
		for range s.parallel {
			flight = append(flight, admitNow(t, s, call(ops.GetContact, "")))
		}
		for _, tk := range flight {
			tk.Finish(refusal(http.StatusTooManyRequests, "", "", 0))
		}
		if why := held(s, call(ops.GetContact, "")); why != ReasonPace {
			t.Fatalf("a get after a flight of bare 429s is held by %q, want %q", why, ReasonPace)
		}
		if why := held(s, statusCall()); why != "" {
			t.Errorf("a status after a flight of bare 429s is held by %q, want it to pass the pace", why)
		}
	})
}

// TestACallWithoutAnAnswerHoldsSlowStartAtMostSlowStartHold: the key's
// first call, never answered, holds the calls after it for SlowStartHold,
// and then they go.
func TestACallWithoutAnAnswerHoldsSlowStartAtMostSlowStartHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		first := admitNow(t, s, call(ops.GetMe, ""))
		start := time.Now()
		admitWithin(t, s, call(ops.GetMe, ""), 2*SlowStartHold, "a call after a first one never answered").Finish(answer("", ""))
		if time.Since(start) != SlowStartHold {
			t.Errorf("a call after a first one never answered went after %v, want %v", time.Since(start), SlowStartHold)
		}
		first.Unanswered(false, true)
	})
}

// TestSpendOnALevelTheKeyDoesNotHaveDoesNothing: Spend, which tests of
// other packages call by name, leaves the state alone for a name it has
// no level of.
func TestSpendOnALevelTheKeyDoesNotHaveDoesNothing(t *testing.T) {
	s := New()
	s.Spend("no-such-level", 0)
	if why := held(s, call(ops.GetMe, "")); why != "" {
		t.Errorf("a call after Spend on no level is held by %q", why)
	}
}

// TestAReadingMarkedTwiceOrLateEndsWithItsTicket: a refusal marked as
// being read more than once, or after its ticket ended, holds the key's
// requests at their last moment only until its ticket ends.
func TestAReadingMarkedTwiceOrLateEndsWithItsTicket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		twice := admitNow(t, s, call(ops.ListContacts, ""))
		late := admitNow(t, s, call(ops.ListContacts, ""))
		other := admitNow(t, s, call(ops.GetContact, ""))
		twice.Reading(0)
		twice.Reading(0)
		twice.Finish(answer("", ""))
		late.Finish(answer("", ""))
		late.Reading(0)
		start := time.Now()
		if d, _ := other.Bound(context.Background()); d != 0 || time.Since(start) != 0 {
			t.Errorf("a request at its last moment once every refusal read ended is bound by %v after %v, want none at once", d, time.Since(start))
		}
		other.Finish(answer("", ""))
	})
}

// TestALimiterThatLetNothingThroughIsNotRead: a meter that counted no
// call since the client began has no rate, also after a bare 429 marked
// the limiter empty: there is nothing to read the limiter from.
func TestALimiterThatLetNothingThroughIsNotRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var m meter
		m.from = time.Now()
		time.Sleep(5 * time.Second)
		if r := m.rate(time.Now()); r != 0 {
			t.Errorf("a meter that counted nothing reads %v a second, want 0", r)
		}
	})
}

// TestTheLastMomentLeavesWhatAnAttemptTookAsItWas: a request's last moment
// (Bound) that looks at an exhausted quota of another level leaves what
// its admitted attempt took, and the marks its answer is read against, as
// they were at its admission; also when a policy learned from another
// call's answer while the attempt is in flight adds a level the call may
// take from, so that its takes are worked out anew. Its answer is then read
// against those marks: what was charged after it was admitted (a get), not
// everything charged before.
func TestTheLastMomentLeavesWhatAnAttemptTookAsItWas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := learned(t)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
		admitNow(t, s, call(ops.CreateContact, "")).Finish(exhausted(Write))
		read := admitNow(t, s, call(ops.GetContact, ""))
		took := slices.Clone(read.taken)
		if d, _ := read.Bound(context.Background()); d != 0 {
			t.Fatalf("a read is bound by %v by the exhausted write quota", d)
		}
		if !slices.Equal(read.taken, took) {
			t.Errorf("what a read took after its last moment: %+v, want it as admitted: %+v", read.taken, took)
		}
		version := s.version
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer(`"hourly";q=1000;w=3600`, `"hourly";r=900;t=3000`))
		if s.version == version {
			t.Fatal("the answer added no level")
		}
		read.Bound(context.Background())
		if !slices.Equal(read.taken, took) {
			t.Errorf("what a read took after its last moment, once a level was added: %+v, want it as admitted: %+v", read.taken, took)
		}
		read.Finish(answer("", `"key";r=100;t=40`))
		s.mu.Lock()
		left := s.levels[Key].tokens
		s.mu.Unlock()
		if left != 99 {
			t.Errorf("the key level after the read's answer r=100: %g, want 99, less the get admitted after the read", left)
		}
	})
}

// TestAWordsMomentFailsACallByWhatItTakesOfTheLevel: whether the moment of
// a word past a call's MaxHold fails it at once is judged by what the call
// takes of the level: a list of 100 records, which even a bucket refilling
// egress at its quota's rate would hold longer than it waits, fails; a
// list of one waits for the moment.
func TestAWordsMomentFailsACallByWhatItTakesOfTheLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.ListContacts, "")).Finish(answer("", `"egress";r=0;t=1800`))
		big := call(ops.ListContacts, "limit=100")
		big.MaxHold = 10 * time.Second
		if why, wait := holdTooLong(t, s, big); why != Egress || wait != 30*time.Minute {
			t.Errorf("a list of 100 half an hour before egress's moment, sitting out 10 s: held by %s for %v; want ErrHoldTooLong at once, for egress's half hour", why, wait)
		}
		one := call(ops.ListContacts, "limit=1")
		one.MaxHold = 10 * time.Second
		if _, waited := admitAt(t, s, one); waited != 30*time.Minute {
			t.Errorf("a list of one half an hour before egress's moment, sitting out 10 s, went after %v, want 30m", waited)
		}
	})
}

// holdingStore is a downStore that holds, for a minute each time, every
// attempt that takes from the write level, for why.
type holdingStore struct {
	downStore
	why string
}

func (h *holdingStore) Acquire(ctx context.Context, key string, a budgetstore.Acquire) (budgetstore.Grant, error) {
	for _, l := range a.Levels {
		if l.Name == Write {
			return budgetstore.Grant{Wait: time.Minute, Reason: h.why}, nil
		}
	}
	return h.downStore.Acquire(ctx, key, a)
}

// TestTheStoresHoldQueuesTheCallsThatWaitForTheSame: a call the shared
// store holds at a level holds the process's calls that take from it
// behind it, in arrival order, and no other (rule 7); one it holds for the
// key as a whole holds every call behind it.
func TestTheStoresHoldQueuesTheCallsThatWaitForTheSame(t *testing.T) {
	for _, st := range []*holdingStore{{why: Write}, {why: ReasonPace}} {
		synctest.Test(t, func(t *testing.T) {
			st.refunded = map[string]float64{}
			s := keyAfter(t, st, `"key";r=600;t=0`)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { _, _, err := s.Admit(ctx, call(ops.CreateContact, "")); done <- err }()
			synctest.Wait()
			read, write := ReasonStore, ReasonStore
			if st.why == Write {
				read = ""
			}
			if why := held(s, call(ops.GetContact, "")); why != read {
				t.Errorf("the store holding a write for %q: a read is held by %q, want %q", st.why, why, read)
			}
			if why := held(s, call(ops.CreateContact, "")); why != write {
				t.Errorf("the store holding a write for %q: a second write is held by %q, want %q", st.why, why, write)
			}
			cancel()
			<-done
			storeBack(&st.downStore)
		})
	}
}

// TestAProcessThatLostTheStoreKeepsToItsShareOfTheSlots: one of four
// processes that lost the store has no more calls in flight than its
// share of the key's parallel quota (rule 7), however long it waits.
func TestAProcessThatLostTheStoreKeepsToItsShareOfTheSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &downStore{refunded: map[string]float64{}}
		s := keyAfter(t, st, `"key";r=600;t=0`)
		st.setDown(true)
		slots := shareOf(s.parallel, 4, 0)
		var inFlight []*Ticket
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for {
			tk, _, err := s.Admit(ctx, call(ops.GetContact, ""))
			if err != nil {
				break
			}
			inFlight = append(inFlight, tk)
		}
		cancel()
		if len(inFlight) != slots {
			t.Errorf("a process of four cut off from the store has %d calls in flight, want its share of %d slots: %d", len(inFlight), s.parallel, slots)
		}
		for _, tk := range inFlight {
			tk.Finish(answer("", ""))
		}
		storeBack(st)
	})
}

// TestALingerEndedReservesNoMoreThanTheShare: back from an outage within
// the rejoin window, a process whose leased call was given up on reserves
// its share in the store while the slot lingers, and once the linger ends
// its share again, not a slot more than it holds.
func TestALingerEndedReservesNoMoreThanTheShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, s := backInTheRejoinWindow(t)
		admitNow(t, s, call(ops.GetContact, "")).Unanswered(true, false)
		reserved := func() int {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.reservedLocked(time.Now())
		}
		if r := reserved(); r != 3 {
			t.Errorf("while a given-up call's slot lingers, the process reserves %d slots, want its share, 3", r)
		}
		time.Sleep(1100 * time.Millisecond)
		if r := reserved(); r != 3 {
			t.Errorf("once a given-up call's slot stopped lingering, the process reserves %d slots, want its share, 3", r)
		}
		time.Sleep(rejoinWindow + 2*keepEvery)
	})
}
