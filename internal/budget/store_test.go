package budget

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/budgetstore"
	"github.com/bodo-app/bodo-go/internal/ops"
)

// TestSharesAddUpToTheKeysLimits: however many processes share a key, the
// parts of a limit that fall to their places add up to the limit, and no
// two places' parts differ by more than one.
func TestSharesAddUpToTheKeysLimits(t *testing.T) {
	for _, total := range []int{1, 6, 25, 100} {
		for n := 1; n <= 64; n++ {
			sum, lo, hi := 0, total, 0
			for rank := range n {
				p := shareOf(total, n, rank)
				sum += p
				lo, hi = min(lo, p), max(hi, p)
			}
			if sum != total || hi-lo > 1 || lo < 0 {
				t.Errorf("%d over %d processes: parts add up to %d, from %d to %d", total, n, sum, lo, hi)
			}
		}
	}
}

// TestTheStoreGetsTheLevelsAsTheProcessModelsThem: a write level that showed
// it frees in steps goes to the store without a refill, bounded by the
// key's log; the key level, a documented bucket, keeps its refill and is
// not spread when a process read a drained bucket's t as a step's. A
// spread level goes with its quota's rate and a tenth of its size at once,
// whatever this process's log holds: the store spreads what is left of
// every process's takes.
func TestTheStoreGetsTheLevelsAsTheProcessModelsThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", `"key";r=200;t=50, "write";r=55;t=60`))
		now := time.Now()
		w := storeLevel(s.levels[Write], 1, now)
		if w.Rate != 0 || w.Quota != 60 || w.Window != time.Minute {
			t.Errorf("the write level for the store: %+v, want no refill and a log of 60 a minute", w)
		}
		k := pacedLevel(s.levels[Key], 1, now)
		if !s.levels[Key].steps || k.Rate != 5 || k.Quota != 300 || k.Window != time.Minute || k.Pace != 0 {
			t.Errorf("the key level for the store (steps %v): %+v, want a refill of 5 a second, a log of 300 a minute and no spread", s.levels[Key].steps, k)
		}
		admitNow(t, s, call(ops.CreateContact, "")).Finish(answer("", `"write";r=5;t=60`))
		if w := pacedLevel(s.levels[Write], 1, time.Now()); w.Pace != 1 || w.Burst != 6 {
			t.Errorf("the spread write level with 5 left in this process's model: %+v, want its quota's rate and a tenth of it at once, which the store lowers from every process's log", w)
		}
	})
}

// downStore is a budgetstore.Store of four processes, this one first,
// that fails every request while down is set, and adds up what the
// refunds it got give back of each level.
type downStore struct {
	mu       sync.Mutex
	down     bool
	refunded map[string]float64
}

var errDown = errors.New("the store is down")

// setDown makes the store fail every request, or none.
func (d *downStore) setDown(down bool) {
	d.mu.Lock()
	d.down = down
	d.mu.Unlock()
}

func (d *downStore) fail() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return errDown
	}
	return nil
}

func (d *downStore) Acquire(context.Context, string, budgetstore.Acquire) (budgetstore.Grant, error) {
	if err := d.fail(); err != nil {
		return budgetstore.Grant{}, err
	}
	return budgetstore.Grant{Admitted: true, Members: budgetstore.Members{Processes: 4}}, nil
}
func (d *downStore) Release(context.Context, string, budgetstore.Release) error { return d.fail() }
func (d *downStore) Refund(_ context.Context, _ string, levels []budgetstore.Level) error {
	if err := d.fail(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range levels {
		d.refunded[l.Name] += l.Amount
	}
	return nil
}
func (d *downStore) Renew(context.Context, string, budgetstore.Renew) (budgetstore.Members, error) {
	return budgetstore.Members{Processes: 4}, d.fail()
}

// storeBack brings st back and waits until the keeper has sent what the
// store missed and, once the process's share ends, that it holds no slot
// outside leases: then the keeper ends.
func storeBack(st *downStore) {
	st.setDown(false)
	time.Sleep(rejoinWindow + 2*keepEvery)
}

// drainedKey returns a State sharing its budget through st after the
// server said its key, of 600 points a minute, is drained.
func drainedKey(t *testing.T, st budgetstore.Store) *State {
	return keyAfter(t, st, `"key";r=0;t=60`)
}

// keyAfter returns a State sharing its budget through st after the
// server's word limit on its key, of 600 points a minute.
func keyAfter(t *testing.T, st budgetstore.Store, limit string) *State {
	t.Helper()
	s := New()
	s.UseStore(st, "k", nil)
	admitNow(t, s, call(ops.GetContact, "")).Finish(answer(`"key";q=600;w=60`, limit))
	return s
}

// readsWhileDown takes st down and makes reads on s one after another for
// d, answered without a word on any level; it returns when the first went
// and the points of all.
func readsWhileDown(s *State, st *downStore, d time.Duration) (first time.Duration, points float64) {
	st.setDown(true)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		c := call(ops.GetContact, "")
		tk, _, err := s.Admit(ctx, c)
		if err != nil {
			return first, points
		}
		if first == 0 {
			first = time.Since(start)
		}
		points += c.Cost
		tk.Finish(answer("", ""))
	}
}

// TestAProcessThatLostTheStoreTakesItsPartOfTheKey is rule 7 through an
// outage: a process of four that loses the store after the server said the
// key is drained ("key";r=0;t=60, on a plan whose key holds no more than
// its quota, so nothing shows it to be a bucket) neither waits the key's
// minute, as a level of its own whose log the others filled would, nor
// takes more than its part of the key's refill (one of the six slots: 100
// points a minute of 600); once the store is back, it takes there what the
// process took meanwhile.
func TestAProcessThatLostTheStoreTakesItsPartOfTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &downStore{refunded: map[string]float64{}}
		s := drainedKey(t, st)
		first, points := readsWhileDown(s, st, 30*time.Second)
		part := 600.0 / 60 * 30 / 6
		t.Logf("first call after %v; %.0f points in 30 s, the process's part of the refill is %.0f", first, points, part)
		if points == 0 || first > 5*time.Second {
			t.Errorf("%.0f points in 30 s, the first after %v: want the first within 5 s", points, first)
		}
		if points > part+1 || points < part/2 {
			t.Errorf("%.0f points in 30 s, want at most the part of the refill, %.0f, and at least half of it", points, part)
		}
		storeBack(st)
		st.mu.Lock()
		defer st.mu.Unlock()
		if got := st.refunded[Key]; got != -points {
			t.Errorf("the store was told of %.0f points of the key, want the %.0f taken while it was down", -got, points)
		}
	})
}

// TestAnOutagePartsWhatIsLeftThen: the part of a level a process takes
// while the store is down starts from what was left when it went down. The
// calls the store admitted before are the store's business: a process that
// took through it many times the level's size since the server last named
// the level goes on at its part, not after all it took.
func TestAnOutagePartsWhatIsLeftThen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &downStore{refunded: map[string]float64{}}
		s := New()
		s.UseStore(st, "k", nil)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer(`"principal";q=1200;w=60`, `"principal";r=1200;t=0`))
		for range 1200 { // 1,200 points in 10 minutes, none of them naming a level
			admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
			time.Sleep(500 * time.Millisecond)
		}
		first, points := readsWhileDown(s, st, 30*time.Second)
		// A part of one slot in six: of the key's 600 and 5 a second,
		// 100 and 25 in 30 s. The pace keeps to the part of the rate.
		if first > 2*time.Second || points < 20 || points > 126 {
			t.Errorf("%.0f points in the outage's first 30 s, the first after %v: want the first within 2 s and the part of the refill, at most with the part of what was left: 25 to 125", points, first)
		}
		storeBack(st)
	})
}

