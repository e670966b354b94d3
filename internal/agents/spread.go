package agents

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Spread renders a measurement taken over several runs as the README's
// tables show it: the median, then the lowest and the highest in brackets
// where they differ once formatted ("4708 (4704–4711)"). For an even
// number of runs the median is the lower of the two middle values. No
// values render as "–".
func Spread[T cmp.Ordered](values []T, format func(T) string) string {
	if len(values) == 0 {
		return "–"
	}
	s := slices.Sorted(slices.Values(values))
	med, lo, hi := format(Median(values)), format(s[0]), format(s[len(s)-1])
	if lo == hi {
		return med
	}
	return fmt.Sprintf("%s (%s–%s)", med, lo, hi)
}

// Median is the middle of values, the lower of the two middle ones for an
// even number; the zero value for none.
func Median[T cmp.Ordered](values []T) T {
	if len(values) == 0 {
		var zero T
		return zero
	}
	return slices.Sorted(slices.Values(values))[(len(values)-1)/2]
}

// Int formats a count for Spread.
func Int(n int) string { return fmt.Sprint(n) }

// Percent returns a format for Spread that shows a share as a percentage
// with the given number of decimals ("99.9 %").
func Percent(decimals int) func(float64) string {
	return func(f float64) string { return fmt.Sprintf("%.*f %%", decimals, 100*f) }
}

// Millis formats a duration for Spread, rounded to the millisecond.
func Millis(d time.Duration) string { return d.Round(time.Millisecond).String() }

// CountAndShare renders a count and its share (with the given number of
// decimals) over several runs: "0 (0.00 %)" when neither moved,
// "1 (0–1); 0.03 % (0.00 %–0.03 %)" when one did.
func CountAndShare(counts []int, shares []float64, decimals int) string {
	c, s := Spread(counts, Int), Spread(shares, Percent(decimals))
	if strings.Contains(c, "(") || strings.Contains(s, "(") {
		return c + "; " + s
	}
	return fmt.Sprintf("%s (%s)", c, s)
}

// Field collects one value from every result.
func Field[R any, T any](rs []R, f func(R) T) []T {
	out := make([]T, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// ProfileSpreadTable renders the runs of each row (one profile, number of
// agents and duration, run several times) as a markdown table of medians
// with their spread, in the columns of ProfileTable without the client.
func ProfileSpreadTable(rows [][]ProfileResult) string {
	var b strings.Builder
	b.WriteString("| profile | agents | run | goodput | 429s | lockouts | early | stalls | max in flight | gave up |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, rs := range rows {
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %v | %s | %s | %s | %s | %s | %s | %s |\n",
			rs[0].Profile, rs[0].Agents, rs[0].Duration,
			Spread(Field(rs, ProfileResult.Goodput), Percent(1)),
			CountAndShare(Field(rs, func(r ProfileResult) int { return r.Refused }), Field(rs, ProfileResult.Rate429), 2),
			Spread(Field(rs, func(r ProfileResult) int { return r.Lockouts }), Int),
			Spread(Field(rs, func(r ProfileResult) int { return r.Early }), Int),
			Spread(Field(rs, func(r ProfileResult) int { return r.Stalls }), Int),
			Spread(Field(rs, func(r ProfileResult) int { return r.MaxFlight }), Int),
			Spread(Field(rs, func(r ProfileResult) int { return r.GaveUp }), Int))
	}
	return b.String()
}
