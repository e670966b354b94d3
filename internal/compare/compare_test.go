package compare

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/internal/agents"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

var update = flag.Bool("update", false, "run the full comparison and the overhead benchmarks and rewrite results/")

// seed is the workload's seed, the same as TestGoodput's.
const seed = 20261130

// runSeq gives every run a host of its own.
var runSeq atomic.Int64

// run runs contender c through scenario sc on virtual time, the workload
// drawn from seed.
func run(t *testing.T, sc Scenario, c Contender, seed uint64) Result {
	t.Helper()
	var res Result
	synctest.Test(t, func(t *testing.T) {
		opts := []sandbox.Option{sandbox.WithLatency(30 * time.Millisecond)}
		if sc.Foreign > 0 {
			opts = append(opts, sandbox.WithForeignLoad(sc.Foreign))
		}
		if sc.Faults {
			opts = append(opts, Faults())
		}
		srv := sandbox.New(opts...)
		stats := agents.NewStats()
		env := Env{
			Transport: stats.Transport(srv.Transport()),
			BaseURL:   fmt.Sprintf("https://run%d.compare.test", runSeq.Add(1)),
			Key:       sandbox.TestKey,
		}
		api, err := c.New(env)
		if err != nil {
			t.Fatal(err)
		}
		d := time.Duration(sc.Minutes) * time.Minute
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()

		// The points the server accepted in each minute, sampled on the
		// minute; the last minute is what is left at the end.
		start := time.Now()
		perMinute := make([]int, 0, sc.Minutes)
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			prev := 0
			for m := 1; m < sc.Minutes; m++ {
				time.Sleep(time.Until(start.Add(time.Duration(m) * time.Minute)))
				p := srv.Stats(env.Key).PointsAccepted
				perMinute = append(perMinute, p-prev)
				prev = p
			}
		}()

		agents.RunAPI(ctx, sc.Agents, api, stats, seed)
		<-sampled
		st := srv.Stats(env.Key)
		sum := 0
		for _, p := range perMinute {
			sum += p
		}
		perMinute = append(perMinute, st.PointsAccepted-sum)
		cs := stats.Snapshot()
		names, extra := srv.DuplicateContactNames()
		res = Result{
			Scenario: sc, Contender: c.Name,
			Requests: st.Requests, Points: st.PointsAccepted,
			Allowance: agents.Allowance(d, sc.Foreign, sandbox.DefaultLimits()),
			Status429: cs.Status429, Status503: cs.Status503,
			Lockouts: st.Lockouts, MaxInFlight: st.MaxInFlight,
			DupNames: names, DupExtra: extra,
			Calls: cs.Calls, Failed: cs.Calls - cs.OK, Errors: cs.Errors,
			P50: cs.Percentile(50), P99: cs.Percentile(99),
			PerMinute: perMinute,
		}
		// Let the sandbox finish the requests whose callers left when the
		// run ended, so no goroutine of the bubble is left asleep.
		time.Sleep(time.Minute)
	})
	return res
}

// TestSmoke runs every contender for two virtual minutes, plain and with
// faults, and checks that the numbers are sane and that bodo-go neither
// locks the key out nor writes anything twice. It is what a plain go test
// runs; TestCompare -update runs the full comparison.
func TestSmoke(t *testing.T) {
	lim := sandbox.DefaultLimits()
	for _, sc := range []Scenario{
		{Name: "smoke", Agents: 8, Minutes: 2},
		{Name: "smoke, faults", Agents: 8, Minutes: 2, Faults: true},
	} {
		for _, c := range Contenders {
			t.Run(sc.Name+"/"+c.Name, func(t *testing.T) {
				r := run(t, sc, c, seed)
				t.Logf("%d requests, %d points of %d, %d × 429, %d × 503, %d lockouts, %d duplicated, %d of %d calls failed (%s)",
					r.Requests, r.Points, r.Allowance, r.Status429, r.Status503, r.Lockouts, r.DupExtra, r.Failed, r.Calls, ErrorLine(r))
				if r.Calls == 0 || r.Points == 0 {
					t.Errorf("no work done: %d calls, %d points", r.Calls, r.Points)
				}
				if max := lim.KeyCapacity + lim.KeyQuota*sc.Minutes; r.Points > max {
					t.Errorf("%d points accepted, more than the key can hold (%d)", r.Points, max)
				}
				if len(r.PerMinute) != sc.Minutes {
					t.Errorf("%d minutes sampled, want %d", len(r.PerMinute), sc.Minutes)
				}
				if c.Name == "bodo-go" || c.Name == "bodo-go, budget off" {
					if r.Lockouts != 0 || r.DupExtra != 0 {
						t.Errorf("bodo-go: %d lockouts, %d duplicated writes", r.Lockouts, r.DupExtra)
					}
				}
				if c.Name == "bodo-go" && !sc.Faults && r.Goodput() < 0.9 {
					t.Errorf("bodo-go: goodput %.1f %%", 100*r.Goodput())
				}
			})
		}
	}
}

// runsFromEnv is how many times a full comparison runs everything:
// BODO_RUNS, 1 when it is not set.
func runsFromEnv(t *testing.T) int {
	v := os.Getenv("BODO_RUNS")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("BODO_RUNS=%q: want a number of runs, 1 or more", v)
	}
	return n
}

// TestCompare runs every contender through every scenario for 60 virtual
// minutes and writes results/compare.md and the charts. It runs only with
// -update; BODO_RUNS=n runs everything n times, with seeds seed, seed+1, …,
// and the tables show each cell's median and spread.
func TestCompare(t *testing.T) {
	if !*update {
		t.Skip("the full comparison runs with -update (see run.sh)")
	}
	n := runsFromEnv(t)
	runs := make([][]Result, n)
	for i := range runs {
		for _, sc := range Scenarios {
			for _, c := range Contenders {
				name := sc.Name + "/" + c.Name
				if n > 1 {
					name = fmt.Sprintf("run %d/%s", i+1, name)
				}
				t.Run(name, func(t *testing.T) {
					start := time.Now()
					r := run(t, sc, c, seed+uint64(i))
					t.Logf("%d requests, %d points of %d, %d lockouts, %d duplicated (%v)", r.Requests, r.Points, r.Allowance,
						r.Lockouts, r.DupExtra, time.Since(start).Round(time.Millisecond))
					runs[i] = append(runs[i], r)
				})
			}
		}
	}
	results := runs[0]
	dir := "results"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "compare.md"), []byte(Report(runs...)), 0o644); err != nil {
		t.Fatal(err)
	}
	lim := sandbox.DefaultLimits()
	for _, c := range Charts {
		var rows []Result
		for _, r := range results {
			if r.Scenario.Name == c.Scenario {
				rows = append(rows, r)
			}
		}
		title := fmt.Sprintf("Points accepted per minute: %s, 60 virtual minutes", c.Scenario)
		if err := Chart(filepath.Join(dir, c.File), title, rows, lim.KeyCapacity, lim.KeyQuota*int(time.Minute/lim.Window)); err != nil {
			t.Fatal(err)
		}
	}
}
