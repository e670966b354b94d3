package compare

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var overheadOut = flag.String("overhead", "", "measure the overhead, rewrite results/overhead.md and write the summary lines to this file")

// The paired measurement of the overhead command: pairedRounds rounds of
// pairedCalls calls for each client.
const (
	pairedRounds = 41
	pairedCalls  = 1500
)

// pairedSide is one client of a paired measurement and what it used.
type pairedSide struct {
	bc      benchClient
	get     getter
	waits   *atomic.Int64
	ns, cpu []time.Duration // per round
	mallocs uint64
	bytes   uint64
	waited  int64
	failed  bool
}

// measurePaired measures getContact through every client of benchClients
// round by round: each round makes calls calls through each client from the
// given number of goroutines, the clients one after the other (after a GC),
// in the order of benchClients on even rounds and the reverse on odd ones,
// so that both sides of a pair go first equally often. All clients share one
// sandbox. It returns one Overhead per client, the gen row first, with each
// other client's per-round ratios to gen.
func measurePaired(tb testing.TB, goroutines, rounds, calls int) []Overhead {
	srv, id := benchSandbox(tb)
	ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
	defer cancel()
	sides := make([]*pairedSide, len(benchClients))
	for i, bc := range benchClients {
		get, waits := bc.make(tb, srv, fmt.Sprintf("paired-%s-%d-%d.bench.test", bc.name, goroutines, runSeq.Add(1)))
		s := &pairedSide{bc: bc, get: get, waits: waits}
		if err := batch(ctx, get, id, goroutines, calls/4); err != nil { // warm up
			tb.Errorf("%s: %v", bc.name, err)
			s.failed = true
		}
		sides[i] = s
	}
	var before, after runtime.MemStats
	for r := range rounds {
		for k := range sides {
			s := sides[k]
			if r%2 == 1 {
				s = sides[len(sides)-1-k]
			}
			if s.failed {
				continue
			}
			var w0 int64
			if s.waits != nil {
				w0 = s.waits.Load()
			}
			runtime.GC()
			runtime.ReadMemStats(&before)
			c0, t0 := cpuTime(), time.Now()
			err := batch(ctx, s.get, id, goroutines, calls)
			el, cpu := time.Since(t0), cpuTime()-c0
			runtime.ReadMemStats(&after)
			if err != nil {
				tb.Errorf("%s, %d goroutines: %v", s.bc.name, goroutines, err)
				s.failed = true
				continue
			}
			s.ns, s.cpu = append(s.ns, el), append(s.cpu, cpu)
			s.mallocs += after.Mallocs - before.Mallocs
			s.bytes += after.TotalAlloc - before.TotalAlloc
			if s.waits != nil {
				s.waited += s.waits.Load() - w0
			}
		}
	}
	gen := sides[0]
	out := make([]Overhead, 0, len(sides))
	for _, s := range sides {
		o := Overhead{Client: s.bc.name, Goroutines: goroutines, Rounds: len(s.ns), Calls: calls, Failed: s.failed}
		if s.failed {
			out = append(out, o)
			continue
		}
		n := float64(len(s.ns) * calls)
		var total time.Duration
		for _, d := range s.ns {
			total += d
		}
		o.NsPerOp = float64(total) / n
		o.AllocsPerOp, o.BytesPerOp, o.WaitsPerOp = float64(s.mallocs)/n, float64(s.bytes)/n, float64(s.waited)/n
		if s != gen && !gen.failed {
			for r := range s.ns {
				o.Time = append(o.Time, float64(s.ns[r])/float64(gen.ns[r]))
				o.CPU = append(o.CPU, float64(s.cpu[r])/float64(max(gen.cpu[r], 1)))
			}
		}
		out = append(out, o)
	}
	return out
}

