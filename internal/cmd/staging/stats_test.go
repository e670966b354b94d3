package main

import (
	"math"
	"os"
	"strings"
	"testing"
)

func TestResultOfStats(t *testing.T) {
	f, err := os.Open("testdata/stats.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := readStats(f)
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.resultOf(apiKey)
	if err != nil {
		t.Fatal(err)
	}
	// 33 real seconds at scale 6; 930 points of 600 + 300 × 198 / 60.
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-3 }
	if !near(r.Secs, 198) || !near(r.Goodput, 930.0/1590) {
		t.Errorf("secs %v goodput %v, want 198 and %v", r.Secs, r.Goodput, 930.0/1590)
	}
	// The first 120 contract seconds from the first request (t=2) hold
	// 108 seconds of 5 points: 540 of 600 + 600.
	if !near(r.GoodputStart, 540.0/1200) {
		t.Errorf("goodput of the first 2 minutes %v, want %v", r.GoodputStart, 540.0/1200)
	}
	if r.Stalls != 1 || r.Refused != 2 || r.Duplicates != 1 || r.Early != 1 {
		t.Errorf("stalls %d refused %d duplicates %d early %d, want 1, 2 (the OVERLOADED not counted), 1, 1",
			r.Stalls, r.Refused, r.Duplicates, r.Early)
	}
	m := r.misses(false)
	for _, want := range []string{"goodput 0.585", "first 2 min 0.450", "2 refused (1.08 %)", "1 early (first: write POST", "1 stalls (at [30] s)", "7 in flight", "1 duplicated"} {
		if !strings.Contains(m, want) {
			t.Errorf("misses %q lack %q", m, want)
		}
	}
}

func TestAllowanceUnderForeignLoad(t *testing.T) {
	var st stats
	st.Config.Quotas.Key, st.Config.Quotas.KeyCapacity, st.Config.Quotas.Org = 600, 1200, 3000
	if got := st.allowance(60, 0); got != 1800 {
		t.Errorf("allowance over a minute %v, want the key's 1200 + 600", got)
	}
	st.Config.ForeignLoad = 45
	if got := st.allowance(600, 45*600); got != 3000+5*600 {
		t.Errorf("allowance over 10 minutes with 45 points/s foreign %v, want the org's 3000 + 5 × 600", got)
	}
	if got := st.allowance(600, 44*600); got != 3000+6*600 {
		t.Errorf("allowance over 10 minutes with 44 points/s taken of 45 asked %v, want the org's 3000 + 6 × 600", got)
	}
}
