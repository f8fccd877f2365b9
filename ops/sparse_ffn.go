package ops

import (
	"fmt"
	"sync"
)

// The neuron-aware FFN: h = Σ_{i active} down_t[i] · act(gate[i]·x) (· up[i]·x).
// Only the active neurons' rows of gate, up and down_t are read. With every
// neuron active it is the dense FFN, which is what the reference tests hold
// it to.

// Activation names: relu; fatrelu (ProSparse: gate must exceed a threshold
// above 0); drelu (Bamboo, TurboSparse: relu on gate and on up); silu and
// gelu (dense models, which gain nothing from sparsity but run the same op).
var ffnActs = []string{"relu", "fatrelu", "drelu", "silu", "gelu"}

func init() {
	Register(&Op{Name: "sparse_ffn",
		Doc:    "FFN over the active neurons only; input 0 is the normed FFN input, input 1 the predictor's input (the residual before the norm)",
		Inputs: 2, Sparse: true,
		Weights: []Slot{{Name: "gate", Dense: true}, {Name: "up", Optional: true, Dense: true}, {Name: "down", Dense: true, Axpy: true},
			{Name: "fc1", Optional: true, Whole: true}, {Name: "fc2", Optional: true, Whole: true},
			{Name: "gate_bias", Optional: true, Vector: true}, {Name: "down_bias", Optional: true, Vector: true}},
		Attrs: []AttrSpec{{Name: "act", Kind: String, Default: "relu", Enum: ffnActs},
			{Name: "threshold", Kind: Float, Default: 0.0}, {Name: "pred_threshold", Kind: Float, Default: 0.0}},
		Shape: sparseFFNShape,
		Run:   sparseFFN,
		FFNs:  func(w []*Weight, a Attrs) []FFN { return []FFN{sparseFFNOf(w, a)} },
	})
}

// sparseFFNOf reads a sparse_ffn node's slots (gate, up, down, fc1, fc2,
// gate_bias, down_bias) and attributes as the FFN it computes.
func sparseFFNOf(w []*Weight, a Attrs) FFN {
	f := FFN{Gate: w[0].M, Act: a.Str("act"), Threshold: float32(a.Float("threshold")), PredCut: float32(a.Float("pred_threshold"))}
	if w[1] != nil {
		f.Up = w[1].M
	}
	if w[3] != nil {
		f.FC1, f.FC2 = w[3].M, w[4].M
	}
	if w[5] != nil {
		f.GateBias = w[5].Vec
	}
	return f
}

func sparseFFNShape(s *ShapeArgs) (int, error) {
	gate, up, down := s.W[0], s.W[1], s.W[2]
	if s.In[0] != s.In[1] {
		return 0, fmt.Errorf("the FFN input is %d wide but the predictor input is %d wide", s.In[0], s.In[1])
	}
	for _, w := range []*Weight{gate, up, down} {
		if w != nil && w.M == nil {
			return 0, fmt.Errorf("weight %s must be a matrix", w.Name)
		}
	}
	nff := gate.M.Rows
	if gate.M.Cols != s.In[0] {
		return 0, fmt.Errorf("gate %s has rows of %d but the input is %d wide", gate.Name, gate.M.Cols, s.In[0])
	}
	if up != nil && (up.M.Rows != nff || up.M.Cols != s.In[0]) {
		return 0, fmt.Errorf("up %s is %dx%d, want %dx%d like the gate", up.Name, up.M.Rows, up.M.Cols, nff, s.In[0])
	}
	if down.M.Rows != nff {
		return 0, fmt.Errorf("down %s has %d neuron rows, the gate %d: it must be neuron-major (ffn_down_t, or transpose(ffn_down))", down.Name, down.M.Rows, nff)
	}
	if s.A.Str("act") == "drelu" && up == nil {
		return 0, fmt.Errorf("act drelu needs an up weight")
	}
	if fc1, fc2 := s.W[3], s.W[4]; (fc1 == nil) != (fc2 == nil) {
		return 0, fmt.Errorf("the predictor needs both fc1 and fc2")
	} else if fc1 != nil {
		if fc1.M == nil || fc2.M == nil || fc1.M.Cols != s.In[1] || fc2.M.Cols != fc1.M.Rows || fc2.M.Rows != nff {
			return 0, fmt.Errorf("predictor %s / %s: want fc1 of rows %d and fc2 of %d rows of fc1's rank", fc1.Name, fc2.Name, s.In[1], nff)
		}
	}
	if err := vecFits(s.W[5], nff); err != nil {
		return 0, err
	}
	return down.M.Cols, vecFits(s.W[6], down.M.Cols)
}

// FFNActivation returns the value neuron i passes to down, given its gate
// and up pre-activations (up is 1 for a non-gated FFN).
func FFNActivation(act string, threshold, g, u float32) float32 {
	if cut, gated := gateCut(act, threshold); gated && (g <= cut || act == "drelu" && u <= 0) {
		return 0
	}
	switch act {
	case "silu":
		v := []float32{g}
		SiLU(v)
		g = v[0]
	case "gelu":
		v := []float32{g}
		GELU(v)
		g = v[0]
	}
	return g * u
}

// gateCut returns the gate value at or below which act gives zero whatever
// the up projection, and whether there is one.
func gateCut(act string, threshold float32) (float32, bool) {
	switch act {
	case "relu", "drelu":
		return 0, true
	case "fatrelu":
		return threshold, true
	}
	return 0, false
}

// sparseCall is one sparse_ffn call's FFN and active lists, pooled so that
// a decode step allocates nothing here (the FFN goes behind an interface,
// the device's, so a local one would escape).
type sparseCall struct {
	f       FFN
	actives [][]int32
}

var sparseCalls = sync.Pool{New: func() any { return new(sparseCall) }}

func sparseFFN(c *Ctx) error {
	sc := sparseCalls.Get().(*sparseCall)
	defer func() {
		clear(sc.actives)
		*sc = sparseCall{actives: sc.actives[:0]}
		sparseCalls.Put(sc)
	}()
	sc.f = sparseFFNOf(c.W, c.A)
	sc.f.Skipped = c.Skipped
	T := c.Out.Rows
	var actives [][]int32
	if c.Predict != nil {
		for t := 0; t < T; t++ {
			sc.actives = append(sc.actives, c.Predict(0, t))
		}
		actives = sc.actives
	}
	clear(c.Out.Data)
	if b := c.W[6]; b != nil {
		for t := 0; t < T; t++ {
			copy(c.Out.Row(t), b.Vec)
		}
	}
	FFNBatch(c.Pool, &sc.f, c.W[2].M, c.In[0].Data, T, actives, c.Out.Data)
	return nil
}
