package agents

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// TestProfiles runs the workload against every server profile of the
// sandbox with 8 and 64 agents, for the first 2 virtual minutes and (unless
// -short) for 60, and checks the targets of ProfileResult.Targets. With
// BODO_PROFILE_TABLE set it writes the markdown table there.
func TestProfiles(t *testing.T) {
	durations := []time.Duration{2 * time.Minute, 60 * time.Minute}
	if testing.Short() {
		durations = durations[:1]
	}
	only := os.Getenv("BODO_PROFILE")
	var results []ProfileResult
	for _, p := range sandbox.Profiles() {
		if only != "" && p.Name != only {
			continue
		}
		for _, d := range durations {
			for _, n := range []int{8, 64} {
				t.Run(fmt.Sprintf("%s/%d agents/%v", p.Name, n, d), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						r, err := RunProfile(p, "bodo-go", SDKClient(bodo.WithLogger(slog.New(slog.DiscardHandler))), n, d, seed)
						if err != nil {
							t.Fatal(err)
						}
						results = append(results, r)
						if miss := r.Targets(); len(miss) > 0 {
							t.Errorf("%s: %s (refused %v)", p.Name, strings.Join(miss, "; "), r.RefusedBy)
						}
					})
				})
			}
		}
	}
	table := ProfileTable(results)
	t.Log("\n" + table)
	if path := os.Getenv("BODO_PROFILE_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}
