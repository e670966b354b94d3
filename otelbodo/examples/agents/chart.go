package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/bodo-app/bodo-go"
)

// recorder is a middleware of the example's own: it adds up the points of
// the attempts the server accepted and counts its refusals.
type recorder struct {
	mu       sync.Mutex
	points   int
	refusals int
}

func (r *recorder) attempt(req *http.Request, next bodo.MiddlewareNext) (*http.Response, error) {
	resp, err := next(req)
	if err != nil {
		return resp, err
	}
	a, _ := bodo.AttemptFrom(req.Context())
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case resp.StatusCode < 300 || resp.StatusCode == http.StatusNotModified:
		r.points += a.Cost
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		r.refusals++
	}
	return resp, err
}

// sample is the state of the run at one second.
type sample struct {
	at       time.Duration
	points   int     // accepted so far
	refusals int     // so far
	waiting  int     // calls waiting for the budget now
	limit    float64 // the key level's points per minute, 0 while unknown
}

// sample reads the recorder and the budget every second until ctx ends, and
// then sends the samples.
func (r *recorder) sample(ctx context.Context, c *bodo.Client) <-chan []sample {
	out := make(chan []sample, 1)
	go func() {
		start := time.Now()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		samples := []sample{{}}
		for {
			select {
			case <-ctx.Done():
				out <- samples
				return
			case <-tick.C:
			}
			b := c.Budget()
			s := sample{at: time.Since(start), waiting: b.Waiting}
			for _, l := range b.Levels {
				if l.Name == "key" && l.Window > 0 {
					s.limit = float64(l.Quota) * float64(time.Minute) / float64(l.Window)
				}
			}
			r.mu.Lock()
			s.points, s.refusals = r.points, r.refusals
			r.mu.Unlock()
			samples = append(samples, s)
		}
	}()
	return out
}

// The chart's geometry: three panels, one above the other.
const (
	chartWidth  = 760
	panelHeight = 150
	marginLeft  = 64
	marginRight = 16
	panelGap    = 44
)

// panel is one of the chart's plots: its title, the height of its scale,
// and what it draws in the box it is given.
type panel struct {
	title string
	top   float64 // the value at the top of the scale
	draw  func(x func(time.Duration) float64, y func(float64) float64) string
}

// writeChart draws the samples as an SVG: the points accepted in the minute
// before each second against the key's limit per minute (in the first
// minutes the key's capacity lets more through), the calls
// waiting for the budget, and the refusals in each 10 s.
func writeChart(w io.Writer, s []sample) error {
	if len(s) < 2 {
		return fmt.Errorf("the run is too short for a chart: %d samples", len(s))
	}
	perMin := make([]float64, len(s))
	var most, limit float64
	waiting := 1
	for i := range s {
		perMin[i] = float64(s[i].points - s[max(0, i-60)].points)
		most = max(most, perMin[i])
		limit = max(limit, s[i].limit)
		waiting = max(waiting, s[i].waiting)
	}
	var refusals []int // per 10 s
	for i := 10; i < len(s); i += 10 {
		refusals = append(refusals, s[i].refusals-s[i-10].refusals)
	}
	mostRefusals := 1
	for _, n := range refusals {
		mostRefusals = max(mostRefusals, n)
	}
	end := s[len(s)-1].at
	panels := []panel{
		{"points accepted in the minute before (blue) against the key's limit per minute (red)", niceTop(max(most, limit)), func(x func(time.Duration) float64, y func(float64) float64) string {
			var b strings.Builder
			if limit > 0 {
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c62828" stroke-dasharray="6 4"/>`, x(0), y(limit), x(end), y(limit))
			}
			pts := make([]string, len(s))
			for i := range s {
				pts[i] = fmt.Sprintf("%.1f,%.1f", x(s[i].at), y(perMin[i]))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="#1565c0" stroke-width="1.5" points="%s"/>`, strings.Join(pts, " "))
			return b.String()
		}},
		{"calls waiting for the budget", niceTop(float64(waiting)), func(x func(time.Duration) float64, y func(float64) float64) string {
			pts := make([]string, len(s))
			for i := range s {
				pts[i] = fmt.Sprintf("%.1f,%.1f", x(s[i].at), y(float64(s[i].waiting)))
			}
			return fmt.Sprintf(`<polyline fill="none" stroke="#6a1b9a" stroke-width="1.2" points="%s"/>`, strings.Join(pts, " "))
		}},
		{"refusals (429 and 503) per 10 s", niceTop(float64(mostRefusals)), func(x func(time.Duration) float64, y func(float64) float64) string {
			var b strings.Builder
			for i, n := range refusals {
				x0, x1 := x(time.Duration(i)*10*time.Second), x(time.Duration(i+1)*10*time.Second)
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#ef6c00"/>`, x0+1, y(float64(n)), x1-x0-2, y(0)-y(float64(n)))
			}
			return b.String()
		}},
	}
	height := len(panels)*(panelHeight+panelGap) + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for k, p := range panels {
		top := float64(k*(panelHeight+panelGap) + 28)
		x := func(d time.Duration) float64 {
			return marginLeft + float64(d)/float64(end)*(chartWidth-marginLeft-marginRight)
		}
		y := func(v float64) float64 { return top + panelHeight - v/p.top*panelHeight }
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold">%s</text>`+"\n", marginLeft, top-8, p.title)
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", marginLeft, top, chartWidth-marginLeft-marginRight, panelHeight)
		for _, v := range []float64{0, p.top / 2, p.top} {
			if v != float64(int(v)) {
				continue
			}
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", marginLeft-6, y(v)+4, v)
		}
		for m := time.Duration(0); m <= end; m += time.Minute {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%d min</text>`+"\n", x(m), top+panelHeight+14, int(m.Minutes()))
		}
		b.WriteString(p.draw(x, y) + "\n")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceTop is the top of a scale above v: 1, 2 or 5 times a power of ten.
func niceTop(v float64) float64 {
	top := 1.0
	for top < v {
		for _, f := range []float64{2, 2.5, 2} {
			if top >= v {
				break
			}
			top *= f
		}
	}
	return top
}
