package compare

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Scenario is one workload of the comparison.
type Scenario struct {
	Name    string
	Agents  int
	Minutes int     // virtual minutes
	Foreign float64 // points a second another key of the org takes (sandbox.WithForeignLoad)
	Faults  bool    // the Faults schedule
}

// Scenarios are the runs of the full comparison, each for every contender.
var Scenarios = []Scenario{
	{Name: "1 agent", Agents: 1, Minutes: 60},
	{Name: "8 agents", Agents: 8, Minutes: 60},
	{Name: "64 agents", Agents: 64, Minutes: 60},
	{Name: "64 agents, org 95 % foreign", Agents: 64, Minutes: 60, Foreign: 47.5},
	{Name: "64 agents, faults", Agents: 64, Minutes: 60, Faults: true},
	{Name: "1 agent, faults", Agents: 1, Minutes: 60, Faults: true},
}

// Charts are the PNGs of the report: which scenario each draws.
var Charts = []struct{ Scenario, File string }{
	{"64 agents", "goodput.png"},
	{"64 agents, faults", "goodput-faults.png"},
}

// Result is what one contender did in one scenario.
type Result struct {
	Scenario  Scenario
	Contender string

	Requests    int // requests the server saw for the key
	Points      int // points the server accepted (charged)
	Allowance   int // what the key could use over the run
	Status429   int
	Status503   int
	Lockouts    int
	MaxInFlight int // requests inside the server at once, refused ones included
	DupNames    int // contact names created more than once
	DupExtra    int // contacts created beyond the first of their name
	Calls       int
	Failed      int
	Errors      map[string]int // failed calls by kind
	P50, P99    time.Duration  // call latency, waits included
	PerMinute   []int          // points accepted in each minute, from the server
}

// Goodput is the share of the allowance the server accepted.
func (r Result) Goodput() float64 { return float64(r.Points) / float64(max(r.Allowance, 1)) }

func pct(n, of int) float64 { return 100 * float64(n) / float64(max(of, 1)) }

// GoodputTable renders the results of one scenario as a markdown table.
func GoodputTable(results []Result) string {
	var b strings.Builder
	b.WriteString("| contender | requests | points accepted | allowance | goodput | 429s | 503s | lockouts | duplicated writes | failed calls | max in flight | p50 | p99 |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f %% | %d (%.1f %%) | %d | %d | %d | %d of %d (%.1f %%) | %d | %v | %v |\n",
			r.Contender, r.Requests, r.Points, r.Allowance, 100*r.Goodput(),
			r.Status429, pct(r.Status429, r.Requests), r.Status503, r.Lockouts, r.DupExtra,
			r.Failed, r.Calls, pct(r.Failed, r.Calls), r.MaxInFlight, roundDur(r.P50), roundDur(r.P99))
	}
	return b.String()
}

// ErrorLine lists the failed calls of r by kind, most frequent first.
func ErrorLine(r Result) string {
	kinds := make([]string, 0, len(r.Errors))
	for k := range r.Errors {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		if d := r.Errors[b] - r.Errors[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.Errors[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
