package budget

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/ops"
)

// recordingStore is a downStore that notes every Acquire and every
// Release it got, grants levels with every admission, and fails the
// releases too while failRelease is set.
type recordingStore struct {
	downStore
	rmu          sync.Mutex
	acquires     []budgetstore.Acquire
	releases     []budgetstore.Release
	releaseTries int
	failRelease  bool
	levels       []budgetstore.Level
}

func (d *recordingStore) Acquire(ctx context.Context, key string, a budgetstore.Acquire) (budgetstore.Grant, error) {
	d.rmu.Lock()
	d.acquires = append(d.acquires, a)
	levels := d.levels
	d.rmu.Unlock()
	g, err := d.downStore.Acquire(ctx, key, a)
	g.Levels = levels
	return g, err
}

func (d *recordingStore) Release(ctx context.Context, key string, r budgetstore.Release) error {
	d.rmu.Lock()
	defer d.rmu.Unlock()
	d.releaseTries++
	if err := d.fail(); err != nil || d.failRelease {
		return errDown
	}
	d.releases = append(d.releases, r)
	return nil
}

func (d *recordingStore) setFailRelease(b bool) {
	d.rmu.Lock()
	d.failRelease = b
	d.rmu.Unlock()
}

// tries is how many releases the store was sent, and how many it got.
func (d *recordingStore) tries() (sent, got int) {
	d.rmu.Lock()
	defer d.rmu.Unlock()
	return d.releaseTries, len(d.releases)
}

// lastRelease is the release the store got last.
func (d *recordingStore) lastRelease(t *testing.T) budgetstore.Release {
	t.Helper()
	d.rmu.Lock()
	defer d.rmu.Unlock()
	if len(d.releases) == 0 {
		t.Fatal("the store got no release")
	}
	return d.releases[len(d.releases)-1]
}

func newRecordingStore() *recordingStore {
	return &recordingStore{downStore: downStore{refunded: map[string]float64{}}}
}

// TestAProcessKeepsOneNameAmongTheKeysProcesses: every request to the
// store names the process, so that the store counts it once among the
// key's processes, and by the same name after the client gave the key
// another store.
func TestAProcessKeepsOneNameAmongTheKeysProcesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newRecordingStore()
		s := keyAfter(t, st, `"key";r=500;t=10`)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", `"key";r=499;t=10`))
		s.UseStore(st, "k", nil)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", `"key";r=498;t=10`))
		st.rmu.Lock()
		var names []string
		for _, a := range st.acquires {
			names = append(names, a.Process)
		}
		st.rmu.Unlock()
		if len(names) != 3 || names[0] == "" || names[1] != names[0] || names[2] != names[0] {
			t.Errorf("the process named itself %q in its requests, want one name, not empty", names)
		}
		time.Sleep(time.Minute) // the keeper ends
	})
}

// logRecorder is a slog.Handler that notes the messages logged.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// count is how many messages logged contain part.
func (h *logRecorder) count(part string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.Contains(m, part) {
			n++
		}
	}
	return n
}

// TestTheLogSaysOnceThatTheStoreIsBack: an outage is logged when it
// begins, and its end once, when the store answers again.
func TestTheLogSaysOnceThatTheStoreIsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &downStore{refunded: map[string]float64{}}
		log := &logRecorder{}
		s := New()
		s.UseStore(st, "k", slog.New(log))
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer(`"key";q=600;w=60`, `"key";r=500;t=10`))
		readsWhileDown(s, st, time.Second)
		storeBack(st)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
		if down, back := log.count("unreachable"), log.count("reachable again"); down != 1 || back != 1 {
			t.Errorf("an outage and its end logged %d and %d times, want once each", down, back)
		}
		time.Sleep(time.Minute) // the keeper ends
	})
}

// TestTheDrainForgetsACallThatEndedMinutesAgo: the drain of an outage is
// as long as the longest call that ended in the last minute or two; a
// long call that ended three minutes before, whether calls ended since or
// none did, makes the next outage drain no longer than minDrain.
func TestTheDrainForgetsACallThatEndedMinutesAgo(t *testing.T) {
	for _, busy := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			st := &downStore{refunded: map[string]float64{}}
			s := keyAfter(t, st, `"key";r=600;t=0`)
			tk := admitNow(t, s, call(ops.GetContact, ""))
			time.Sleep(5 * time.Second)
			tk.Finish(answer("", `"key";r=599;t=1`))
			for range 6 {
				time.Sleep(30 * time.Second)
				if busy {
					admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
				}
			}
			st.setDown(true)
			start := time.Now()
			tk, _, err := s.Admit(context.Background(), call(ops.GetContact, ""))
			if err != nil {
				t.Fatal(err)
			}
			tk.Finish(answer("", ""))
			if waited := time.Since(start); waited != minDrain {
				t.Errorf("three minutes after a call of 5 s (calls since: %v), the first call once the store failed went after %v, want %v", busy, waited, minDrain)
			}
			st.setDown(false)
			time.Sleep(time.Minute) // the keeper sends what the store missed, and ends
		})
	}
}