// sevenStore is a downStore whose key has procs processes, this one of
// rank 0, and which notes the Taken of every level acquired.
type sevenStore struct {
	downStore
	mu2   sync.Mutex
	taken []float64
	procs int
}

func (d *sevenStore) members() budgetstore.Members {
	d.mu2.Lock()
	defer d.mu2.Unlock()
	return budgetstore.Members{Processes: d.procs, Rank: 0}
}

func (d *sevenStore) Acquire(_ context.Context, _ string, a budgetstore.Acquire) (budgetstore.Grant, error) {
	if err := d.fail(); err != nil {
		return budgetstore.Grant{}, err
	}
	d.mu2.Lock()
	for _, l := range a.Levels {
		d.taken = append(d.taken, l.Taken)
	}
	d.mu2.Unlock()
	return budgetstore.Grant{Admitted: true, Members: d.members()}, nil
}
func (d *sevenStore) Renew(context.Context, string, budgetstore.Renew) (budgetstore.Members, error) {
	return d.members(), d.fail()
}

// TestAProcessWithNoSlotHasNoPartAndGetsItBack: with more processes than
// slots (7 for 6), the first has no slot and no part of any level while
// the store is away; it tells the store nothing absurd of what it holds
// (no NaN, no infinity), and its levels are whole again once the store is
// back.
func TestAProcessWithNoSlotHasNoPartAndGetsItBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &sevenStore{downStore: downStore{refunded: map[string]float64{}}, procs: 4}
		s := New()
		s.UseStore(st, "k", nil)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer(`"key";q=600;w=60`, `"key";r=300;t=30`))
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
		readsWhileDown(s, &st.downStore, 5*time.Second) // a first outage of 4 processes: part 1/6
		st.setDown(false)
		time.Sleep(10 * time.Minute)
		for range 3 {
			admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", `"key";r=300;t=30`))
		}
		st.mu2.Lock()
		st.procs = 7 // 7 processes now: rank 0 gets shareOf(6, 7, 0) == 0 slots
		st.mu2.Unlock()
		time.Sleep(10 * time.Minute)
		for range 3 {
			admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", `"key";r=300;t=30`))
			time.Sleep(time.Second)
		}
		readsWhileDown(s, &st.downStore, 5*time.Second)
		s.mu.Lock()
		l := s.levels[Key]
		if tk := takenOf(l, l.fitSize(), time.Now()); math.IsNaN(tk) || math.IsInf(tk, 0) {
			t.Errorf("takenOf with part 0: %v", tk)
		}
		s.mu.Unlock()
		st.setDown(false)
		time.Sleep(10 * time.Minute) // long past the rejoin window and processTTL
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tk, _, err := s.Admit(ctx, call(ops.GetContact, ""))
		if err == nil {
			tk.Finish(answer("", ""))
		}
		s.mu.Lock()
		if l.parts.outage != 1 {
			t.Errorf("the key level keeps outage part %v after the store came back", l.parts.outage)
		}
		s.mu.Unlock()
		time.Sleep(time.Second)
		st.mu2.Lock()
		for _, x := range st.taken {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Errorf("Taken sent to the store: %v", x)
				break
			}
		}
		st.mu2.Unlock()
	})
}

// heldStore is a downStore that says, as it admits, that each level taken
// from holds held after the take: the other processes took the rest.
type heldStore struct {
	downStore
	held float64
}

func (d *heldStore) Acquire(_ context.Context, _ string, a budgetstore.Acquire) (budgetstore.Grant, error) {
	if err := d.fail(); err != nil {
		return budgetstore.Grant{}, err
	}
	g := budgetstore.Grant{Admitted: true, Members: budgetstore.Members{Processes: 4}}
	for _, l := range a.Levels {
		g.Levels = append(g.Levels, budgetstore.Level{Name: l.Name, Amount: d.held})
	}
	return g, nil
}

// outageTakesItsPartOfTheRefill takes st down and fails t when s, one of
// the store's four processes (one slot of six), takes more in the first
// 5 s than its part of the key's refill (600 points a minute); after says
// what came before. The store is back when it returns.
func outageTakesItsPartOfTheRefill(t *testing.T, s *State, st *downStore, after string) {
	t.Helper()
	_, points := readsWhileDown(s, st, 5*time.Second)
	if part := 600.0 / 60 * 5 / 6; points > part+1 {
		t.Errorf("%.0f points in the outage's first 5 s, %s, want at most the part of the refill, %.0f", points, after, part)
	}
	storeBack(st)
}

// TestAnOutagePartsWhatTheStoreHeld is rule 7 when the answers name
// another level: after the server said the key is full, the other
// processes drain it, which this process hears only from the store. When
// the store goes down, its part is a part of what the store last said the
// key holds, and of the refill: not of the key this process alone would
// have left.
func TestAnOutagePartsWhatTheStoreHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &heldStore{downStore: downStore{refunded: map[string]float64{}}}
		s := keyAfter(t, st, `"key";r=600;t=0`)
		for range 120 { // a minute of reads, answered with a word on the write level only
			admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", `"write";r=60;t=0`))
			time.Sleep(500 * time.Millisecond)
		}
		outageTakesItsPartOfTheRefill(t, s, &st.downStore, "after the store said the key is drained")
	})
}

// TestAnOutageStartsFromTheLastWord is rule 7 for a process that was idle
// while the others drained the key: the refill since the last word on the
// key (r=0) the others may have taken, so its part of the key starts from
// that word, and only its part of the refill comes after.
func TestAnOutageStartsFromTheLastWord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &downStore{refunded: map[string]float64{}}
		s := drainedKey(t, st)
		time.Sleep(10 * time.Second)
		outageTakesItsPartOfTheRefill(t, s, st, "10 s after the key's last word said it was drained")
	})
}

// TestAnOutageTakesOffTheRefillSinceTheLastAnswerOnce: a store that fails, answers
// and fails again, with no word on the key between, takes the refill since
// the last word off the key's part once.
func TestAnOutageTakesOffTheRefillSinceTheLastAnswerOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := keyAfter(t, &downStore{refunded: map[string]float64{}}, `"key";r=300;t=30`)
		time.Sleep(10 * time.Second) // 100 points of refill, no answer between
		s.mu.Lock()
		defer s.mu.Unlock()
		now := time.Now()
		l := s.levels[Key]
		for _, p := range []float64{0.5, 1, 0.5} {
			s.partLocked(p, now)
		}
		if l.refill(now); math.Abs(l.tokens-300) > 1e-6 {
			t.Errorf("the key holds %v after the refill since its word (300) was taken off at two outages, want 300", l.tokens)
		}
	})
}

// TestAWordInAnOutageLowersAPartNeverRaisesIt is rule 7 through an outage
// whose answers say that much of the key is left: what they say is left
// holds the parts of the refill that the other processes have not taken
// yet, and this process's part counts its own already. It gets no more
// than its part of the refill (one slot of six: 100 points a minute of
// 600), also not once the word is older than the store's retry.
func TestAWordInAnOutageLowersAPartNeverRaisesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &downStore{refunded: map[string]float64{}}
		s := drainedKey(t, st)
		st.setDown(true)
		start := time.Now()
		read := func(limit string) {
			tk, _, err := s.Admit(context.Background(), call(ops.GetContact, ""))
			if err != nil {
				t.Fatal(err)
			}
			tk.Finish(answer("", limit))
		}
		partIsOfTheRefill := func(after string) {
			t.Helper()
			s.mu.Lock()
			left := s.levels[Key].partLeft()
			s.mu.Unlock()
			if part := 600.0 / 60 / 6 * time.Since(start).Seconds(); left > part {
				t.Errorf("%s, the part holds %.1f points, want at most the part of the refill since the outage began, %.1f", after, left, part)
			}
		}
		read(`"key";r=300;t=30`)
		partIsOfTheRefill("after an answer saying r=300")
		time.Sleep(sharedRetry + time.Second)
		read("")
		partIsOfTheRefill("after the store was tried again and failed")
		storeBack(st)
	})
}

