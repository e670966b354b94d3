package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/bodotest"
)

// TestRun runs 16 agents for 3 virtual minutes against a bodotest server
// with the documented limits: the key's allowance is used, nothing is
// refused, and the summary says so.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer()
		defer srv.Close()
		var out, logs bytes.Buffer
		cfg := config{agents: 16, duration: 3 * time.Minute, seed: 1, log: "warn"}
		s, err := run(context.Background(), cfg, target{url: srv.URL, key: bodotest.APIKey, transport: srv.Client().Transport, name: "bodotest"}, &out, &logs)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s%s", out.String(), logs.String())
		if s.Allowance != 600+3*300 {
			t.Errorf("allowance %d, want 1500: capacity 600 + 300 a minute", s.Allowance)
		}
		if s.Goodput() < 0.95 {
			t.Errorf("goodput %.1f %%, want at least 95 %%", 100*s.Goodput())
		}
		if s.Calls == 0 || s.OK != s.Calls || s.Status429 != 0 || s.Lockouts != 0 || s.GaveUp != 0 {
			t.Errorf("calls %d, ok %d, 429s %d, lockouts %d, gave up %d: want every call ok and none refused", s.Calls, s.OK, s.Status429, s.Lockouts, s.GaveUp)
		}
		if s.MaxInFlight > 6 {
			t.Errorf("%d requests in flight at once; the parallel level is 6", s.MaxInFlight)
		}
		if s.RateLimit == nil {
			t.Errorf("RateLimit at the end: %v", s.RateLimitErr)
		}
		if logs.Len() != 0 {
			t.Errorf("the client warned:\n%s", logs.String())
		}
		for _, want := range []string{"16 agents on one key against bodotest for 3m0s (budget on)", "goodput", "rate limit      key: "} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the output lacks %q:\n%s", want, out.String())
			}
		}
	})
}

// TestRunWithoutBudget runs the agents with the budget off: the server
// refuses calls, the summary counts the 429s by code, and the lockout guard
// (which stays on) keeps the key from being locked.
func TestRunWithoutBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer()
		defer srv.Close()
		var out bytes.Buffer
		cfg := config{agents: 16, duration: time.Minute, seed: 1, log: "off", noBudget: true}
		s, err := run(context.Background(), cfg, target{url: srv.URL, key: bodotest.APIKey, transport: srv.Client().Transport, name: "bodotest"}, &out, &out)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(out.String())
		if s.Status429 == 0 || s.Refusals["RATE_LIMITED"] == 0 {
			t.Errorf("429s %d, refusals %v: want RATE_LIMITED answers without the budget", s.Status429, s.Refusals)
		}
		if s.Lockouts != 0 {
			t.Errorf("%d refusals for a lockout", s.Lockouts)
		}
		if !strings.Contains(out.String(), "(budget off)") || !strings.Contains(out.String(), "RATE_LIMITED") {
			t.Errorf("the output does not say so:\n%s", out.String())
		}
	})
}

// TestParseFlags checks that bad flags are clear errors.
func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-agents", "4", "-duration", "10s", "-seed", "7", "-log", "off", "-no-budget"})
	if err != nil || cfg != (config{agents: 4, duration: 10 * time.Second, seed: 7, log: "off", noBudget: true}) {
		t.Errorf("parseFlags: %+v, %v", cfg, err)
	}
	for args, want := range map[string]string{
		"-agents 0":      "-agents must be at least 1",
		"-duration -1s":  "-duration must be positive",
		"-log debug":     `-log must be info, warn or off, not "debug"`,
		"more":           "agents takes no arguments",
		"-duration soon": "invalid value",
	} {
		_, err := parseFlags(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseFlags(%s): %v, want an error with %q", args, err, want)
		}
	}
}