// TestWhatAStoreCouldNotHaveMeantOfALevelIsPassedOver: a grant that says
// a level holds what no level can (not a number, or more in debt than its
// size), or names a level the process does not know, changes nothing of
// the model and fails no call.
func TestWhatAStoreCouldNotHaveMeantOfALevelIsPassedOver(t *testing.T) {
	for _, odd := range []budgetstore.Level{
		{Name: "no-such-level", Amount: 1},
		{Name: Key, Amount: math.NaN()},
		{Name: Key, Amount: math.Inf(1)},
		{Name: Key, Amount: math.Inf(-1)},
		{Name: Key, Amount: -1e9},
	} {
		synctest.Test(t, func(t *testing.T) {
			st := newRecordingStore()
			s := keyAfter(t, st, `"key";r=500;t=10`)
			st.levels = []budgetstore.Level{odd}
			s.mu.Lock()
			before := s.levels[Key].wholeLeft(time.Now())
			s.mu.Unlock()
			admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
			s.mu.Lock()
			after := s.levels[Key].wholeLeft(time.Now())
			s.mu.Unlock()
			if math.IsNaN(after) || after < before-1 {
				t.Errorf("a grant saying %s holds %v left the key at %v of %v before a read of a point", odd.Name, odd.Amount, after, before)
			}
			time.Sleep(time.Minute) // the keeper ends
		})
	}
}

// downWithALease returns a State sharing its budget through st, with a
// call admitted by the store in flight, after st went down and a call
// found it so.
func downWithALease(t *testing.T, st *recordingStore) (*State, *Ticket) {
	t.Helper()
	s := keyAfter(t, st, `"key";r=500;t=10`)
	tk := admitNow(t, s, call(ops.GetContact, ""))
	st.setDown(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, _, err := s.Admit(ctx, call(ops.GetContact, "")); err == nil {
		t.Fatal("a call went on the share without a drain")
	}
	return s, tk
}

// TestADownStoreIsSentNoReleaseUntilItAnswers: while the store is down, a
// call that ends keeps its release for the keeper rather than hold its
// caller for a request bound to fail, and the keeper sends it once the
// store answers its look, not at every look: each failed request would
// cost up to sharedTimeout, and a thousand of them a look.
func TestADownStoreIsSentNoReleaseUntilItAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newRecordingStore()
		_, tk := downWithALease(t, st)
		before, _ := st.tries()
		tk.Finish(answer("", ""))
		time.Sleep(sharedRetry - 100*time.Millisecond) // the keeper looks every probeEvery
		if sent, _ := st.tries(); sent != before {
			t.Errorf("the down store was sent releases %d times", sent-before)
		}
		st.setDown(false)
		time.Sleep(time.Second)
		// The call's release, and that of the lease the store may have
		// granted the call that found it down.
		if sent, got := st.tries(); sent != before+2 || got != before+2 {
			t.Errorf("once the store was back, it was sent %d releases and got %d, want 2", sent-before, got-before)
		}
		time.Sleep(time.Minute) // the keeper ends
	})
}

// TestAReleaseTheStoreFailsIsSentAgainAndCountsAsAFailure: a release
// that fails, sent by the call or by the keeper, is kept until the store
// gets it, and counts as a failure of the store, which puts the process
// on its local budget until the store answers again.
func TestAReleaseTheStoreFailsIsSentAgainAndCountsAsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newRecordingStore()
		s := keyAfter(t, st, `"key";r=500;t=10`)
		tk := admitNow(t, s, call(ops.GetContact, ""))
		before, _ := st.tries()
		st.setFailRelease(true)
		tk.Finish(answer("", ""))
		active := func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.sharedActiveLocked(time.Now())
		}
		if active() {
			t.Error("the store counts as up after a release to it failed")
		}
		synctest.Wait() // the keeper's look: its Renew is answered, the release fails
		if sent, _ := st.tries(); sent != before+2 {
			t.Errorf("the release was sent %d times, want 2: by the call, and by the keeper's first look", sent-before)
		}
		if active() {
			t.Error("the store counts as up after the keeper's release to it failed")
		}
		st.setFailRelease(false)
		time.Sleep(time.Second)
		if _, got := st.tries(); got != before+1 {
			t.Errorf("the store got the release %d times, want once", got-before)
		}
		time.Sleep(time.Minute) // the keeper ends
	})
}

