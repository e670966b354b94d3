package agents

import (
	"testing"
	"time"
)

func TestSpread(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Spread([]int{4711, 4704, 4708}, Int), "4708 (4704–4711)"},
		{Spread([]int{6, 6, 6, 6, 6}, Int), "6"},
		{Spread([]int{3, 1, 2, 4}, Int), "2 (1–4)"},
		{Spread([]int(nil), Int), "–"},
		{Spread([]float64{0.9996, 0.9999, 1}, Percent(1)), "100.0 %"},
		{Spread([]float64{0.999, 0.9999, 1}, Percent(1)), "100.0 % (99.9 %–100.0 %)"},
		{Spread([]time.Duration{6113 * time.Millisecond, 6105 * time.Millisecond, 6221 * time.Millisecond}, Millis), "6.113s (6.105s–6.221s)"},
		{CountAndShare([]int{0, 0, 0}, []float64{0, 0, 0}, 2), "0 (0.00 %)"},
		{CountAndShare([]int{0, 1, 1}, []float64{0, 0.0003, 0.0003}, 2), "1 (0–1); 0.03 % (0.00 %–0.03 %)"},
		{CountAndShare([]int{1500, 1500}, []float64{0.2410, 0.2422}, 2), "1500; 24.10 % (24.10 %–24.22 %)"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestProfileSpreadTable(t *testing.T) {
	r := ProfileResult{Profile: "documented", Agents: 8, Duration: 2 * time.Minute, Requests: 100, Points: 999, Allowance: 1000, MaxFlight: 6}
	r2 := r
	r2.Points, r2.Refused = 1000, 1
	got := ProfileSpreadTable([][]ProfileResult{{r, r2, r}})
	want := "| documented | 8 | 2m0s | 99.9 % (99.9 %–100.0 %) | 0 (0–1); 0.00 % (0.00 %–1.00 %) | 0 | 0 | 0 | 6 | 0 |\n"
	if len(got) < len(want) || got[len(got)-len(want):] != want {
		t.Errorf("table ends\n%s\nwant\n%s", got, want)
	}
}
