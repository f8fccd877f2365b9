package ops

import (
	"fmt"
	"slices"
	"sort"
)

// moe is a mixture-of-experts FFN as Hugging Face's Mixtral computes it: the
// router's logits go through a softmax, the n_expert_used largest
// probabilities pick the experts and (norm_topk) are rescaled to sum to one,
// and the output is the weighted sum of those experts' gated FFNs,
// down(act(gate·x) * up·x). The expert weights are llama.cpp's stacked 3-D
// tensors: gate and up {n_embd, n_ff, n_expert}, down {n_ff, n_embd,
// n_expert}; the graph binds each as one matrix of all experts' rows. The
// optional fc1 {n_embd, R, n_expert} and fc2 {R, n_ff, n_expert} are one
// PowerInfer predictor per expert, stacked the same way with one rank R for
// all (a smaller expert's rank is padded with zero units, which relu maps to
// 0); pred_threshold is their score cut.
func init() {
	Register(&Op{Name: "moe",
		Doc:    "mixture of experts: softmax router, top n_expert_used experts, each down(act(gate·x) * up·x), summed by router weight",
		Inputs: 1,
		Weights: []Slot{{Name: "router"}, {Name: "gate"}, {Name: "up"}, {Name: "down"},
			{Name: "fc1", Optional: true}, {Name: "fc2", Optional: true}},
		Attrs: []AttrSpec{{Name: "n_expert_used", Kind: Int}, {Name: "act", Kind: String, Enum: []string{"relu", "silu", "gelu"}},
			{Name: "norm_topk", Kind: Bool, Default: true}, {Name: "pred_threshold", Kind: Float, Default: 0.0}},
		Shape:  moeShape,
		Run:    moe,
		Sparse: true,
		FFNs: func(w []*Weight, a Attrs) []FFN {
			nE, ff := w[0].M.Rows, w[1].Dims[1]
			ffns := make([]FFN, nE)
			fc1, fc2 := optSlot(w, 4), optSlot(w, 5)
			for e := range ffns {
				ffns[e] = FFN{Gate: ExpertRows(w[1].M, e, ff), Up: ExpertRows(w[2].M, e, ff), Act: a.Str("act")}
				if fc1 != nil && fc2 != nil {
					ffns[e].FC1, ffns[e].FC2 = ExpertRows(fc1.M, e, fc1.Dims[1]), ExpertRows(fc2.M, e, ff)
					ffns[e].PredCut = float32(a.Float("pred_threshold"))
				}
			}
			return ffns
		},
	})
}

var moeActs = map[string]func([]float32){"relu": ReLU, "silu": SiLU, "gelu": GELU}

func moeShape(s *ShapeArgs) (int, error) {
	router, gate, up, down := s.W[0], s.W[1], s.W[2], s.W[3]
	d := s.In[0]
	if router.M == nil || router.M.Cols != d {
		return 0, fmt.Errorf("router %s has dims %v: want {%d, n_expert}", router.Name, router.Dims, d)
	}
	nE := router.M.Rows
	if len(gate.Dims) != 3 || gate.Dims[0] != d || gate.Dims[2] != nE {
		return 0, fmt.Errorf("gate %s has dims %v: want {%d, n_ff, %d}", gate.Name, gate.Dims, d, nE)
	}
	ff := gate.Dims[1]
	if !slices.Equal(up.Dims, gate.Dims) {
		return 0, fmt.Errorf("up %s has dims %v: want %v like the gate", up.Name, up.Dims, gate.Dims)
	}
	if !slices.Equal(down.Dims, []int{ff, d, nE}) {
		return 0, fmt.Errorf("down %s has dims %v: want [%d %d %d]", down.Name, down.Dims, ff, d, nE)
	}
	if k := s.A.Int("n_expert_used"); k < 1 || k > nE {
		return 0, fmt.Errorf("n_expert_used %d: want 1 to the %d experts", k, nE)
	}
	return d, moePredictorShape(optSlot(s.W, 4), optSlot(s.W, 5), d, ff, nE)
}

// moePredictorShape checks the experts' stacked predictors, if any.
func moePredictorShape(fc1, fc2 *Weight, d, ff, nE int) error {
	if fc1 == nil && fc2 == nil {
		return nil
	}
	if fc1 == nil || fc2 == nil {
		return fmt.Errorf("the experts' predictor needs both fc1 and fc2")
	}
	if len(fc1.Dims) != 3 || fc1.M == nil || fc1.Dims[0] != d || fc1.Dims[1] < 1 || fc1.Dims[2] != nE {
		return fmt.Errorf("fc1 %s has dims %v: want {%d, rank, %d}", fc1.Name, fc1.Dims, d, nE)
	}
	if r := fc1.Dims[1]; fc2.M == nil || !slices.Equal(fc2.Dims, []int{r, ff, nE}) {
		return fmt.Errorf("fc2 %s has dims %v: want [%d %d %d]", fc2.Name, fc2.Dims, r, ff, nE)
	}
	return nil
}

