package budget

import (
	"context"
	"log/slog"
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