// batch makes calls calls of get from the given number of goroutines and
// returns the first error.
func batch(ctx context.Context, get getter, id string, goroutines, calls int) error {
	if goroutines == 1 {
		for range calls {
			if err := get(ctx, id); err != nil {
				return err
			}
		}
		return nil
	}
	var left atomic.Int64
	left.Store(int64(calls))
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := get(ctx, id); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// TestOverhead measures bodo-go against the raw generated client, paired
// round by round (measurePaired, from 1 goroutine and from 64), with the
// allocations by function and the sustained reads, rewrites
// results/overhead.md and writes one Summary line per number of goroutines
// to the file -overhead names. It runs only with -overhead or -update (see
// run.sh).
func TestOverhead(t *testing.T) {
	if *overheadOut == "" && !*update {
		t.Skip("the overhead measurement runs with -overhead FILE or -update (see run.sh)")
	}
	var rows []Overhead
	var lines strings.Builder
	for _, n := range benchGoroutines {
		got := measurePaired(t, n, pairedRounds, pairedCalls)
		for _, o := range got[1:] {
			t.Logf("%s, %d goroutines: %s; %.0f ns/op, %.1f allocs/op against %.1f, %.4f waits/op",
				o.Client, n, o.Summary(got[0]), o.NsPerOp, o.AllocsPerOp, got[0].AllocsPerOp, o.WaitsPerOp)
			if o.Client == "bodo-go" && !o.Failed && !got[0].Failed {
				fmt.Fprintf(&lines, "%d goroutine(s): %s\n", n, o.Summary(got[0]))
			}
		}
		rows = append(rows, got...)
	}
	if t.Failed() {
		return
	}
	allocs := map[string][]FuncAllocs{}
	for _, bc := range benchClients {
		if bc.name != "bodo-go-nobudget" {
			allocs[bc.name] = allocBreakdown(t, bc, 1000)
		}
	}
	var runs []Sustained
	for _, bc := range benchClients {
		if bc.name == "bodo-go-nobudget" {
			continue
		}
		r := Sustained{Client: bc.name}
		for _, p := range sustained(t, bc, 12) {
			r.PerSecond = append(r.PerSecond, p.ok)
		}
		runs = append(runs, r)
	}
	if err := os.MkdirAll("results", 0o755); err != nil {
		t.Fatal(err)
	}
	md := OverheadReport(rows, runtime.GOMAXPROCS(0), runs, allocs)
	if err := os.WriteFile(filepath.Join("results", "overhead.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	if *overheadOut != "" {
		if err := os.WriteFile(*overheadOut, []byte(lines.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAllocsPerCall fails when a Contacts.Get through bodo-go makes more
// allocations than the same call through the raw generated client
// (testing.AllocsPerRun, exact). It also logs a short paired time ratio,
// which it never checks: time on a shared machine says little.
func TestAllocsPerCall(t *testing.T) {
	srv, id := benchSandbox(t)
	ctx := context.Background()
	per := map[string]float64{}
	for _, bc := range benchClients {
		get, _ := bc.make(t, srv, fmt.Sprintf("allocs-%s-%d.bench.test", bc.name, runSeq.Add(1)))
		if err := get(ctx, id); err != nil {
			t.Fatal(err)
		}
		per[bc.name] = testing.AllocsPerRun(500, func() {
			if err := get(ctx, id); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Logf("allocations per call: gen %.0f, bodo-go %.0f, bodo-go-nobudget %.0f", per["gen"], per["bodo-go"], per["bodo-go-nobudget"])
	for _, name := range []string{"bodo-go", "bodo-go-nobudget"} {
		if per[name] > per["gen"] {
			t.Errorf("%s makes %.0f allocations per call, more than the raw generated client's %.0f", name, per[name], per["gen"])
		}
	}
	if testing.Short() {
		return
	}
	got := measurePaired(t, 1, 9, 200)
	t.Logf("bodo-go, 1 goroutine, 9 paired rounds of 200 calls (reported, not checked): %s", got[1].Summary(got[0]))
}
