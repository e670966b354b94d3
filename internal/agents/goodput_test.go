package agents

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// scenario is one run of the goodput benchmark.
type scenario struct {
	name    string
	agents  int
	minutes int
	budget  bool
	foreign float64 // points per second another key of the org takes
}

type outcome struct {
	scenario
	counts    Counts
	server    sandbox.KeyStats
	allowance int
}

func (o outcome) goodput() float64 { return float64(o.server.PointsAccepted) / float64(o.allowance) }

func (o outcome) rate429() float64 {
	return float64(o.counts.Count429()) / float64(max(o.server.Requests, 1))
}

// allowance is what the key may use over the run: the key bucket's capacity
// plus its quota per window, or, when another key eats the org budget, the
// org bucket plus what the org's refill leaves, if that is less.
func allowance(sc scenario, lim sandbox.Limits) int {
	return Allowance(time.Duration(sc.minutes)*time.Minute, sc.foreign, lim)
}

const seed = 20261130

// runSeq gives every run a host of its own, so no two share a key's state.
var runSeq atomic.Int64

func runScenario(t *testing.T, sc scenario) outcome {
	var out outcome
	synctest.Test(t, func(t *testing.T) {
		opts := []sandbox.Option{sandbox.WithLatency(30 * time.Millisecond)}
		if sc.foreign > 0 {
			opts = append(opts, sandbox.WithForeignLoad(sc.foreign))
		}
		srv := sandbox.New(opts...)
		stats := NewStats()
		copts := []bodo.Option{
			bodo.WithAPIKey(sandbox.TestKey),
			bodo.WithBaseURL(fmt.Sprintf("https://run%d.goodput.test", runSeq.Add(1))),
			bodo.WithHTTPClient(&http.Client{Transport: stats.Transport(srv.Transport())}),
			bodo.WithLogger(slog.New(slog.DiscardHandler)),
		}
		if !sc.budget {
			copts = append(copts, bodo.WithoutBudget())
		}
		client, err := bodo.NewClient(copts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(sc.minutes)*time.Minute)
		defer cancel()
		Run(ctx, sc.agents, client, stats, seed)
		out = outcome{scenario: sc, counts: stats.Snapshot(), server: srv.Stats(sandbox.TestKey), allowance: allowance(sc, sandbox.DefaultLimits())}
		settle()
	})
	return out
}

// settle lets the sandbox finish the requests whose callers gave up when
// the run ended (like a real server it goes on with them), so that no
// goroutine of the bubble is left asleep when it ends.
func settle() { time.Sleep(time.Minute) }

var goodputScenarios = []scenario{
	{"1 agent", 1, 60, true, 0},
	{"8 agents", 8, 60, true, 0},
	{"64 agents", 64, 60, true, 0},
	{"64 agents, budget off", 64, 60, false, 0},
	{"64 agents, org 95 % foreign", 64, 60, true, 47.5},
	{"64 agents, org 95 % foreign, budget off", 64, 60, false, 47.5},
}

// TestGoodput is the benchmark of issue 4 on virtual time against the
// sandbox: the mixed workload for 60 minutes. It prints a markdown table
// (go test ./internal/agents -run TestGoodput -v) and checks the targets.
func TestGoodput(t *testing.T) {
	if testing.Short() {
		t.Skip("the goodput benchmark runs 60 virtual minutes per scenario")
	}
	var mu sync.Mutex
	results := map[string]outcome{}
	t.Run("scenarios", func(t *testing.T) {
		for _, sc := range goodputScenarios {
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel() // each in a bubble and on a host of its own
				o := runScenario(t, sc)
				mu.Lock()
				results[sc.name] = o
				mu.Unlock()
				switch {
				case !sc.budget:
					if o.server.Lockouts != 0 {
						t.Errorf("%d lockouts", o.server.Lockouts)
					}
				case sc.foreign > 0:
					if o.server.Lockouts != 0 || o.rate429() > 0.02 || o.goodput() < 0.90 {
						t.Errorf("lockouts %d, 429s %.2f %%, goodput %.1f %% of what the org leaves", o.server.Lockouts, 100*o.rate429(), 100*o.goodput())
					}
				case sc.agents == 64:
					if o.server.Lockouts != 0 || o.rate429() > 0.005 || o.goodput() < 0.98 || o.server.MaxInFlight > 6 {
						t.Errorf("lockouts %d, 429s %.2f %%, goodput %.1f %%, max in flight %d", o.server.Lockouts, 100*o.rate429(), 100*o.goodput(), o.server.MaxInFlight)
					}
				}
			})
		}
	})
	var b strings.Builder
	b.WriteString("| run (60 virtual min) | requests | points accepted | allowance | goodput | 429s | lockouts | max in flight | gave up | p50 | p99 |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, sc := range goodputScenarios {
		o, ok := results[sc.name]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f %% | %d (%.2f %%) | %d | %d | %d | %v | %v |\n",
			sc.name, o.server.Requests, o.server.PointsAccepted, o.allowance, 100*o.goodput(),
			o.counts.Count429(), 100*o.rate429(), o.server.Lockouts, o.server.MaxInFlight, o.counts.GaveUp,
			o.counts.Percentile(50).Round(time.Millisecond), o.counts.Percentile(99).Round(time.Millisecond))
	}
	t.Log("\n" + b.String())
	if path := os.Getenv("BODO_GOODPUT_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}