// slowStore is a downStore whose Acquire takes 5 ms, as a round trip to
// Redis does, and admits.
type slowStore struct{ downStore }

func (d *slowStore) Acquire(ctx context.Context, key string, a budgetstore.Acquire) (budgetstore.Grant, error) {
	time.Sleep(5 * time.Millisecond)
	return d.downStore.Acquire(ctx, key, a)
}

// TestARunHoldsCallsWhileOneAsksTheStore: with a shared store, a call of a
// kind at an announced policy's quota counts in its run while it asks the
// store, so that the calls of the kind that come during the round trip
// wait for its answer rather than go beside it.
func TestARunHoldsCallsWhileOneAsksTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		s.UseStore(&slowStore{}, "k", nil)
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer(`"key";q=300;w=60, "search";q=1;w=60`, ""))
		admitted := admitting(t, s, 5, ops.CountContacts, "q=a")
		time.Sleep(100 * time.Millisecond)
		if len(admitted) != 1 {
			t.Fatalf("%d counts went at the quota of 1 while the store was asked, want 1", len(admitted))
		}
		for i, want := range []int{1, 3} { // the one past the quota alone; once it is accepted, the rest
			(<-admitted).Finish(answer("", ""))
			time.Sleep(100 * time.Millisecond)
			if len(admitted) != want {
				t.Fatalf("after %d answers %d counts went, want %d", i+1, len(admitted), want)
			}
		}
		for range 3 {
			(<-admitted).Finish(answer("", ""))
		}
		time.Sleep(time.Minute) // the keeper renews no lease and ends
	})
}

// TestAProcessThatLostTheStoreWaitsForTheCallsItSaw: a process that lost
// the store sends nothing on its share until calls as long as the longest
// it saw end lately would have ended, so that those the store admitted on
// the others' shares just before are done and the key's slots add up; and
// no longer than that, nor than two of the keeper's looks when its calls
// were short, so that an outage costs the key no more time than it must,
// nor than leaseTTL after a call of 5 minutes.
func TestAProcessThatLostTheStoreWaitsForTheCallsItSaw(t *testing.T) {
	for _, long := range []time.Duration{3 * time.Second, time.Millisecond, 5 * time.Minute} {
		synctest.Test(t, func(t *testing.T) {
			st := &downStore{refunded: map[string]float64{}}
			s := keyAfter(t, st, `"key";r=600;t=0`)
			tk := admitNow(t, s, call(ops.GetContact, ""))
			time.Sleep(long)
			tk.Finish(answer("", `"key";r=599;t=1`))
			st.setDown(true)
			start := time.Now()
			tk, _, err := s.Admit(context.Background(), call(ops.GetContact, ""))
			if err != nil {
				t.Fatal(err)
			}
			waited := time.Since(start)
			tk.Finish(answer("", ""))
			want := min(max(long, minDrain), leaseTTL)
			if waited != want {
				t.Errorf("after a call of %v, the first call once the store failed went after %v, want %v", long, waited, want)
			}
			st.setDown(false)
			time.Sleep(time.Minute) // the keeper sends what the store missed, and ends
		})
	}
}

// failsDuringRenewStore is a downStore of two processes; the tests close
// failed as the process logs that it went on its share. Its next Renew,
// once armed with during, finds the store failing on its way: meanwhile
// during runs (a call's admission, whose request to the store fails too),
// and the Renew fails once failed is closed.
type failsDuringRenewStore struct {
	downStore
	during func()
	failed chan struct{}
}

func (d *failsDuringRenewStore) Acquire(ctx context.Context, key string, a budgetstore.Acquire) (budgetstore.Grant, error) {
	g, err := d.downStore.Acquire(ctx, key, a)
	g.Members = two
	return g, err
}

func (d *failsDuringRenewStore) Renew(ctx context.Context, key string, r budgetstore.Renew) (budgetstore.Members, error) {
	d.mu.Lock()
	during := d.during
	d.during = nil
	d.mu.Unlock()
	if during != nil {
		d.setDown(true)
		go during()
		<-d.failed
	}
	_, err := d.downStore.Renew(ctx, key, r)
	return two, err
}

// closeOnWrite closes c on the first write to it.
type closeOnWrite struct {
	once sync.Once
	c    chan struct{}
}

func (w *closeOnWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.c) })
	return len(p), nil
}

// outageDrain is the drain of keyBeforeAnOutage's process.
const outageDrain = 3*time.Second - time.Millisecond

// keyBeforeAnOutage returns a State sharing its budget through a
// failsDuringRenewStore, whose failed its logger closes, once it saw a
// call of outageDrain end, with a call running: its lease keeps the
// keeper renewing.
func keyBeforeAnOutage(t *testing.T) (*failsDuringRenewStore, *State, *Ticket) {
	st := &failsDuringRenewStore{downStore: downStore{refunded: map[string]float64{}}, failed: make(chan struct{})}
	s := keyAfter(t, st, `"key";r=600;t=0`)
	s.mu.Lock()
	s.logger = slog.New(slog.NewTextHandler(&closeOnWrite{c: st.failed}, nil)) // its first line tells of the outage
	s.mu.Unlock()
	long := admitNow(t, s, call(ops.GetContact, ""))
	time.Sleep(outageDrain)
	long.Finish(answer("", `"key";r=599;t=1`))
	return st, s, admitNow(t, s, call(ops.GetContact, ""))
}

// TestAFailureDuringTheKeepersLookIsSentAtOnce: a call's request to the
// store fails while the keeper's renewal, which carries no share, is on
// its way. The drain runs from when a request carrying the share came
// back, so the keeper sends one at once, and the call goes after the drain
// alone, not a look (probeEvery) later.
func TestAFailureDuringTheKeepersLookIsSentAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, s, running := keyBeforeAnOutage(t)
		went := make(chan time.Duration, 1)
		st.mu.Lock()
		st.during = func() {
			start := time.Now()
			tk, _, err := s.Admit(context.Background(), call(ops.GetContact, ""))
			if err != nil {
				t.Error(err)
				went <- 0
				return
			}
			went <- time.Since(start)
			tk.Finish(answer("", ""))
		}
		st.mu.Unlock()
		if waited, want := <-went, outageDrain; waited != want {
			t.Errorf("the call went %v after the store failed during the keeper's look, want the drain, %v", waited, want)
		}
		running.Finish(answer("", ""))
		st.setDown(false)
		time.Sleep(time.Minute) // the keeper sends what the store missed, and ends
	})
}

