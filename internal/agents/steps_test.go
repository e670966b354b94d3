package agents

import (
	"fmt"
	"log/slog"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// stepsProfiles are servers whose search policy, one the contract does not
// document, binds the agents and frees in steps: 10 searches a minute in
// fixed windows, in a sliding log whose t is when its oldest take leaves,
// and in one whose t is when it is full again.
func stepsProfiles() []sandbox.Profile {
	var ps []sandbox.Profile
	for _, sh := range []sandbox.Shape{sandbox.FixedWindow, sandbox.SlidingLog, sandbox.SlidingLogUntilFull} {
		ps = append(ps, sandbox.Profile{
			Name: "search-10-" + string(sh), Summary: "an enforced search policy of 10 a minute, a " + string(sh),
			Limits: sandbox.DefaultLimits(), Options: []sandbox.Option{sandbox.WithExtraPolicies(sandbox.ExtraPolicy{
				Name: "bodo-search", Quota: 10, Window: time.Minute, Unit: "requests", Shape: sh, Enforced: true,
				Operations: []string{"listContacts", "countContacts"}, Query: "q",
			})},
		})
	}
	return ps
}

// TestPoliciesThatFreeInSteps runs 8 and 64 agents for an hour against
// each of stepsProfiles (docs/measurements.md), BODO_RUNS times (3 when
// unset), and logs the table; BODO_STEPS_TABLE names a file to write it
// to. It runs only with BODO_STEPS=1. Every run keeps the guarantees (no
// lockout, no early request, at most the parallel quota in flight).
func TestPoliciesThatFreeInSteps(t *testing.T) {
	if os.Getenv("BODO_STEPS") == "" {
		t.Skip("set BODO_STEPS=1 to measure search policies that free in steps")
	}
	runs := runsFromEnv(t, 3)
	var rows [][]ProfileResult
	for _, p := range stepsProfiles() {
		for _, n := range []int{8, 64} {
			var row []ProfileResult
			for i := range runs {
				t.Run(fmt.Sprintf("%s/%d agents/run %d", p.Name, n, i+1), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						r, err := RunProfile(p, "bodo-go", SDKClient(bodo.WithLogger(slog.New(slog.DiscardHandler))), n, time.Hour, seed+uint64(i))
						if err != nil {
							t.Fatal(err)
						}
						row = append(row, r)
						if broken := guarantees(r); broken != "" {
							t.Error(broken)
						}
					})
				})
			}
			rows = append(rows, row)
		}
	}
	table := ProfileSpreadTable(rows)
	t.Log("\n" + table)
	if path := os.Getenv("BODO_STEPS_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}
