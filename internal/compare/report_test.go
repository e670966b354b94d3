package compare

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReportRenders renders compare.md, a chart and overhead.md from made-up
// results into a temporary directory, so that a plain go test catches a
// report that no longer renders.
func TestReportRenders(t *testing.T) {
	var results []Result
	for _, sc := range Scenarios {
		for i, c := range Contenders {
			per := make([]int, sc.Minutes)
			total := 0
			for m := range per {
				per[m] = 300 - 40*i
				total += per[m]
			}
			results = append(results, Result{Scenario: sc, Contender: c.Name, Requests: 1000, Points: total, Allowance: 18600,
				Status429: 10 * i, Lockouts: i / 2, DupExtra: i % 2, Calls: 900, Failed: i, Errors: map[string]int{"RATE_LIMITED": i},
				P50: time.Second, P99: time.Minute, PerMinute: per})
		}
	}
	md := Report(results)
	for _, want := range []string{"## 64 agents, faults", "| bodo-go |", "## In short", "goodput.png", "## The contenders"} {
		if !strings.Contains(md, want) {
			t.Errorf("compare.md lacks %q", want)
		}
	}
	second := slices.Clone(results)
	second[0].Requests, second[0].P99 = 1010, 61*time.Second
	md = Report(results, second, results)
	for _, want := range []string{"median of 3 runs", "| bodo-go | 1000 (1000–1010) | 18000 | 18600 | 96.8 % | 0 (0.0 %) | 0 | 0 | 0 | 0 of 900 (0.0 %) | 0 | 1s | 1m0s (1m0s–1m1s) |"} {
		if !strings.Contains(md, want) {
			t.Errorf("compare.md of three runs lacks %q:\n%s", want, md)
		}
	}
	png := filepath.Join(t.TempDir(), "chart.png")
	if err := Chart(png, "test", results[:len(Contenders)], 600, 300); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() < 10000 {
		t.Fatalf("chart: %v, %v", fi, err)
	}
	rows := []Overhead{
		{Client: "gen", Goroutines: 1, Rounds: 3, Calls: 10, NsPerOp: 100, AllocsPerOp: 100},
		{Client: "bodo-go", Goroutines: 1, Rounds: 3, Calls: 10, Time: []float64{1.01, 1.03, 1.05}, CPU: []float64{1, 1, 1},
			NsPerOp: 103, AllocsPerOp: 99.6},
		{Client: "bodo-go-nobudget", Goroutines: 1, Rounds: 3, Calls: 10, Time: []float64{2, 2.2, 1.8}, CPU: []float64{1.1, 1.1, 1.1},
			NsPerOp: 200, AllocsPerOp: 120},
	}
	if got := rows[1].Summary(rows[0]); got != "time 1.03× (1.02–1.04), allocs +0" {
		t.Errorf("summary %q", got)
	}
	over := OverheadReport(rows, 2, []Sustained{{Client: "gen", PerSecond: []int{100, 100}}, {Client: "bodo-go", PerSecond: []int{100, 10}}},
		map[string][]FuncAllocs{"bodo-go": {{Func: "github.com/bodo-app/bodo-go.(*Client).do", Allocs: 5}}})
	for _, want := range []string{"| bodo-go | 1 | 3 × 10 | 1.03× (1.02–1.04) | 1.00× (1.00–1.00) | 103 | 100 |", "+0 | yes |", "| 2.00× (1.90–2.10) | 1.10× (1.10–1.10) |", "+20 | no: time and allocations |", "`bodo-go.(*Client).do` | 5 |", "| bodo-go | 100 | 10 |", "caps sustained reads"} {
		if !strings.Contains(over, want) {
			t.Errorf("overhead.md lacks %q:\n%s", want, over)
		}
	}
}