// TestTheKeepersOwnFailureSendsTheShareAtOnce: the first failure of an
// outage is the keeper's own renewal, which carries no share; it looks
// again at once, with the share, and a call goes after the drain alone.
func TestTheKeepersOwnFailureSendsTheShareAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, s, running := keyBeforeAnOutage(t)
		st.setDown(true)
		<-st.failed // the keeper's renewal found the outage
		start := time.Now()
		tk, _, err := s.Admit(context.Background(), call(ops.GetContact, ""))
		if err != nil {
			t.Fatal(err)
		}
		if waited, want := time.Since(start), outageDrain; waited != want {
			t.Errorf("the call went %v after the keeper's renewal failed, want the drain, %v", waited, want)
		}
		tk.Finish(answer("", ""))
		running.Finish(answer("", ""))
		st.setDown(false)
		time.Sleep(time.Minute) // the keeper sends what the store missed, and ends
	})
}

// stuckStore is a downStore whose releases, once stick is called, fail
// when free is closed (or their deadline passes).
type stuckStore struct {
	downStore
	free chan struct{}
}

func (d *stuckStore) stick() {
	d.mu.Lock()
	d.free = make(chan struct{})
	d.mu.Unlock()
}

func (d *stuckStore) Release(ctx context.Context, _ string, _ budgetstore.Release) error {
	d.mu.Lock()
	free := d.free
	d.mu.Unlock()
	if free == nil {
		return nil
	}
	select {
	case <-free:
	case <-ctx.Done():
	}
	return errDown
}

// TestAFailureOfAStoreNoLongerInUseLeavesTheNewOneUp: a release that fails
// on the store its call came from, after UseStore gave another, is kept for
// that store and says nothing of the new one, which calls go on using.
func TestAFailureOfAStoreNoLongerInUseLeavesTheNewOneUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old := &stuckStore{downStore: downStore{refunded: map[string]float64{}}}
		s := keyAfter(t, old, `"key";r=500;t=10`)
		old.stick()
		tk := admitNow(t, s, call(ops.GetContact, ""))
		done := make(chan struct{})
		go func() {
			tk.Finish(answer("", `"key";r=499;t=10`))
			close(done)
		}()
		synctest.Wait() // the release is on its way to the old store
		s.mu.Lock()
		oldSeq := s.storeSeq
		s.mu.Unlock()
		s.UseStore(&downStore{refunded: map[string]float64{}}, "k", nil)
		close(old.free)
		<-done
		s.mu.Lock()
		down := !s.sharedActiveLocked(time.Now())
		kept := slices.ContainsFunc(s.pending, func(op pendingOp) bool { return op.seq == oldSeq && op.st == old })
		s.mu.Unlock()
		if down {
			t.Error("the new store counts as down after a release to the old one failed")
		}
		if !kept {
			t.Error("the release the old store did not get is not kept for it")
		}
		time.Sleep(pendingTTL + time.Minute) // the keeper gives up on the old store's release, and ends
	})
}

// nthStore is a downStore that answers its nth Acquire with grant and
// err, and admits every other.
type nthStore struct {
	downStore
	asked, nth int
	grant      budgetstore.Grant
	err        error
}

func (d *nthStore) Acquire(ctx context.Context, key string, a budgetstore.Acquire) (budgetstore.Grant, error) {
	d.mu.Lock()
	d.asked++
	odd := d.asked == d.nth
	d.mu.Unlock()
	if odd {
		return d.grant, d.err
	}
	return d.downStore.Acquire(ctx, key, a)
}

// TestARunCountsOnlyWhatTheStoreAdmitted: a call that the store holds
// counted in its kind's run while it asked, no longer while it waits, and
// once when it goes: at an announced quota of 2, the second call of the
// kind still goes beside the first.
func TestARunCountsOnlyWhatTheStoreAdmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		s.UseStore(&nthStore{downStore: downStore{refunded: map[string]float64{}}, nth: 2, grant: budgetstore.Grant{Wait: 10 * time.Millisecond, Reason: ReasonInFlight}}, "k", nil)
		tk, _, err := s.Admit(context.Background(), call(ops.GetMe, ""))
		if err != nil {
			t.Fatal(err)
		}
		tk.Finish(answer(`"key";q=300;w=60, "search";q=2;w=60`, ""))
		admitted := admitting(t, s, 1, ops.CountContacts, "q=a")
		time.Sleep(5 * time.Millisecond) // the store holds it
		s.mu.Lock()
		r := s.levels["search"].scope.runs[call(ops.CountContacts, "q=a").kind()]
		waiting := r != nil && (r.inflight != 0 || r.sent != 0)
		s.mu.Unlock()
		if waiting {
			t.Errorf("the count the store holds is in its run as %+v, want nothing in flight or sent", *r)
		}
		first := <-admitted
		if why := held(s, call(ops.CountContacts, "q=a")); why != "" {
			t.Errorf("the second count at a quota of 2 is held by %q, with one count sent", why)
		}
		s.mu.Lock()
		r = s.levels["search"].scope.runs[call(ops.CountContacts, "q=a").kind()]
		s.mu.Unlock()
		if r == nil || r.inflight != 1 {
			t.Errorf("the count's run is %+v, want one call in flight", r)
		}
		first.Finish(answer("", ""))
		time.Sleep(time.Minute) // the keeper renews no lease and ends
	})
}

// TestAPassingFailureOfTheStoreEndsBeforeTheDrain: one failed request to a
// store that answers again is found out by the keeper before the drain
// ends, even while a call in flight has the keeper in a long sleep, so
// that the calls that come after it go through the store again.
func TestAPassingFailureOfTheStoreEndsBeforeTheDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &nthStore{downStore: downStore{refunded: map[string]float64{}}, nth: 3, err: errDown} // a reply late past its deadline
		s := keyAfter(t, st, `"key";r=500;t=10`)
		long := admitNow(t, s, call(ops.GetContact, "")) // its lease keeps the keeper sleeping keepEvery
		time.Sleep(60 * time.Millisecond)
		admitted := admitting(t, s, 1, ops.GetContact, "") // its request to the store fails
		time.Sleep(minDrain)
		s.mu.Lock()
		down := !s.sharedActiveLocked(time.Now())
		s.mu.Unlock()
		if down {
			t.Error("the store still counts as down as the drain ends, though it answered again")
		}
		long.Finish(answer("", ""))
		(<-admitted).Finish(answer("", ""))
		time.Sleep(time.Minute) // the keeper renews no lease and ends
	})
}

// renewStore is a downStore that notes when each Renew came.
type renewStore struct {
	downStore
	renews []time.Time
}

func (d *renewStore) Renew(ctx context.Context, key string, r budgetstore.Renew) (budgetstore.Members, error) {
	d.mu.Lock()
	d.renews = append(d.renews, time.Now())
	d.mu.Unlock()
	return d.downStore.Renew(ctx, key, r)
}

// TestTheKeeperAsksAFailedStoreOnceALook: a failure the keeper's own
// renew finds has it look again probeEvery later, not at once.
func TestTheKeeperAsksAFailedStoreOnceALook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &renewStore{downStore: downStore{refunded: map[string]float64{}}}
		s := keyAfter(t, st, `"key";r=500;t=10`)
		long := admitNow(t, s, call(ops.GetContact, "")) // its lease keeps the keeper renewing
		st.setDown(true)
		time.Sleep(2 * keepEvery)
		st.mu.Lock()
		renews := slices.Clone(st.renews)
		st.mu.Unlock()
		for i := 1; i < len(renews); i++ {
			if gap := renews[i].Sub(renews[i-1]); gap < probeEvery {
				t.Errorf("renews %v apart at %v, want at least probeEvery (%v)", gap, renews[i].Sub(renews[0]), probeEvery)
			}
		}
		if len(renews) < 3 {
			t.Errorf("%d renews in %v while the store was down, want a look every probeEvery", len(renews), 2*keepEvery)
		}
		st.setDown(false)
		long.Finish(answer("", ""))
		time.Sleep(time.Minute)
	})
}

