package main

import (
	"fmt"
	"io"
	"strings"
)

// The targets of a run (issue 19): goodput over the run and its first two
// minutes, refusals the client caused (more allowed through a Redis
// outage), and none of the rest.
const (
	minGoodput      = 0.97
	minGoodputStart = 0.90
	maxRefused      = 0.005
	maxRefusedRedis = 0.03
)

// misses says which targets r missed, or "ok".
func (r result) misses(outage bool) string {
	var m []string
	if r.Goodput < minGoodput {
		m = append(m, fmt.Sprintf("goodput %.3f", r.Goodput))
	}
	if r.GoodputStart < minGoodputStart {
		m = append(m, fmt.Sprintf("goodput in the first 2 min %.3f", r.GoodputStart))
	}
	limit := maxRefused
	if outage {
		limit = maxRefusedRedis
	}
	if f := r.refusedShare(); f > limit {
		m = append(m, fmt.Sprintf("%d refused (%.2f %%)", r.Refused, 100*f))
	}
	if r.Lockouts > 0 {
		m = append(m, fmt.Sprintf("%d lockouts", r.Lockouts))
	}
	if r.Early > 0 {
		m = append(m, fmt.Sprintf("%d early (first: %s)", r.Early, r.FirstEarly))
	}
	if r.Stalls > 0 {
		m = append(m, fmt.Sprintf("%d stalls (at %v s)", r.Stalls, r.StallsAt))
	}
	if r.MaxInFlight > r.Parallel {
		m = append(m, fmt.Sprintf("%d in flight", r.MaxInFlight))
	}
	if r.Duplicates > 0 {
		m = append(m, fmt.Sprintf("%d duplicated effects", r.Duplicates))
	}
	if len(m) == 0 {
		return "ok"
	}
	return strings.Join(m, "; ")
}

func (r result) refusedShare() float64 { return float64(r.Refused) / float64(max(r.Requests, 1)) }

// writeTable writes one Markdown row a run, in the order of the jobs.
func writeTable(w io.Writer, c config, jobs []job) {
	fmt.Fprintf(w, "| variation | seed | agents | run | goodput | first 2 min | writes in 2 min | refused | lockouts | early | stalls | max in flight | errors | duplicates | targets |\n")
	fmt.Fprintf(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, j := range jobs {
		if j.err != nil {
			fmt.Fprintf(w, "| %s | %d | | | | | | | | | | | | | run failed: %s |\n", j.v.name, j.seed, strings.ReplaceAll(firstLine(j.err.Error()), "|", "/"))
			continue
		}
		r := j.res
		agents := fmt.Sprint(r.Agents)
		if r.Processes > 1 {
			agents = fmt.Sprintf("%d×%d", r.Processes, r.Agents)
		}
		writes := "–"
		if r.WritesStart >= 0 {
			writes = fmt.Sprintf("%d of %.0f", r.WritesStart, r.WritesAllowed)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f min | %.3f | %.3f | %s | %d of %d (%.2f %%) | %d | %d | %d | %d of %d | %d | %d | %s |\n",
			j.v.name, j.seed, agents, r.Secs/60, r.Goodput, r.GoodputStart, writes, r.Refused, r.Requests, 100*r.refusedShare(),
			r.Lockouts, r.Early, r.Stalls, r.MaxInFlight, r.Parallel, r.Errors, r.Duplicates,
			strings.ReplaceAll(r.misses(j.v.outage), "|", "/"))
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