// TestAKeptReleaseSaysWhenItsRefusalCameAndDropsStaleWords: a release
// sent late says how long ago its refusal came, so that the store counts
// it toward the guard from then; more than staleAfter late, it no longer
// says what was left of the levels nor cuts the pace, which answers since
// may have set otherwise.
func TestAKeptReleaseSaysWhenItsRefusalCameAndDropsStaleWords(t *testing.T) {
	st := newRecordingStore()
	s := New()
	s.UseStore(st, "k", nil)
	now := time.Now()
	for _, late := range []time.Duration{500 * time.Millisecond, 2 * time.Second} {
		rel := budgetstore.Release{Lease: "l", Refused: true, Cut: true, CutFactor: 0.5, Left: []budgetstore.Level{{Name: Key, Amount: 3, Size: 600}}}
		if err := s.send(pendingOp{leaseRef: leaseRef{st: st, key: "k"}, rel: rel, at: now.Add(-late)}, now); err != nil {
			t.Fatal(err)
		}
		got := st.lastRelease(t)
		if got.RefusedAgo != late {
			t.Errorf("a refused release sent %v late says its refusal came %v ago", late, got.RefusedAgo)
		}
		if stale := late > staleAfter; stale != (got.Left == nil) || stale == got.Cut {
			t.Errorf("a release sent %v late says left %v and cut %v", late, got.Left, got.Cut)
		}
	}
}

// TestAKeptRequestSaysWhatTheModelHoldsWhenItIsSent: the levels of a kept
// release or refund say how far below its size the model holds each as it
// is sent, not as it was kept; one the model does not know is left as it
// is.
func TestAKeptRequestSaysWhatTheModelHoldsWhenItIsSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := keyAfter(t, &downStore{refunded: map[string]float64{}}, `"key";r=200;t=10`)
		levels := []budgetstore.Level{{Name: Key, Size: 600}, {Name: "no-such-level", Size: 10, Taken: 3}}
		s.mu.Lock()
		s.takenNowLocked(levels, time.Now())
		want := takenOf(s.levels[Key], 600, time.Now())
		s.mu.Unlock()
		if levels[0].Taken != want || want == 0 || levels[1].Taken != 3 {
			t.Errorf("the kept levels say %+v, want the key %v below its size", levels, want)
		}
		time.Sleep(time.Minute) // the keeper ends
	})
}

// TestAReleaseSaysStepsOnlyOfALevelThatFreesInSteps: a release tells the
// store that a level refills for no one until its moment only while the
// model has it so (level.defers); the key's bucket, which refills between
// answers, goes without.
func TestAReleaseSaysStepsOnlyOfALevelThatFreesInSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newRecordingStore()
		s := keyAfter(t, st, `"key";r=500;t=10`)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", `"key";r=499;t=10`))
		rel := st.lastRelease(t)
		i := slices.IndexFunc(rel.Left, func(l budgetstore.Level) bool { return l.Name == Key })
		if i < 0 || rel.Left[i].Steps {
			t.Errorf("the release says of the key: %+v", rel.Left)
		}
		time.Sleep(time.Minute) // the keeper ends
	})
}

// TestARefusalsWaitCutAndBlockGoToTheStore is rule 7 of a refusal: the
// release of a call refused with OVERLOADED tells the store to hold every
// call for its wait and to cut the key; that of one whose quota is
// exhausted, to block the quota's calls until it resets.
func TestARefusalsWaitCutAndBlockGoToTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newRecordingStore()
		s := keyAfter(t, st, `"key";r=500;t=10`)
		admitNow(t, s, call(ops.GetMe, "")).Finish(refusal(http.StatusServiceUnavailable, codeOverloaded, "", 2*time.Second))
		if rel := st.lastRelease(t); !rel.PausedUntil.Equal(time.Now().Add(2*time.Second)) || !rel.Cut {
			t.Errorf("the release of an OVERLOADED with a wait of 2 s holds until %v (now %v) and cuts: %v", rel.PausedUntil, time.Now(), rel.Cut)
		}
		time.Sleep(time.Minute)
		admitNow(t, s, call(ops.CreateContact, "")).Finish(refusal(http.StatusTooManyRequests, codeQuotaExhausted, Write, time.Hour))
		if rel := st.lastRelease(t); rel.Block != Write || !rel.BlockUntil.After(time.Now()) {
			t.Errorf("the release of an exhausted write quota blocks %q until %v", rel.Block, rel.BlockUntil)
		}
		time.Sleep(time.Minute) // the keeper ends
	})
}