// TestSlowStartsFlightCountsThroughTheStore: with a shared store, calls
// that asked the store while slow start's flight took calls count in the
// flight also when the store admits them after it filled, so the calls
// after it wait for their answers too; and slow start that ended with its
// call unanswered for SlowStartHold opens no flight when that answer comes.
func TestSlowStartsFlightCountsThroughTheStore(t *testing.T) {
	t.Run("a flight the store admits after it filled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := New()
			s.UseStore(&slowStore{}, "k", nil)
			first, _, _ := s.Admit(context.Background(), call(ops.GetContact, ""))
			time.Sleep(30 * time.Millisecond)
			first.Finish(answer("", ""))
			var flight []*Ticket
			for range s.parallel - 1 {
				tk, _, _ := s.Admit(context.Background(), call(ops.GetContact, ""))
				flight = append(flight, tk)
			}
			asked := make(chan *Ticket, 2)
			for range 2 { // both ask the store while the flight takes one more
				go func() {
					tk, _, err := s.Admit(context.Background(), call(ops.GetContact, ""))
					if err != nil {
						t.Error(err)
					}
					asked <- tk
				}()
			}
			a, b := <-asked, <-asked
			for _, tk := range append(flight, a) {
				tk.Finish(answer("", ""))
			}
			if why := held(s, call(ops.GetContact, "")); why != ReasonInFlight {
				t.Errorf("a call after a flight whose last call the store admitted after it filled is held by %q, want %q", why, ReasonInFlight)
			}
			b.Finish(answer("", ""))
			if why := held(s, call(ops.GetContact, "")); why != "" {
				t.Errorf("a call after a flight answered in full is held by %q", why)
			}
			time.Sleep(time.Minute) // the keeper renews no lease and ends
		})
	})
	t.Run("slow start ended unanswered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := New()
			s.UseStore(&slowStore{}, "k", nil)
			first, _, _ := s.Admit(context.Background(), call(ops.GetContact, ""))
			time.Sleep(SlowStartHold + time.Second)
			b, _, err := s.Admit(context.Background(), call(ops.GetContact, ""))
			if err != nil {
				t.Fatal(err)
			}
			first.Finish(answer("", ""))
			c, _, _ := s.Admit(context.Background(), call(ops.GetContact, ""))
			c.Finish(answer("", ""))
			if why := held(s, call(ops.GetContact, "")); why != "" {
				t.Errorf("once slow start ended unanswered, a call after its late answer is held by %q", why)
			}
			b.Finish(answer("", ""))
			time.Sleep(time.Minute)
		})
	})
}

// TestAProcessCutOffFromTheStoreKeepsToItsShareOfTheGuard: one of four
// processes that lost the store holds its calls at its share of the
// lockout guard's refusals (25 of 4: 6), not at the key's 25, so that the
// four together stay under the lockout; held, a call looks again when the
// store is tried again, not only when the oldest refusal leaves the
// guard's window.
func TestAProcessCutOffFromTheStoreKeepsToItsShareOfTheGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &downStore{refunded: map[string]float64{}}
		s := keyAfter(t, st, `"key";r=500;t=10`)
		st.setDown(true)
		admitNow(t, s, call(ops.GetMe, "")).Finish(answer("", ""))
		s.mu.Lock()
		for range shareOf(RefusalLimit, 4, 0) {
			s.refusals = append(s.refusals, time.Now())
		}
		s.mu.Unlock()
		if d, why := holdOf(s, call(ops.GetMe, "")); why != ReasonGuard || d >= RefusalWindow/2 {
			t.Errorf("with %d refusals in the guard's window, cut off from the store: held %v by %q, want %q until the store is tried again",
				shareOf(RefusalLimit, 4, 0), d, why, ReasonGuard)
		}
		st.setDown(false)
		time.Sleep(RefusalWindow + time.Minute)
	})
}

// TestAKeptReleaseOwesWhatItSaid: a release sent late keeps each owe's cap
// and its wait, less the time it came late; sent stale, only the waits
// still to run, uncapped.
func TestAKeptReleaseOwesWhatItSaid(t *testing.T) {
	owe := []budgetstore.Level{{Name: Write, Amount: -1, Size: 60}, {Name: Key, Amount: 3, Size: 600, Hold: 2 * time.Second}}
	fresh := owedNow(owe, 500*time.Millisecond, false)
	if len(fresh) != 2 || fresh[0].Amount != -1 || fresh[0].Hold != 0 || fresh[1].Amount != 3 || fresh[1].Hold != 1500*time.Millisecond {
		t.Errorf("sent 0.5 s late: %+v", fresh)
	}
	stale := owedNow(owe, 1500*time.Millisecond, true)
	if len(stale) != 1 || stale[0].Name != Key || stale[0].Amount != 600 || stale[0].Hold != 500*time.Millisecond {
		t.Errorf("sent 1.5 s late, stale: %+v", stale)
	}
}

// reservationLog notes the reservation of every request a store got,
// whether or not it failed (a reply lost after the store had it), with
// when it came.
type reservationLog struct {
	mu       sync.Mutex
	said     []storedReservation
	requests int // every request the store got
}

type storedReservation struct {
	at    time.Time
	slots int
}

func (d *reservationLog) note(r budgetstore.Reservation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.requests++
	if r.Seq > 0 {
		d.said = append(d.said, storedReservation{time.Now(), r.Slots})
	}
}

// shareSent is how long after since a request first carried a share (a
// reservation of slots), -1 if none did.
func (d *reservationLog) shareSent(since time.Time) time.Duration {
	return d.slotsSent(since, 1)
}

// slotsSent is how long after since a request first carried a
// reservation of at least slots, -1 if none did.
func (d *reservationLog) slotsSent(since time.Time, slots int) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.said {
		if r.slots >= slots && !r.at.Before(since) {
			return r.at.Sub(since)
		}
	}
	return -1
}

// count is how many requests the store got.
func (d *reservationLog) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.requests
}

// last is the reservation the store got last.
func (d *reservationLog) last() (storedReservation, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.said) == 0 {
		return storedReservation{}, false
	}
	return d.said[len(d.said)-1], true
}

// reservingStore is a downStore with a reservationLog.
type reservingStore struct {
	downStore
	reservationLog
}

func (d *reservingStore) Acquire(ctx context.Context, key string, a budgetstore.Acquire) (budgetstore.Grant, error) {
	d.note(a.Reservation)
	return d.downStore.Acquire(ctx, key, a)
}
func (d *reservingStore) Renew(ctx context.Context, key string, r budgetstore.Renew) (budgetstore.Members, error) {
	d.note(r.Reservation)
	return d.downStore.Renew(ctx, key, r)
}
func (d *reservingStore) Release(ctx context.Context, key string, r budgetstore.Release) error {
	d.note(r.Reservation)
	return d.downStore.Release(ctx, key, r)
}

// TestAProcessOnItsShareReservesItFromTheOthers is rule 7 when one process
// alone loses the store (its replies late or lost) while the others still
// reach it: before its first call on its share of the slots (one of six,
// of four processes) goes, the store has been told that the process holds
// that share, so that the others leave it; once the share ends after the
// store is back, that it holds none.
func TestAProcessOnItsShareReservesItFromTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &reservingStore{downStore: downStore{refunded: map[string]float64{}}}
		s := keyAfter(t, st, `"key";r=600;t=0`)
		st.setDown(true)
		down := time.Now()
		tk := admitNow(t, s, call(ops.GetContact, ""))
		if sent := st.shareSent(down); sent < 0 || sent > time.Since(down) {
			t.Errorf("the call on the process's share went %v after the store went down, the share was sent %v after (-1: never)", time.Since(down), sent)
		}
		tk.Finish(answer("", ""))
		storeBack(&st.downStore)
		if r, ok := st.last(); !ok || r.slots != 0 {
			t.Errorf("after the share ended the store last had %+v", r)
		}
	})
}

