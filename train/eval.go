package train

import (
	"fmt"
	"io"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
)

// Eval is a predictor measured on a text against the real gate.
type Eval struct {
	Predictor string
	Tokens    int      // positions scored for recall and precision
	Layers    []Report // Rank and Cut are not filled in
	Recall    float64  // mean over layers
	DensePPL  float64
	SparsePPL float64
}

// Evaluate runs tokens through the model with predictor p, in the windows of
// nctx ScoreTokens uses, one token at a time, and compares at every sparse
// FFN the neurons p chose with those whose real gate fires, computed from the
// same hidden state. An expert the text never routed a token to is left
// out of the layers and of the mean. It then scores the same windows
// densely for the perplexity the predictor costs.
func Evaluate(m *engine.Model, p predictors.Predictor, tokens []int, nctx int, pool *ops.Pool, log io.Writer) (*Eval, error) {
	if len(m.Prog.Layers) == 0 {
		// There is nothing to score: no layer asks a predictor anything.
		return nil, fmt.Errorf("%s: the model has no sparse FFN layers", m.Path)
	}
	type counts struct{ tp, fp, fn, n, nff float64 }
	per := map[*predictors.Layer]*counts{}
	var gate []float32
	var fired []int32
	isFired := []bool{}
	observe := func(l *predictors.Layer, in predictors.Input, active []int32) {
		c := per[l]
		if c == nil {
			c = &counts{nff: float64(l.NFF)}
			per[l] = c
		}
		gate = grow(gate, l.NFF)
		// Not on the pool: the hook may run while the pool is busy.
		fired = l.Fired(nil, in.Normed, gate, fired[:0])
		nTrue := len(fired)
		isFired = append(isFired[:0], make([]bool, l.NFF)...)
		for _, i := range fired {
			isFired[i] = true
		}
		hit := 0
		if active == nil {
			hit = nTrue
			c.fp += float64(l.NFF - nTrue)
		} else {
			for _, i := range active {
				if isFired[i] {
					hit++
				}
			}
			c.fp += float64(len(active) - hit)
		}
		c.tp += float64(hit)
		c.fn += float64(nTrue - hit)
		c.n++
	}
	sess := m.NewSession(nctx, pool)
	sess.SetPredictor(p)
	sess.Runner().Observe = observe
	sparse, err := m.ScoreSession(sess, tokens, true, nil)
	if err != nil {
		return nil, err
	}
	dense, err := m.ScoreTokens(tokens, nctx, pool, log)
	if err != nil {
		return nil, err
	}
	e := &Eval{Predictor: "dense", DensePPL: dense.PPL, SparsePPL: sparse.PPL}
	if p != nil {
		e.Predictor = p.Name()
	}
	experts := mixtures(m)
	for _, l := range m.Prog.Layers {
		c := per[l]
		if c == nil {
			if experts[l] > 0 {
				continue
			}
			return nil, fmt.Errorf("layer %d never ran", l.Index)
		}
		tot := c.n * c.nff
		r := Report{Layer: l.Index, Expert: l.Expert, Experts: experts[l], Recall: c.tp / max(c.tp+c.fn, 1), Precision: c.tp / max(c.tp+c.fp, 1),
			Predicted: (c.tp + c.fp) / tot, True: (c.tp + c.fn) / tot}
		e.Layers = append(e.Layers, r)
		e.Recall += r.Recall
		// An expert sees only the tokens routed to it.
		e.Tokens = max(e.Tokens, int(c.n))
	}
	e.Recall /= float64(max(len(e.Layers), 1))
	return e, nil
}

// Print writes the table the CLI shows.
func (e *Eval) Print(w io.Writer) {
	fmt.Fprintf(w, "predictor %s over %d positions\n", e.Predictor, e.Tokens)
	fmt.Fprintf(w, "%-9s  %7s  %9s  %9s  %6s  %6s\n", "layer", "recall", "precision", "predicted", "true", "ratio")
	for _, r := range e.Layers {
		fmt.Fprintf(w, "%-9s  %7.4f  %9.4f  %8.2f%%  %5.2f%%  %5.2fx\n", r.Name(), r.Recall, r.Precision, 100*r.Predicted, 100*r.True, r.Predicted/max(r.True, 1e-12))
	}
	fmt.Fprintf(w, "mean recall %.4f\n", e.Recall)
	fmt.Fprintf(w, "perplexity: dense %.4f, sparse %.4f (%+.2f%%)\n", e.DensePPL, e.SparsePPL, 100*(e.SparsePPL/e.DensePPL-1))
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}
