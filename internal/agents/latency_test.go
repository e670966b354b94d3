package agents

import (
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/sandbox"
)

// BODO_LATENCY sets RunProfile's latency for an experiment, in every test
// of the package: "250ms" a fixed round trip (sandbox.WithLatency), or
// "250ms±150ms" (also "250ms+-150ms") a round trip drawn for each request
// within 100-400 ms, split between the ways there and back, seeded by the
// run's seed (sandbox.WithJitteredLatency). Unset, it stays 30 ms.
func init() {
	v := os.Getenv("BODO_LATENCY")
	if v == "" {
		return
	}
	o, err := parseLatency(v)
	if err != nil {
		panic(err)
	}
	profileLatency = o
}

var latencyPattern = regexp.MustCompile(`^([0-9.]+[a-zµ]+)(?:(?:±|\+-)([0-9.]+[a-zµ]+))?$`)

// parseLatency reads BODO_LATENCY's value.
func parseLatency(v string) (sandbox.Option, error) {
	m := latencyPattern.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return nil, fmt.Errorf("BODO_LATENCY=%q: want a duration, or a duration±jitter such as 250ms±150ms", v)
	}
	base, err := time.ParseDuration(m[1])
	if err != nil {
		return nil, fmt.Errorf("BODO_LATENCY=%q: %v", v, err)
	}
	if m[2] == "" {
		return sandbox.WithLatency(base), nil
	}
	jitter, err := time.ParseDuration(m[2])
	if err != nil || jitter > base {
		return nil, fmt.Errorf("BODO_LATENCY=%q: want a jitter no longer than the base (%v)", v, err)
	}
	return sandbox.WithJitteredLatency(base, jitter), nil
}

func TestParseLatency(t *testing.T) {
	for _, v := range []string{"30ms", "250ms±150ms", "400ms+-300ms", "1s±1s"} {
		if _, err := parseLatency(v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for _, v := range []string{"", "fast", "100ms±200ms", "100ms±"} {
		if _, err := parseLatency(v); err == nil {
			t.Errorf("%q parsed", v)
		}
	}
}

// TestLatencyProfiles runs the workload of BODO_AGENTS agents (32) against
// the profiles of BODO_PROFILES (comma-separated; documented, sliding-log,
// fixed-window, narrowest-all, overloaded, foreign-90 and gateway) for
// BODO_DURATION (2m), BODO_RUNS times (2) with seeds seed, seed+1, …, at
// BODO_LATENCY, and logs one line per run: goodput, 429s, early requests,
// stalls, the most in flight, and what missed a target. It runs only with
// BODO_LATENCY_RUN=1. Every run must keep the guarantees (no lockout, no
// early request, at most the parallel quota in flight).
func TestLatencyProfiles(t *testing.T) {
	if os.Getenv("BODO_LATENCY_RUN") == "" {
		t.Skip("set BODO_LATENCY_RUN=1 (and BODO_LATENCY) to run the profiles at a latency")
	}
	names := []string{"documented", "sliding-log", "fixed-window", "narrowest-all", "overloaded", "foreign-90", "gateway"}
	if v := os.Getenv("BODO_PROFILES"); v != "" {
		names = strings.Split(v, ",")
	}
	agents := 32
	if v := os.Getenv("BODO_AGENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BODO_AGENTS=%q", v)
		}
		agents = n
	}
	d := 2 * time.Minute
	if v := os.Getenv("BODO_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("BODO_DURATION=%q: %v", v, err)
		}
	}
	runs := runsFromEnv(t, 2)
	latency := os.Getenv("BODO_LATENCY")
	if latency == "" {
		latency = "30ms"
	}
	for _, name := range names {
		p, ok := sandbox.ProfileByName(name)
		if !ok {
			t.Fatalf("no profile %q", name)
		}
		for i := range runs {
			s := seed + uint64(i)
			t.Run(fmt.Sprintf("%s/%s/seed %d", name, latency, s), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r, err := RunProfile(p, "bodo-go", SDKClient(bodo.WithLogger(slog.New(slog.DiscardHandler))), agents, d, s)
					if err != nil {
						t.Fatal(err)
					}
					miss := strings.Join(r.Targets(), "; ")
					t.Logf("RESULT | %s | %s | %d | %v | %.1f %% | %.2f %% (%d of %d) | %d | %d | %d | %s | 429s %v | stalls at %v | early %q",
						name, latency, s, d, 100*r.Goodput(), 100*r.Rate429(), r.Refused, r.Requests, r.Early, r.Stalls, r.MaxFlight, miss, r.RefusedBy, r.StallsAt, r.FirstEarly)
					if broken := guarantees(r); broken != "" {
						t.Error(broken)
					}
				})
			})
		}
	}
}
