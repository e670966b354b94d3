package budget

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// TestALeavingFirstOfItsSizeWakesTheNext: behind a create the org holds,
// two gets of one size wait for the org's pace, and only the first of the
// size has a timer. When that first get gives up, the second becomes the
// first of its size and goes within the pace's 2 s.
func TestALeavingFirstOfItsSizeWakesTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, r := orgPacedToThree(t)
		var wg sync.WaitGroup
		admitLater(t, s, &wg, call(ops.CreateContact, "")) // 5 points, 3 left: waits
		ctx, cancel := context.WithCancel(context.Background())
		wg.Go(func() {
			if _, _, err := s.Admit(ctx, call(ops.GetContact, "")); err == nil {
				t.Error("the get that gave up was admitted")
			}
		})
		synctest.Wait()
		start := time.Now()
		got := make(chan *Ticket, 1)
		wg.Go(func() {
			tk, _, err := s.Admit(context.Background(), call(ops.GetContact, ""))
			if err != nil {
				t.Error(err)
			}
			got <- tk
		})
		synctest.Wait()
		cancel()
		tk := <-got
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("the second get went after %v, want within the org pace's 2 s", d)
		}
		if tk != nil {
			tk.Finish(orgAnswer(r - 1))
		}
		s.Spend(Org, 1000) // lets the create go
		wg.Wait()
	})
}

// TestACallBehindTheFirstLooksWhenTheLevelFrees: a 7-point list waits
// alone for the key's log to free 19 points at 90 s. A get that comes at
// 32 s needs the point that frees at 60 s, which delays the list not at
// all: it goes at 60 s, not with the list, and before any get that
// arrives later.
func TestACallBehindTheFirstLooksWhenTheLevelFrees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := keyOf20(t)
		start := time.Now()
		admitNow(t, s, call(ops.GetContact, "")).Finish(answer("", "")) // 1 point, frees at 60 s
		time.Sleep(30 * time.Second)
		s.Spend(Key, 0) // 19 points, free at 90 s
		time.Sleep(time.Second)
		var wg sync.WaitGroup
		admitLater(t, s, &wg, call(ops.ListContacts, "q=a")) // 7 points: waits until 90 s
		time.Sleep(time.Second)
		var went time.Duration
		wg.Go(func() {
			tk, _, err := s.Admit(context.Background(), call(ops.GetContact, ""))
			if err != nil {
				t.Error(err)
				return
			}
			went = time.Since(start)
			tk.Finish(answer("", ""))
		})
		wg.Wait()
		if went != time.Minute {
			t.Errorf("the get that came at 32 s went at %v, want at 1m0s, when its point freed", went)
		}
	})
}
