package compare

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/bodo-app/bodo-go"
)

// secondCounts is what one second of a sustained run saw.
type secondCounts struct {
	ok     int            // calls that got through
	waited map[string]int // calls that waited for the budget, by what held them
	held   map[string]int // calls the budget held past their deadline, by level
}

// sustained gets one contact through a new client of bc as fast as one
// goroutine can for the given seconds, on a sandbox whose limits are all
// 2^40, each call with a 100 ms deadline (so a call the budget would hold
// longer fails at once, naming the level that holds it; the loop then sleeps
// 10 ms), and counts every second.
func sustained(t *testing.T, bc benchClient, seconds int) []secondCounts {
	per := make([]secondCounts, seconds)
	for i := range per {
		per[i].waited, per[i].held = map[string]int{}, map[string]int{}
	}
	start := time.Now()
	onWait = func(e bodo.WaitEvent) { // called from the loop's goroutine
		if s := int(time.Since(start) / time.Second); s < seconds {
			per[s].waited[e.Reason]++
		}
	}
	defer func() { onWait = nil }()
	srv, id := benchSandbox(t)
	get, _ := bc.make(t, srv, fmt.Sprintf("sustained-%s-%d.bench.test", bc.name, runSeq.Add(1)))
	for {
		s := int(time.Since(start) / time.Second)
		if s >= seconds {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := get(ctx, id)
		cancel()
		var apiErr *bodo.Error
		switch {
		case err == nil:
			per[s].ok++
			continue
		case errors.As(err, &apiErr) && apiErr.Local:
			per[s].held[apiErr.Policy]++
		default:
			per[s].held["other: "+err.Error()]++
		}
		time.Sleep(10 * time.Millisecond)
	}
	return per
}

func counts(m map[string]int) []string {
	var l []string
	for r, n := range m {
		l = append(l, fmt.Sprintf("%s %d", r, n))
	}
	sort.Strings(l)
	return l
}

// TestBudgetStall is a diagnosis for overhead.md: it runs sustained for
// bodo-go for 20 s and logs for every second how many calls got through,
// what the ones that waited waited for (WithOnWait), and which levels held
// how many past their deadline. It fails only when no call got through,
// so it is a diagnosis, not a test: it runs only with BODO_DIAGNOSE=1
// (bash internal/compare/run.sh stall).
func TestBudgetStall(t *testing.T) {
	if os.Getenv("BODO_DIAGNOSE") == "" {
		t.Skip("a 20 s diagnosis that asserts next to nothing; set BODO_DIAGNOSE=1 to run it")
	}
	total := 0
	for s, p := range sustained(t, benchClients[1], 20) {
		t.Logf("second %2d: %6d calls through (waited for %v), held past their deadline by %v", s, p.ok, counts(p.waited), counts(p.held))
		total += p.ok
	}
	if total == 0 {
		t.Fatal("no call got through")
	}
}
