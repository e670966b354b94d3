package budget

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// TestAPanickingCallbackFailsOnlyItsCall: a write whose OnSlow (the
// client's logger) panics fails with a PanicError and leaves the write
// level's queue, so the write behind it goes when the level frees a minute
// on; a call whose OnHeld panics fails the same way.
func TestAPanickingCallbackFailsOnlyItsCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		learn(t, s)
		s.Spend(Write, 0) // the write log frees the whole quota a minute from now
		var wg sync.WaitGroup
		slow, held := call(ops.CreateContact, ""), call(ops.CreateContact, "")
		slow.OnSlow = func(context.Context, SlowWait) { panic("a logger that panics") }
		held.OnHeld = func(string) <-chan struct{} { panic("a status request that panics") }
		for c, where := range map[*Call]string{slow: PanicLogger, held: PanicStatus} {
			wg.Go(func() {
				var p *PanicError
				if _, _, err := s.Admit(context.Background(), c); !errors.As(err, &p) || p.Where != where {
					t.Errorf("a call whose %s panics: %v", where, err)
				}
			})
		}
		synctest.Wait()
		tk, waited := admitAt(t, s, call(ops.CreateContact, ""))
		tk.Finish(answer("", ""))
		wg.Wait()
		if waited > time.Minute {
			t.Errorf("the write behind them waited %v, want the level's minute", waited)
		}
		if w := s.Snapshot().Waiting; w != 0 {
			t.Errorf("%d calls still waiting", w)
		}
	})
}