// lateStore is a store of two processes, this one first, that admits
// every call; while late, every request reaches it (its reservation is
// had) and its reply never comes back before the request's deadline.
type lateStore struct {
	reservationLog
	late atomic.Bool
}

func (d *lateStore) arrive(ctx context.Context, r budgetstore.Reservation) error {
	d.note(r)
	if d.late.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

var two = budgetstore.Members{Processes: 2, Rank: 0}

func (d *lateStore) Acquire(ctx context.Context, _ string, a budgetstore.Acquire) (budgetstore.Grant, error) {
	if err := d.arrive(ctx, a.Reservation); err != nil {
		return budgetstore.Grant{}, err
	}
	return budgetstore.Grant{Admitted: true, Members: two}, nil
}
func (d *lateStore) Renew(ctx context.Context, _ string, r budgetstore.Renew) (budgetstore.Members, error) {
	if err := d.arrive(ctx, r.Reservation); err != nil {
		return budgetstore.Members{}, err
	}
	return two, nil
}
func (d *lateStore) Release(ctx context.Context, _ string, r budgetstore.Release) error {
	return d.arrive(ctx, r.Reservation)
}
func (d *lateStore) Refund(ctx context.Context, _ string, _ []budgetstore.Level) error {
	return d.arrive(ctx, budgetstore.Reservation{})
}

// lateShare has s's store st answer late 100 ms after a call was admitted
// (a lease: the keeper renews every keepEvery from then), with during
// (given the time of that call) running meanwhile, and fails t when the
// call made then goes on the share before a request carried the share:
// its first failure is the call's Acquire, sent while the keeper is about
// to renew, whose request says the process holds nothing outside leases
// and fails sharedTimeout later.
func lateShare(t *testing.T, st *lateStore, s *State, during func(start time.Time)) {
	t.Helper()
	tk0 := admitNow(t, s, call(ops.GetContact, ""))
	start := time.Now()
	time.Sleep(100 * time.Millisecond)
	st.late.Store(true)
	during(start)
	tk := admitNow(t, s, call(ops.GetContact, ""))
	if sent, went := st.shareSent(start), time.Since(start); sent < 0 || sent > went {
		t.Errorf("the call on the share went at %v, a request first carried the share at %v (-1: never)", went, sent)
	}
	st.late.Store(false)
	tk.Finish(answer("", ""))
	tk0.Finish(answer("", ""))
	time.Sleep(time.Minute) // the keeper ends
}

// TestTheStoreHearsTheShareBeforeACallGoesOnIt is rule 7 for a process
// whose replies come late: the call that goes on the share waits, after
// the drain (minDrain), until a request has carried the share.
func TestTheStoreHearsTheShareBeforeACallGoesOnIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &lateStore{}
		lateShare(t, st, keyAfter(t, st, `"key";r=600;t=0`), func(time.Time) {})
	})
}

// TestAQueuedReleaseDoesNotCountAsSent: as in
// TestTheStoreHearsTheShareBeforeACallGoesOnIt, and a leased call ends
// during the drain; the store is down, so its Release is only kept for the
// keeper. The call on the share still waits until a request the store got
// carried the share.
func TestAQueuedReleaseDoesNotCountAsSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &lateStore{}
		s := keyAfter(t, st, `"key";r=600;t=0`)
		tk1 := admitNow(t, s, call(ops.GetContact, ""))
		lateShare(t, st, s, func(start time.Time) {
			go func() {
				// The Acquire fails at 600 ms, the drain ends at 850 ms.
				time.Sleep(time.Until(start.Add(750 * time.Millisecond)))
				tk1.Finish(answer("", ""))
			}()
		})
	})
}

// TestARetiredStatesSuccessorNumbersItsReservationsOn: the store is down,
// and the process, on its share, has no call for IdleTTL; its keeper ends
// once nothing is pending, and a sweep retires the state. The successor
// takes its name among the processes (member) and numbers its
// reservations on from the retired state's: a store keeping the highest
// Seq of each process would pass over every reservation numbered from 1
// again. A state whose keeper still runs is not idle: its keeper goes on
// numbering under the same name.
func TestARetiredStatesSuccessorNumbersItsReservationsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &downStore{refunded: map[string]float64{}}
		old := For("reserving.idle.test", "k")
		old.UseStore(st, "k", nil)
		learn(t, old)
		st.setDown(true)
		admitNow(t, old, call(ops.GetMe, "")).Finish(answer("", ""))
		time.Sleep(IdleTTL + sweepEvery)
		old.mu.Lock()
		old.keeping = true
		if old.idleLocked(time.Now()) {
			t.Error("a state whose keeper runs is idle")
		}
		old.keeping = false
		old.mu.Unlock()
		For("trigger2.idle.test", "k") // sweeps
		if !old.retired.Load() {
			t.Fatal("the state was not retired")
		}
		old.mu.Lock()
		oldSeq := old.reservation.seq
		old.mu.Unlock()
		cur := old.live()
		cur.mu.Lock()
		if cur.member != old.member || cur.reservation.seq < oldSeq {
			t.Errorf("the successor is process %s (the retired state %s), its reservations numbered from %d, the retired one's up to %d", cur.member, old.member, cur.reservation.seq, oldSeq)
		}
		cur.mu.Unlock()
		storeBack(st)
		time.Sleep(time.Minute)
	})
}

// TestTheKeeperEndsDuringALongOutage: the store is down for good (Redis
// gone, or a client's store closed) and the process has had no call for
// half an hour. The keeper ends once nothing is pending, as the store
// drops a reservation it does not hear of within its TTL anyway, and the
// state can be retired.
func TestTheKeeperEndsDuringALongOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &reservingStore{downStore: downStore{refunded: map[string]float64{}}}
		s := keyAfter(t, st, `"key";r=600;t=0`)
		st.setDown(true)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
		time.Sleep(30 * time.Minute)
		before := st.count()
		time.Sleep(time.Minute)
		s.mu.Lock()
		keeping, idle := s.keeping, s.idleLocked(time.Now())
		s.mu.Unlock()
		if n := st.count() - before; keeping || !idle || n > 0 {
			t.Errorf("half an hour after the last call, the store still down: keeping %v, idle %v; %d requests to the store in the last minute", keeping, idle, n)
		}
		storeBack(&st.downStore)
	})
}

// TestACallAfterTheKeeperEndedSendsTheShareAgain: the store has been down
// for half an hour, long enough that the keeper ended and the store, if the
// others still reach it, dropped this process's share and let them take
// it. The next call on the share goes only after a request carried the
// share again, and after a drain from then, so that the others' calls
// admitted into it meanwhile are done.
func TestACallAfterTheKeeperEndedSendsTheShareAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &reservingStore{downStore: downStore{refunded: map[string]float64{}}}
		s := keyAfter(t, st, `"key";r=600;t=0`)
		st.setDown(true)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
		time.Sleep(30 * time.Minute)
		s.mu.Lock()
		keeping := s.keeping
		s.mu.Unlock()
		if keeping {
			t.Fatal("the keeper still runs after half an hour without a call")
		}
		again := time.Now()
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
		went := time.Since(again)
		if sent := st.shareSent(again); sent < 0 || went < sent+minDrain {
			t.Errorf("the call went %v after it came, the share was sent again %v after it came (-1: never): want the drain of %v after that", went, sent, minDrain)
		}
		storeBack(&st.downStore)
	})
}

