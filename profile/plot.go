package profile

import (
	"fmt"
	"image/color"
	"sort"

	"github.com/pinfer/pinfer/predictors"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// PlotWidth and PlotHeight are the PNG's size in points; vg renders PNG at
// 96 dpi, so the image is 576x384 pixels.
var PlotWidth, PlotHeight = 6 * vg.Inch, 4 * vg.Inch

// PowerLaw returns a layer's curve: with neurons sorted by how often they
// fire, the share of all activations given by the first x share of neurons.
func PowerLaw(ls predictors.LayerStats) plotter.XYs {
	f := append([]float32(nil), ls.Frequency...)
	sort.Slice(f, func(a, b int) bool { return f[a] > f[b] })
	var total float64
	for _, v := range f {
		total += float64(v)
	}
	pts := make(plotter.XYs, len(f)+1)
	var cum float64
	for i, v := range f {
		cum += float64(v)
		pts[i+1].X = float64(i+1) / float64(len(f))
		if total > 0 {
			pts[i+1].Y = cum / total
		}
	}
	return pts
}

// Plot writes the power law of every layer to a PNG.
func Plot(s *predictors.Stats, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("FFN activations over %d tokens", s.Tokens)
	p.X.Label.Text = "share of neurons (most active first)"
	p.Y.Label.Text = "cumulative share of activations"
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	p.Add(plotter.NewGrid())
	for k, ls := range s.Layers {
		line, err := plotter.NewLine(PowerLaw(ls))
		if err != nil {
			return fmt.Errorf("%s: layer %d: %v", path, ls.Layer, err)
		}
		line.Color = plotutil.Color(k)
		line.Dashes = plotutil.Dashes(k / len(plotutil.DefaultColors))
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("layer %d", ls.Layer), line)
	}
	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
	if err != nil {
		return err
	}
	diag.Color = color.Gray{Y: 160}
	diag.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(diag)
	p.Legend.Add("uniform", diag)
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(20)
	return p.Save(PlotWidth, PlotHeight, path)
}