// optSlot is weight i, nil when the slot is empty or not given at all.
func optSlot(w []*Weight, i int) *Weight {
	if i < len(w) {
		return w[i]
	}
	return nil
}

// ExpertRows is rows [e*n, (e+1)*n) of a stacked matrix (expert e of a
// mixture), without copying: the same *Matrix at every call, so that a
// device backend that holds an expert (by pointer) finds it, and the
// predictors' layers are the matrices the op runs.
func ExpertRows(m *Matrix, e, n int) *Matrix {
	if p := m.stacks.Load(); p != nil && (*p)[0].Rows == n {
		return (*p)[e]
	}
	rb := m.rowBytes()
	s := make([]*Matrix, m.Rows/n)
	for i := range s {
		s[i] = &Matrix{Type: m.Type, Rows: n, Cols: m.Cols, Data: m.Data[i*n*rb : (i+1)*n*rb]}
	}
	m.stacks.CompareAndSwap(nil, &s)
	if p := m.stacks.Load(); (*p)[0].Rows == n {
		return (*p)[e]
	}
	return s[e] // split another way before: not expected of a stacked matrix
}

// routed is one token's share of an expert.
type routed struct {
	t int
	w float32
}

func moe(c *Ctx) error {
	x := c.In[0]
	router, gate, down := c.W[0].M, c.W[1].M, c.W[3].M
	up := c.W[2].M
	T, d, nE, ff := c.Out.Rows, x.Cols, router.Rows, c.W[1].Dims[1]
	k, norm, act := c.A.Int("n_expert_used"), c.A.Bool("norm_topk"), moeActs[c.A.Str("act")]

	probs := make([]float32, T*nE)
	MatMul(c.Pool, probs, router, x.Data, T)
	byExpert := make([][]routed, nE)
	idx := make([]int, nE)
	for t := 0; t < T; t++ {
		p := probs[t*nE : (t+1)*nE]
		Softmax(p)
		for i := range idx {
			idx[i] = i
		}
		// Stable, so that equal probabilities keep the lower expert first.
		sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] > p[idx[b]] })
		var sum float32
		for _, e := range idx[:k] {
			sum += p[e]
		}
		for _, e := range idx[:k] {
			w := p[e]
			if norm {
				w /= sum
			}
			byExpert[e] = append(byExpert[e], routed{t, w})
		}
	}

	clear(c.Out.Data)
	// Each expert runs once over all the tokens routed to it, so a prefill
	// streams its weights once, as a dense FFN would. With a predictor, an
	// expert runs its chosen neurons on the CPU, unless the device holds it
	// (the device's MatMul of its gate tells): there it runs whole.
	var h, y []float32 // moeSparse's rows, made once a call
	for e, toks := range byExpert {
		n := len(toks)
		if n == 0 {
			continue
		}
		ge, ue, de := ExpertRows(gate, e, ff), ExpertRows(up, e, ff), ExpertRows(down, e, d)
		var xs, g []float32
		onDevice := false
		if c.Predict == nil || Device != nil {
			xs, g = make([]float32, n*d), make([]float32, n*ff)
			for i, r := range toks {
				copy(xs[i*d:(i+1)*d], x.Row(r.t))
			}
			onDevice = Device != nil && Device.MatMul(g, ge, xs, n)
		}
		if c.Predict != nil && !onDevice {
			if h == nil {
				h, y = make([]float32, ff), make([]float32, d)
			}
			moeSparse(c, e, toks, ge, ue, de, h, y)
			continue
		}
		if !onDevice {
			MatMul(c.Pool, g, ge, xs, n)
		}
		u := make([]float32, n*ff)
		MatMul(c.Pool, u, ue, xs, n)
		act(g)
		for i := range g {
			g[i] *= u[i]
		}
		ys := xs // same size, no longer needed
		MatMul(c.Pool, ys, de, g, n)
		for i, r := range toks {
			Axpy(c.Out.Row(r.t), r.w, ys[i*d:(i+1)*d])
		}
	}
	return nil
}

// moeSparse runs expert e (its gate, up and down matrices) on each of its
// tokens over the neurons the predictor chose, h and y its scratch rows
// (n_ff and n_embd). Expert down matrices are stored output-major
// ({n_ff, n_embd} per expert), so the down projection dots each output row
// with the sparse activation vector.
func moeSparse(c *Ctx, e int, toks []routed, g, u, dn *Matrix, h, y []float32) {
	act := c.A.Str("act")
	for _, r := range toks {
		x := c.In[0].Row(r.t)
		clear(h)
		active := c.Predict(e, r.t)
		each := func(i int) { h[i] = FFNActivation(act, 0, g.DotRow(i, x), u.DotRow(i, x)) }
		if active == nil {
			for i := range h {
				each(i)
			}
		} else {
			for _, i := range active {
				each(int(i))
			}
		}
		MatMul(c.Pool, y, dn, h, 1)
		Axpy(c.Out.Row(r.t), r.w, y)
	}
}