// TestAShareSentAfterTheDrainDrainsFromThen: the store's replies come late
// from the moment a call's Acquire fails, and the keeper is stuck in a
// renewal that hangs: the first request carrying the share comes back
// after the drain that began at the failure. The others may have filled
// the share's slots in between: the call on the share waits a drain from
// then.
func TestAShareSentAfterTheDrainDrainsFromThen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &lateStore{}
		s := keyAfter(t, st, `"key";r=600;t=0`)
		tk0 := admitNow(t, s, call(ops.GetContact, ""))
		start := time.Now()
		time.Sleep(100 * time.Millisecond)
		st.late.Store(true)
		tk := admitNow(t, s, call(ops.GetContact, ""))
		went := time.Since(start)
		sent := st.shareSent(start)
		if sent < 0 || went < sent+minDrain {
			t.Errorf("the call went %v after the share first reached the store, want at least the drain %v", went-sent, minDrain)
		}
		st.late.Store(false)
		tk.Finish(answer("", ""))
		tk0.Finish(answer("", ""))
		time.Sleep(time.Minute)
	})
}

// TestOnlyARequestCarryingTheShareEndsTheRedrain: a call of an earlier
// outage, admitted on the share without a lease, is still in flight as the
// store's replies come late again. The first request of the new outage
// was built before it and reserves only that call's slot; it comes back
// first. The call on the share of three slots still waits a drain from
// when a request carrying all three came back: until then the others may
// have filled the two the store did not know of.
func TestOnlyARequestCarryingTheShareEndsTheRedrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &lateStore{}
		s := keyAfter(t, st, `"key";r=600;t=0`)
		st.late.Store(true)
		unleased := admitNow(t, s, call(ops.GetContact, ""))
		st.late.Store(false)
		time.Sleep(2 * rejoinWindow)
		s.mu.Lock()
		on, slots := s.shareLocked(time.Now()), s.reservedLocked(time.Now())
		s.mu.Unlock()
		if on.on || slots != 1 {
			t.Fatalf("after the rejoin window: on the share %v, %d slots reserved, want off and 1", on.on, slots)
		}
		start := time.Now()
		st.late.Store(true)
		tk := admitNow(t, s, call(ops.GetContact, ""))
		went := time.Since(start)
		sent := st.slotsSent(start, shareOf(6, 2, 0))
		if back := sent + sharedTimeout; sent < 0 || went < back+minDrain {
			t.Errorf("the call on the share went %v after the outage began, the share came back to the process %v after (-1: never): want the drain of %v after that", went, back, minDrain)
		}
		st.late.Store(false)
		tk.Finish(answer("", ""))
		unleased.Finish(answer("", ""))
		time.Sleep(time.Minute)
	})
}

// fullStore is a reservingStore whose Acquire, while full, says the key's
// slots are all taken (the others hold them).
type fullStore struct {
	reservingStore
	full atomic.Bool
}

func (d *fullStore) Acquire(ctx context.Context, key string, a budgetstore.Acquire) (budgetstore.Grant, error) {
	g, err := d.reservingStore.Acquire(ctx, key, a)
	if err == nil && d.full.Load() {
		g.Admitted, g.Reason = false, "in-flight"
	}
	return g, err
}

// TestAFailureInTheRejoinWindowAfterTheShareWasDroppedDrains: the keeper
// ended in an outage, so the store dropped the share and the others took
// every slot. The store is back; the first request carries no share (the
// store counts as active again once sharedRetry passed) and is refused (the
// others hold all 6); in the rejoin window the call's next Acquire carries
// the share, which the store records over the others' 6. The store fails
// again within the window: the call goes on the share only a drain after
// the share came back.
func TestAFailureInTheRejoinWindowAfterTheShareWasDroppedDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fullStore{reservingStore: reservingStore{downStore: downStore{refunded: map[string]float64{}}}}
		s := keyAfter(t, st, `"key";r=600;t=0`)
		st.setDown(true)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
		time.Sleep(30 * time.Minute)
		s.mu.Lock()
		keeping, redrain := s.keeping, s.reservation.redrain
		s.mu.Unlock()
		if keeping || !redrain {
			t.Fatalf("keeping %v redrain %v", keeping, redrain)
		}
		st.full.Store(true)
		st.setDown(false)
		back := time.Now()
		go func() {
			time.Sleep(100 * time.Millisecond) // within the rejoin window
			st.setDown(true)
		}()
		tk := admitNow(t, s, call(ops.GetContact, ""))
		went := time.Since(back)
		sent := st.shareSent(back)
		s.mu.Lock()
		onShare, redrain := tk.lease == "", s.reservation.redrain
		s.mu.Unlock()
		if onShare && (sent < 0 || went < sent+minDrain) {
			t.Errorf("the call went on the share %v after the store first held the share again (over the others' 6), want at least the drain %v", went-sent, minDrain)
		}
		tk.Finish(answer("", ""))
		st.full.Store(false)
		storeBack(&st.downStore)
		time.Sleep(time.Minute)
	})
}

// slowArrivalStore is a lateStore whose requests take 30 ms to reach it
// (one way).
type slowArrivalStore struct{ lateStore }

func (d *slowArrivalStore) Acquire(ctx context.Context, k string, a budgetstore.Acquire) (budgetstore.Grant, error) {
	time.Sleep(30 * time.Millisecond)
	return d.lateStore.Acquire(ctx, k, a)
}
func (d *slowArrivalStore) Renew(ctx context.Context, k string, r budgetstore.Renew) (budgetstore.Members, error) {
	time.Sleep(30 * time.Millisecond)
	return d.lateStore.Renew(ctx, k, r)
}
func (d *slowArrivalStore) Release(ctx context.Context, k string, r budgetstore.Release) error {
	time.Sleep(30 * time.Millisecond)
	return d.lateStore.Release(ctx, k, r)
}

// TestAShareOnItsWayIsNotSent: the store's requests take 30 ms to reach
// it: a call on the share waits until the request carrying the share came
// back, not only until it left.
func TestAShareOnItsWayIsNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &slowArrivalStore{}
		s := keyAfter(t, st, `"key";r=600;t=0`)
		lateShare(t, &st.lateStore, s, func(time.Time) {})
	})
}

// holdStore models what Redis holds for this process (rank 0 of two): its
// leases, each until it runs out (TTL, renewal, a release's linger), and
// its latest reservation by Seq. While down, every request reaches it and
// its reply is lost.
type holdStore struct {
	mu       sync.Mutex
	down     bool
	leases   map[string]time.Time
	released map[string]bool // a Renew that comes after the Release leaves it as it was
	rsv      budgetstore.Reservation
	rsvTil   time.Time
}

func (d *holdStore) reserve(r budgetstore.Reservation) {
	now := time.Now()
	if r.Seq == 0 || r.Seq <= d.rsv.Seq && now.Before(d.rsvTil) {
		return
	}
	d.rsv, d.rsvTil = r, now.Add(r.TTL)
}

// hold is how many slots the others see this process hold now.
func (d *holdStore) hold() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	n := 0
	for _, until := range d.leases {
		if until.After(now) {
			n++
		}
	}
	if now.Before(d.rsvTil) {
		n += d.rsv.Slots
	}
	return n
}

