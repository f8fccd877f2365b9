// Package train fits PowerInfer-style FFN activation predictors,
// relu(x·fc1)·fc2 per layer, on hidden states it collects by running the
// model, evaluates predictors against the real gate, and writes the trained
// predictors into a PWRI model file.
package train

import (
	"fmt"
	"math"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
	"github.com/pinfer/pinfer/profile"
)

// Data is what one layer's predictor learns from: per token, the predictor's
// input and which neurons fired.
type Data struct {
	Layer *predictors.Layer
	// Experts is how many FFNs the layer's mixture of experts has (Layer is
	// expert Layer.Expert of them); 0 for a plain FFN.
	Experts int
	N       int
	X       []float32 // N rows of NEmbd: the residual before the FFN norm
	Y       []uint64  // N rows of Words(): bit i is set when neuron i fired
	Normed  []float32 // N rows of NEmbd: the FFN's own input, for the linear start
	// Mass holds, for each fired neuron of each sample in Y's order, how
	// much it adds to the FFN's output: |activation|·|down row|. Missing a
	// neuron costs in proportion to it, not to the count.
	Mass []float32
	Off  []int // sample n's masses are Mass[Off[n]:Off[n+1]]
}

// Words is the number of uint64 per label row.
func (d *Data) Words() int { return (d.Layer.NFF + 63) / 64 }

// Fired reports whether neuron i fired at sample n.
func (d *Data) Fired(n, i int) bool {
	return d.Y[n*d.Words()+i/64]>>(i%64)&1 != 0
}

// Row is sample n's input.
func (d *Data) Row(n int) []float32 { return d.X[n*d.Layer.NEmbd : (n+1)*d.Layer.NEmbd] }

// Collect runs tokens through the model in windows of nctx and records each
// sparse layer's inputs and labels. It runs with the oracle predictor: its
// chosen set is by definition the neurons whose real gate·x passes the
// activation (predictors.Fires), which is the label, and the FFN it then
// computes is the dense one, while reading only the firing rows.
func Collect(m *engine.Model, tokens []int, nctx int, pool *ops.Pool, progress func(done, total int)) ([]*Data, error) {
	if len(m.Prog.Layers) == 0 {
		return nil, fmt.Errorf("%s: the model has no sparse FFN layers", m.Path)
	}
	// Keyed by the layer itself: the experts of a block share its index.
	byLayer := map[*predictors.Layer]*Data{}
	var out []*Data
	norms := downNorms(m)
	experts := mixtures(m)
	for _, l := range m.Prog.Layers {
		d := &Data{Layer: l, Experts: experts[l], Off: []int{0}}
		byLayer[l] = d
		out = append(out, d)
	}
	observe := func(l *predictors.Layer, in predictors.Input, active []int32) {
		d := byLayer[l]
		d.X = append(d.X, in.Resid...)
		w := len(d.Y)
		d.Y = append(d.Y, make([]uint64, d.Words())...)
		dn := norms[l]
		for _, i := range active {
			d.Y[w+int(i)/64] |= 1 << (i % 64)
			g, u := l.Gate.DotRow(int(i), in.Normed), float32(1)
			if l.GateBias != nil {
				g += l.GateBias[i]
			}
			if l.Up != nil {
				u = l.Up.DotRow(int(i), in.Normed)
			}
			a := float64(ops.FFNActivation(l.Act, l.Threshold, g, u))
			if dn != nil {
				a *= dn[i]
			}
			d.Mass = append(d.Mass, float32(math.Abs(a)))
		}
		d.Off = append(d.Off, len(d.Mass))
		d.Normed = append(d.Normed, in.Normed...)
		d.N++
	}
	if _, err := profile.Walk(m, tokens, nctx, pool, &predictors.Oracle{}, observe, progress); err != nil {
		return nil, err
	}
	return out, nil
}

