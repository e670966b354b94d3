package agents

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

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