var errLost = errors.New("reply lost")

func (d *holdStore) Acquire(_ context.Context, _ string, a budgetstore.Acquire) (budgetstore.Grant, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reserve(a.Reservation)
	d.leases[a.Lease] = time.Now().Add(a.LeaseTTL)
	if d.down {
		return budgetstore.Grant{}, errLost
	}
	return budgetstore.Grant{Admitted: true, Members: two}, nil
}
func (d *holdStore) Renew(_ context.Context, _ string, r budgetstore.Renew) (budgetstore.Members, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reserve(r.Reservation)
	for _, id := range r.Leases {
		if !d.released[id] {
			d.leases[id] = time.Now().Add(r.LeaseTTL)
		}
	}
	if d.down {
		return budgetstore.Members{}, errLost
	}
	return two, nil
}
func (d *holdStore) Release(_ context.Context, _ string, r budgetstore.Release) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reserve(r.Reservation)
	if d.released == nil {
		d.released = map[string]bool{}
	}
	d.released[r.Lease] = true
	d.leases[r.Lease] = time.Now().Add(r.Linger)
	if d.down {
		return errLost
	}
	return nil
}
func (d *holdStore) Refund(context.Context, string, []budgetstore.Level) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return errLost
	}
	return nil
}
func (d *holdStore) setDown(b bool) { d.mu.Lock(); d.down = b; d.mu.Unlock() }

// backInTheRejoinWindow is a process on a holdStore whose longest call
// took 1 s, after an outage of the store and the store back: the process
// is in the rejoin window, still keeping to its share, 3 of 6, and the
// keeper's round that found the store back has sent the release it kept.
// It runs in a synctest bubble.
func backInTheRejoinWindow(t *testing.T) (*holdStore, *State) {
	t.Helper()
	st := &holdStore{leases: map[string]time.Time{}}
	s := keyAfter(t, st, `"key";r=600;t=0`)
	long := admitNow(t, s, call(ops.GetContact, ""))
	time.Sleep(time.Second) // the longest call: 1 s
	long.Finish(answer("", ""))

	// An outage, and the store back.
	st.setDown(true)
	admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
	st.setDown(false)
	for {
		s.mu.Lock()
		back := s.sharedActiveLocked(time.Now()) && !s.rejoinedAt.IsZero()
		s.mu.Unlock()
		if back {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	synctest.Wait() // the keeper's round that found the store back sends the release it kept
	return st, s
}

// TestALingeringLeaseOnTheShareKeepsItsSlotInTheStore: in the rejoin
// window (the process still keeps to its share, 3 of 6), a leased call is
// given up on and its slot lingers; the release tells the store to hold
// the lease for the linger. The reservation covers the lingering slot as
// well, so that when the linger ends the store still holds the whole share
// for the process, and the other process (which always has calls waiting)
// cannot take that slot before the process's next request. The store then
// fails within the rejoin window and the process goes on its full share
// with no drain.
func TestALingeringLeaseOnTheShareKeepsItsSlotInTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, s := backInTheRejoinWindow(t)
		if h := st.hold(); h != 3 {
			t.Fatalf("back in the rejoin window, the store holds %d slots of the process, want its share 3", h)
		}
		// A leased call given up on: its slot lingers ~1 s.
		c1 := admitNow(t, s, call(ops.GetContact, ""))
		c1.Unanswered(true, false)
		minHold := 3
		end := time.Now().Add(1100 * time.Millisecond)
		for time.Now().Before(end) {
			minHold = min(minHold, st.hold())
			time.Sleep(time.Millisecond)
		}
		others := 6 - minHold // the other process took every slot the store let go
		// The store fails within the rejoin window.
		st.setDown(true)
		var tks []*Ticket
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			tk, _, err := s.Admit(ctx, call(ops.GetContact, ""))
			cancel()
			if err == nil {
				tks = append(tks, tk)
			}
		}
		s.mu.Lock()
		mine := s.inflight
		s.mu.Unlock()
		if mine+others > 6 {
			t.Errorf("the store held as few as %d slots for the process (others then took %d); it then went on %d calls on its share within 50 ms each: %d in flight", minHold, others, mine, mine+others)
		}
		for _, tk := range tks {
			tk.Finish(answer("", ""))
		}
		st.setDown(false)
		time.Sleep(time.Minute)
	})
}

// admittedAfter admits c on s in a goroutine, finishes it with a plain
// answer and sends when it went; nothing when it failed.
func admittedAfter(ctx context.Context, t *testing.T, s *State, c *Call) <-chan time.Time {
	done := make(chan time.Time, 1)
	go func() {
		tk, _, err := s.Admit(ctx, c)
		if err != nil {
			return
		}
		done <- time.Now()
		tk.Finish(answer("", ""))
	}()
	return done
}

// TestAStoreBackWakesTheCallsItsShareHeld: a call the outage's share held
// at a level goes once the store is back and would admit it, not when the
// share would have let it (35 s on), nor never, where the share leaves
// this process nothing (seven processes for six slots).
func TestAStoreBackWakesTheCallsItsShareHeld(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (*State, *downStore)
		c     *Call
	}{
		{"a level refilling at its share", func(t *testing.T) (*State, *downStore) {
			st := &downStore{refunded: map[string]float64{}}
			return drainedKey(t, st), st
		}, &Call{Op: "big", Cost: 60, Demand: []Demand{{Level: Key, Amount: 60}}, Budgeted: true}},
		{"a share of nothing", func(t *testing.T) (*State, *downStore) {
			st := &sevenStore{downStore: downStore{refunded: map[string]float64{}}, procs: 7}
			return keyAfter(t, st, `"key";r=300;t=30`), &st.downStore
		}, call(ops.GetContact, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, st := tc.setup(t)
				st.setDown(true)
				time.Sleep(5 * time.Second) // found down, the drain over
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := admittedAfter(ctx, t, s, tc.c)
				time.Sleep(time.Second)
				if why := held(s, tc.c); why == "" {
					t.Fatal("the call was not held while the store was down")
				}
				back := time.Now()
				st.setDown(false)
				select {
				case at := <-done:
					if at.Sub(back) > rejoinWindow+time.Second {
						t.Errorf("the call went %v after the store came back", at.Sub(back))
					}
				case <-time.After(10 * time.Minute):
					t.Error("the call had not gone 10 minutes after the store came back")
				}
				cancel()
				time.Sleep(time.Minute)
			})
		})
	}
}

// TestAnOutageSnapshotSaysTheProcesssPart: while the store is down, a
// process of four keeps to its part of the key level (rule 7), and the
// snapshot says so: its Share is that part, and a level it shows full
// (FullIn 0) holds its Share of the Capacity.
func TestAnOutageSnapshotSaysTheProcesssPart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &downStore{refunded: map[string]float64{}}
		s := keyAfter(t, st, `"key";r=600;t=0`)
		st.setDown(true)
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", ""))
		time.Sleep(1500 * time.Millisecond) // within sharedRetry: the process keeps to its part
		held(s, call(ops.GetContact, ""))
		for _, l := range s.Snapshot().Levels {
			if l.Name == Key && (l.Share >= 1 || l.FullIn == 0 && l.Remaining < l.Share*float64(l.Capacity)-1e-9) {
				t.Errorf("the key level in the outage: Remaining %.1f of Capacity %d, Share %v, FullIn %v; want this process's part, and not full below it",
					l.Remaining, l.Capacity, l.Share, l.FullIn)
			}
		}
		storeBack(st)
	})
}
