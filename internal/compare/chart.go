package compare

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Chart draws the results of one scenario as a PNG of two panels, one line
// per contender: on top the points the server accepted in each minute, with
// the key's quota per minute (dashed); below the points accepted so far,
// with the allowance so far (capacity plus quota per minute; dashed).
func Chart(path, title string, results []Result, capacity, quotaPerMinute int) error {
	minutes := 0
	for _, r := range results {
		minutes = max(minutes, len(r.PerMinute))
	}
	perMinute := plot.New()
	perMinute.Title.Text = title
	perMinute.Title.TextStyle.Font.Size = vg.Points(15)
	perMinute.Y.Label.Text = "points accepted in the minute"
	cumulative := plot.New()
	cumulative.Title.Text = "Points accepted so far, against the allowance so far"
	cumulative.Title.TextStyle.Font.Size = vg.Points(13)
	cumulative.Y.Label.Text = "points accepted since the start"
	top := float64(quotaPerMinute)
	for i, r := range results {
		per := make(plotter.XYs, len(r.PerMinute))
		sum := make(plotter.XYs, len(r.PerMinute)+1)
		total := 0
		for m, v := range r.PerMinute {
			per[m] = plotter.XY{X: float64(m) + 0.5, Y: float64(v)}
			total += v
			sum[m+1] = plotter.XY{X: float64(m + 1), Y: float64(total)}
			top = max(top, float64(v))
		}
		label := fmt.Sprintf("%s: %d points, %.1f %%", r.Contender, r.Points, 100*r.Goodput())
		for _, p := range []struct {
			plot *plot.Plot
			xys  plotter.XYs
		}{{perMinute, per}, {cumulative, sum}} {
			line, err := plotter.NewLine(p.xys)
			if err != nil {
				return err
			}
			line.Color = plotutil.Color(i)
			line.Width = vg.Points(2)
			line.Dashes = plotutil.Dashes(i)
			p.plot.Add(line)
			p.plot.Legend.Add(label, line)
		}
	}
	reference := func(xys plotter.XYs) *plotter.Line {
		l, _ := plotter.NewLine(xys)
		l.Color = color.Gray{Y: 60}
		l.Width = vg.Points(1)
		l.Dashes = []vg.Length{vg.Points(1), vg.Points(4)}
		return l
	}
	quota := reference(plotter.XYs{{X: 0, Y: float64(quotaPerMinute)}, {X: float64(minutes), Y: float64(quotaPerMinute)}})
	perMinute.Add(quota)
	perMinute.Legend.Add(fmt.Sprintf("key quota, %d points/min", quotaPerMinute), quota)
	allowance := reference(plotter.XYs{{X: 0, Y: float64(capacity)}, {X: float64(minutes), Y: float64(capacity + quotaPerMinute*minutes)}})
	cumulative.Add(allowance)
	cumulative.Legend.Add(fmt.Sprintf("allowance: %d + %d/min", capacity, quotaPerMinute), allowance)

	for _, p := range []*plot.Plot{perMinute, cumulative} {
		p.Add(plotter.NewGrid())
		p.X.Label.Text = "virtual minute of the run"
		p.X.Min, p.X.Max = 0, float64(minutes)
		p.Y.Min = 0
		p.X.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
			var ticks []plot.Tick
			for m := 0; m <= int(hi); m += 5 {
				ticks = append(ticks, plot.Tick{Value: float64(m), Label: fmt.Sprint(m)})
			}
			return ticks
		})
		p.Legend.Top = true
		p.Legend.Left = true
		p.Legend.XOffs = vg.Points(8)
		p.Legend.YOffs = -vg.Points(4)
		p.Legend.TextStyle.Font.Size = vg.Points(11)
		p.Legend.ThumbnailWidth = vg.Points(36)
		p.Legend.Padding = vg.Points(2)
	}
	perMinute.Y.Max = top * 1.6 // room for the legend
	cumulative.Legend.Top = true
	cumulative.Legend.Left = true

	const w, h = 12 * vg.Inch, 11 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6),
		PadRight: vg.Points(12), PadY: vg.Points(18)}
	canvases := plot.Align([][]*plot.Plot{{perMinute}, {cumulative}}, tiles, dc)
	perMinute.Draw(canvases[0][0])
	cumulative.Draw(canvases[1][0])
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
