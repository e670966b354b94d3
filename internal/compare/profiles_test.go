package compare

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/bodo-app/bodo-go/internal/agents"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// runProfile runs contender c against profile p for run, the workload
// drawn from seed, in a synctest bubble of its own.
func runProfile(t *testing.T, p sandbox.Profile, c Contender, run ProfileRun, seed uint64) agents.ProfileResult {
	t.Helper()
	var res agents.ProfileResult
	synctest.Test(t, func(t *testing.T) {
		r, err := agents.RunProfile(p, c.Name, ProfileAPI(c), run.Agents, run.Duration(), seed)
		if err != nil {
			t.Fatal(err)
		}
		res = r
	})
	return res
}

// smokeProfiles are the profiles of TestProfilesSmoke.
var smokeProfiles = []string{"small-plan", "overloaded"}

// TestProfilesSmoke runs every contender against two server profiles with 8
// agents for two virtual minutes and checks what must hold for each: the
// run completes and sends requests; and bodo-go locks no key out.
// TestCompareProfiles -update runs them all.
func TestProfilesSmoke(t *testing.T) {
	run := ProfileRun{Agents: 8, Minutes: 2}
	for _, name := range smokeProfiles {
		p, ok := sandbox.ProfileByName(name)
		if !ok {
			t.Fatalf("no profile %q", name)
		}
		for _, c := range Contenders {
			t.Run(name+"/"+c.Name, func(t *testing.T) {
				r := runProfile(t, p, c, run, seed)
				t.Logf("%d requests, goodput %.1f %%, %d × 429 (%v), %d lockouts, %d early, %d stalls, %d gave up",
					r.Requests, 100*r.Goodput(), r.Refused, r.RefusedBy, r.Lockouts, r.Early, r.Stalls, r.GaveUp)
				if r.Requests == 0 {
					t.Error("no request reached the server")
				}
				if c.Name == "bodo-go" && r.Lockouts != 0 {
					t.Errorf("bodo-go: %d lockouts", r.Lockouts)
				}
			})
		}
	}
}

// TestCompareProfiles runs every contender against every server profile for
// each of ProfileRuns and writes results/profiles.md. It runs only with
// -update; BODO_RUNS=n runs everything n times, with seeds seed, seed+1, …,
// and the tables show each cell's median and spread; BODO_SKIP_PROFILES
// (names, comma-separated) leaves profiles out.
func TestCompareProfiles(t *testing.T) {
	if !*update {
		t.Skip("the profile comparison runs with -update (see run.sh)")
	}
	n := runsFromEnv(t)
	profiles := sandbox.Profiles()
	if v := os.Getenv("BODO_SKIP_PROFILES"); v != "" {
		skip := strings.Split(v, ",")
		profiles = slices.DeleteFunc(profiles, func(p sandbox.Profile) bool { return slices.Contains(skip, p.Name) })
	}
	type slot struct {
		i   int // which of the n runs
		run ProfileRun
		p   sandbox.Profile
		c   Contender
	}
	var slots []slot
	for i := range n {
		for _, run := range ProfileRuns {
			for _, p := range profiles {
				for _, c := range Contenders {
					slots = append(slots, slot{i, run, p, c})
				}
			}
		}
	}
	results := make([]agents.ProfileResult, len(slots))
	done := make([]bool, len(slots))
	t.Run("runs", func(t *testing.T) {
		for i, s := range slots {
			name := fmt.Sprintf("%d agents, %d min/%s/%s", s.run.Agents, s.run.Minutes, s.p.Name, s.c.Name)
			if n > 1 {
				name = fmt.Sprintf("run %d/%s", s.i+1, name)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				results[i] = runProfile(t, s.p, s.c, s.run, seed+uint64(s.i))
				done[i] = !t.Failed()
				r := results[i]
				t.Logf("%d requests, goodput %.1f %%, %d × 429 (%v), %d lockouts, %d early, %d stalls, %d gave up",
					r.Requests, 100*r.Goodput(), r.Refused, r.RefusedBy, r.Lockouts, r.Early, r.Stalls, r.GaveUp)
			})
		}
	})
	if i := slices.Index(done, false); i >= 0 {
		t.Fatalf("%s against %s did not run or did not complete; results/profiles.md left as it was", slots[i].c.Name, slots[i].p.Name)
	}
	runs := make([][]agents.ProfileResult, n)
	for i, s := range slots {
		runs[s.i] = append(runs[s.i], results[i])
	}
	md := ProfilesReport(runs...)
	t.Log("\n" + md)
	if err := os.MkdirAll("results", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("results", "profiles.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestProfilesReportRenders renders profiles.md from made-up results, so
// that a plain go test catches a report that no longer renders.
func TestProfilesReportRenders(t *testing.T) {
	var results []agents.ProfileResult
	for _, run := range ProfileRuns {
		for _, p := range sandbox.Profiles() {
			for i, c := range Contenders {
				results = append(results, agents.ProfileResult{Profile: p.Name, Client: c.Name, Agents: run.Agents,
					Duration: run.Duration(), Requests: 1000, Points: 900, Allowance: 1000, Refused: 10 * i,
					RefusedBy: map[string]int{"RATE_LIMITED key": 10 * i}, Lockouts: i / 3, GaveUp: i})
			}
		}
	}
	md := ProfilesReport(results)
	for _, want := range []string{"## 64 agents, 60 virtual minutes", "## 8 agents, 2 virtual minutes", "| documented | bodo-go | 1000 | 90.0 % | 0 (0.00 %) |",
		"| foreign-90 | careful engineer |", "- small-plan, naive: RATE_LIMITED key ", "**overloaded**"} {
		if !strings.Contains(md, want) {
			t.Errorf("profiles.md lacks %q:\n%s", want, md)
		}
	}
	second := slices.Clone(results)
	second[0].Points, second[0].Refused = 1000, 3
	md = ProfilesReport(results, second, results)
	for _, want := range []string{"median of 3 runs", "| documented | bodo-go | 1000 | 90.0 % (90.0 %–100.0 %) | 0 (0–3); 0.00 % (0.00 %–0.30 %) |",
		"| profile | bodo-go | bodo-go, budget off |", "| documented | 90.0 % (90.0 %–100.0 %); 0 (0–3) × 429 | 90.0 %; 10 × 429 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("profiles.md of three runs lacks %q:\n%s", want, md)
		}
	}
}