// mixtures maps each expert of a mixture of experts to how many experts
// its block has; plain FFNs are not in it.
func mixtures(m *engine.Model) map[*predictors.Layer]int {
	out := map[*predictors.Layer]int{}
	for _, n := range m.Prog.Nodes {
		if len(n.Layers) > 1 || n.Op.Name == "moe" {
			for _, l := range n.Layers {
				out[l] = len(n.Layers)
			}
		}
	}
	return out
}

// name is how messages and reports call d's layer.
func (d *Data) name() string { return layerName(d.Layer, d.Experts) }

func layerName(l *predictors.Layer, experts int) string {
	if experts > 0 {
		return fmt.Sprintf("layer %d expert %d", l.Index, l.Expert)
	}
	return fmt.Sprintf("layer %d", l.Index)
}

// Split returns the first part of d's samples and the rest, as views.
func (d *Data) Split(frac float64) (*Data, *Data) {
	k := int(float64(d.N) * frac)
	e, w := d.Layer.NEmbd, d.Words()
	a := &Data{Layer: d.Layer, Experts: d.Experts, N: k, X: d.X[:k*e], Normed: d.Normed[:k*e], Y: d.Y[:k*w], Mass: d.Mass, Off: d.Off[:k+1]}
	b := &Data{Layer: d.Layer, Experts: d.Experts, N: d.N - k, X: d.X[k*e:], Normed: d.Normed[k*e:], Y: d.Y[k*w:], Mass: d.Mass, Off: d.Off[k:]}
	return a, b
}

// Masses are sample n's fired neurons' masses, in ascending neuron order.
func (d *Data) Masses(n int) []float32 { return d.Mass[d.Off[n]:d.Off[n+1]] }

// downNorms maps each plain sparse FFN layer to how far a unit of each
// neuron's activation moves the logits directly: |H·(g ⊙ down row)|, with H
// the output head and g the final norm's gain (the residual stream carries
// a neuron's output to the head; later layers mostly add to it). A model
// whose head it cannot find gets |down row|; a layer it cannot see into
// (experts) is left out, its masses are then |activation| alone.
func downNorms(m *engine.Model) map[*predictors.Layer][]float64 {
	var gram []float64 // Hᵀ H
	var gain []float32
	for _, n := range m.Prog.Nodes {
		if n.Op.Name != "output" || len(n.W) == 0 || n.W[0] == nil || n.W[0].M == nil {
			continue
		}
		h := n.W[0].M
		e := h.Cols
		gram = make([]float64, e*e)
		row := make([]float32, e)
		for r := range h.Rows {
			h.RowF32(r, row)
			for i, a := range row {
				g := gram[i*e : (i+1)*e]
				for j, b := range row {
					g[j] += float64(a) * float64(b)
				}
			}
		}
		if len(n.In) == 1 && n.In[0] >= 0 {
			if nn := m.Prog.Nodes[n.In[0]]; (nn.Op.Name == "rms_norm" || nn.Op.Name == "layer_norm") && nn.W[0] != nil && len(nn.W[0].Vec) == e {
				gain = nn.W[0].Vec
			}
		}
	}
	out := map[*predictors.Layer][]float64{}
	for _, n := range m.Prog.Nodes {
		if n.Op.Name != "sparse_ffn" || len(n.Layers) != 1 || len(n.W) < 3 || n.W[2] == nil || n.W[2].M == nil {
			continue
		}
		d := n.W[2].M
		e := d.Cols
		row := make([]float32, e)
		norms := make([]float64, d.Rows)
		for i := range d.Rows {
			d.RowF32(i, row)
			if gain != nil {
				for j := range row {
					row[j] *= gain[j]
				}
			}
			var s float64
			if len(gram) == e*e {
				for a, x := range row {
					var t float64
					for b, y := range row {
						t += gram[a*e+b] * float64(y)
					}
					s += float64(x) * t
				}
			} else {
				for _, v := range row {
					s += float64(v) * float64(v)
				}
			}
			norms[i] = math.Sqrt(s)
		}
		out[n.Layers[0]] = norms
	}
	return out
}