// TestAReleaseSaysTheReservation: a release to the store in use, while it
// answers, says what the process holds outside leases, as every request
// to it does.
func TestAReleaseSaysTheReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newRecordingStore()
		s := keyAfter(t, st, `"key";r=500;t=10`)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
		if rel := st.lastRelease(t); rel.Reservation.Seq == 0 || rel.Reservation.TTL != leaseTTL {
			t.Errorf("the release says no reservation: %+v", rel.Reservation)
		}
		time.Sleep(time.Minute) // the keeper ends
	})
}

// TestAReservationBackAfterANewerOneLeavesTheNewer: requests to the store
// come back in any order; one that carried an older reservation, back
// after a newer one, leaves what the store was sent as the newer said.
func TestAReservationBackAfterANewerOneLeavesTheNewer(t *testing.T) {
	s := New()
	s.UseStore(&downStore{refunded: map[string]float64{}}, "k", nil)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	older := budgetstore.Reservation{Seq: 1, Slots: 0}
	newer := budgetstore.Reservation{Seq: 2, Slots: 2}
	s.reservationDoneLocked(newer, now)
	s.reservationDoneLocked(older, now)
	if s.reservation.sent != 2 || s.reservation.doneSeq != 2 {
		t.Errorf("after the newer reservation of 2 slots came back, then the older of none, the store counts as sent %d slots (of reservation %d)", s.reservation.sent, s.reservation.doneSeq)
	}
}

// TestAShareAnAcquireCarriedIsTakenBackBeforeTheKeeperEnds: a call in
// the rejoin window tells the store, as it asks for its lease, that the
// process holds its share; once the window ends and the process has no
// call, the keeper tells the store it holds none before it ends, rather
// than leave the share's slots to no one for the reservation's TTL.
func TestAShareAnAcquireCarriedIsTakenBackBeforeTheKeeperEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &reservingStore{downStore: downStore{refunded: map[string]float64{}}}
		s := keyAfter(t, st, `"key";r=600;t=0`)
		st.setDown(true)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
		time.Sleep(30 * time.Minute) // the keeper ends
		st.setDown(false)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", "")) // the store is back
		tk, _, err := s.Admit(context.Background(), call(ops.GetContact, ""))
		if err != nil {
			t.Fatal(err)
		}
		tk.Finish(answer("", ""))
		time.Sleep(time.Minute)
		if r, ok := st.last(); !ok || r.slots != 0 {
			t.Errorf("a minute after the rejoin window, the store last had %+v", r)
		}
	})
}

// TestAQuotaTheStoreKnowsExhaustedFailsTheCallAtOnce: a call that the
// store refuses on a quota another process saw exhausted fails at once
// with the quota's refusal, as one the process saw itself would; it is
// not held first, which would have its OnHeld ask about it.
func TestAQuotaTheStoreKnowsExhaustedFailsTheCallAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &nthStore{downStore: downStore{refunded: map[string]float64{}}, nth: 2,
			grant: budgetstore.Grant{Reason: "quota", Policy: Write, Until: time.Now().Add(time.Hour)}}
		s := keyAfter(t, st, `"key";r=500;t=10`)
		c := call(ops.CreateContact, "")
		told := 0
		c.OnHeld = func(string) <-chan struct{} { told++; return nil }
		start := time.Now()
		_, _, err := s.Admit(context.Background(), c)
		var exhausted *ExhaustedError
		if !errors.As(err, &exhausted) || exhausted.Policy != Write || time.Since(start) != 0 || told != 0 {
			t.Errorf("a write the store refused on the exhausted write quota failed after %v with %v, its OnHeld told %d times", time.Since(start), err, told)
		}
		time.Sleep(time.Minute) // the keeper ends
	})
}
