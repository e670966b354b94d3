package compare

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bodo-app/bodo-go/internal/agents"
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

func pct(n, of int) float64 { return 100 * share(n, of) }

func share(n, of int) float64 { return float64(n) / float64(max(of, 1)) }

// GoodputTable renders the results of one scenario as a markdown table, a
// row for each contender. Each row holds that contender's runs: with more
// than one, a cell shows their median and, where they differ, the lowest
// and the highest (agents.Spread).
func GoodputTable(rows [][]Result) string {
	var b strings.Builder
	b.WriteString("| contender | requests | points accepted | allowance | goodput | 429s | 503s | lockouts | duplicated writes | failed calls | max in flight | p50 | p99 |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	ints := func(rs []Result, f func(Result) int) string { return agents.Spread(agents.Field(rs, f), agents.Int) }
	durs := func(rs []Result, f func(Result) time.Duration) string {
		return agents.Spread(agents.Field(rs, f), func(d time.Duration) string { return roundDur(d).String() })
	}
	for _, rs := range rows {
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s of %s | %s | %s | %s |\n",
			rs[0].Contender,
			ints(rs, func(r Result) int { return r.Requests }),
			ints(rs, func(r Result) int { return r.Points }),
			ints(rs, func(r Result) int { return r.Allowance }),
			agents.Spread(agents.Field(rs, Result.Goodput), agents.Percent(1)),
			agents.CountAndShare(agents.Field(rs, func(r Result) int { return r.Status429 }),
				agents.Field(rs, func(r Result) float64 { return share(r.Status429, r.Requests) }), 1),
			ints(rs, func(r Result) int { return r.Status503 }),
			ints(rs, func(r Result) int { return r.Lockouts }),
			ints(rs, func(r Result) int { return r.DupExtra }),
			ints(rs, func(r Result) int { return r.Failed }),
			agents.CountAndShare(agents.Field(rs, func(r Result) int { return r.Calls }),
				agents.Field(rs, func(r Result) float64 { return share(r.Failed, r.Calls) }), 1),
			ints(rs, func(r Result) int { return r.MaxInFlight }),
			durs(rs, func(r Result) time.Duration { return r.P50 }),
			durs(rs, func(r Result) time.Duration { return r.P99 }))
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
