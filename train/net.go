package train

import (
	"math"
	"sync"

	"github.com/pinfer/pinfer/ops"
)

// Net is one layer's predictor, PowerInfer's relu(x·fc1)·fc2 with no biases.
// A neuron is predicted active when its score is above 0.
type Net struct {
	In, Hidden, Out int
	W1              []float32 // fc1: Hidden rows of In
	W2              []float32 // fc2: Out rows of Hidden
	// Spread is each neuron's typical score error relative to the others',
	// which scales its cut: what the low rank leaves out of its gate.
	Spread []float32
	// The last two hidden units are the scale units (see init.go); training
	// leaves their fc1 rows alone.
}

func (n *Net) w1(r int) []float32 { return n.W1[r*n.In : (r+1)*n.In] }
func (n *Net) w2(o int) []float32 { return n.W2[o*n.Hidden : (o+1)*n.Hidden] }

// hidden sets h (Hidden values) for input x.
func (n *Net) hidden(x, h []float32) {
	for r := range n.Hidden {
		h[r] = max(ops.Dot(n.w1(r), x), 0)
	}
}

// Scores computes, for B inputs (rows of x), the hidden units (B rows of
// Hidden in h) and the scores (B rows of Out in s), split over pool.
func (n *Net) Scores(pool *ops.Pool, x []float32, B int, h, s []float32) {
	pool.Run(B, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			n.hidden(x[b*n.In:(b+1)*n.In], h[b*n.Hidden:(b+1)*n.Hidden])
		}
	})
	pool.Run(n.Out, func(lo, hi int) {
		for o := lo; o < hi; o++ {
			w := n.w2(o)
			for b := range B {
				s[b*n.Out+o] = ops.Dot(w, h[b*n.Hidden:(b+1)*n.Hidden])
			}
		}
	})
}

// adam is the Adam optimizer's state for one parameter slice.
type adam struct{ m, v []float32 }

func newAdam(n int) *adam { return &adam{make([]float32, n), make([]float32, n)} }

// step applies gradient g to p[lo:hi] at step t (from 1).
func (a *adam) step(p, g []float32, lo, hi, t int, lr float64) {
	const b1, b2, eps = 0.9, 0.999, 1e-8
	c1 := float32(lr / (1 - math.Pow(b1, float64(t))))
	c2 := float32(1 / (1 - math.Pow(b2, float64(t))))
	m, v := a.m, a.v
	for i := lo; i < hi; i++ {
		gi := g[i]
		m[i] = b1*m[i] + (1-b1)*gi
		v[i] = b2*v[i] + (1-b2)*gi*gi
		p[i] -= c1 * m[i] / (float32(math.Sqrt(float64(v[i]*c2))) + eps)
	}
}

// trainer holds the buffers of minibatch steps.
type trainer struct {
	n          *Net
	pool       *ops.Pool
	posWeight  float32
	lr         float64
	t          int
	h, s, dh   []float32
	g1, g2     []float32
	opt1, opt2 *adam
}

func newTrainer(n *Net, pool *ops.Pool, batch int, posWeight float32, lr float64) *trainer {
	return &trainer{n: n, pool: pool, posWeight: posWeight, lr: lr,
		h: make([]float32, batch*n.Hidden), s: make([]float32, batch*n.Out), dh: make([]float32, batch*n.Hidden),
		g1: make([]float32, len(n.W1)), g2: make([]float32, len(n.W2)),
		opt1: newAdam(len(n.W1)), opt2: newAdam(len(n.W2))}
}

// step takes one Adam step on the class-weighted binary cross-entropy of B
// samples: x holds their inputs, fired(b, o) their labels. It returns the
// summed loss.
func (tr *trainer) step(x []float32, B int, fired func(b, o int) bool) float64 {
	n := tr.n
	h, s, dh := tr.h[:B*n.Hidden], tr.s[:B*n.Out], tr.dh[:B*n.Hidden]
	n.Scores(tr.pool, x, B, h, s)
	// s becomes dLoss/dscore; the loss of a positive is weighted by posWeight.
	var mu sync.Mutex
	var total float64
	tr.pool.Run(B, func(lo, hi int) {
		var loss float64
		for b := lo; b < hi; b++ {
			row := s[b*n.Out : (b+1)*n.Out]
			for o, z := range row {
				p := float32(1 / (1 + math.Exp(-float64(z))))
				if fired(b, o) {
					loss -= float64(tr.posWeight) * logSigmoid(float64(z))
					row[o] = tr.posWeight * (p - 1)
				} else {
					loss -= logSigmoid(-float64(z))
					row[o] = p
				}
			}
		}
		mu.Lock()
		total += loss
		mu.Unlock()
	})
	inv := 1 / float32(B)
	// fc2's gradient, and the hidden units' gradient through relu.
	tr.pool.Run(n.Out, func(lo, hi int) {
		for o := lo; o < hi; o++ {
			g := tr.g2[o*n.Hidden : (o+1)*n.Hidden]
			clear(g)
			for b := range B {
				ops.Axpy(g, s[b*n.Out+o]*inv, h[b*n.Hidden:(b+1)*n.Hidden])
			}
		}
	})
	tr.pool.Run(B, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			d := dh[b*n.Hidden : (b+1)*n.Hidden]
			clear(d)
			row := s[b*n.Out : (b+1)*n.Out]
			for o, g := range row {
				ops.Axpy(d, g*inv, n.w2(o))
			}
			for r, v := range h[b*n.Hidden : (b+1)*n.Hidden] {
				if v <= 0 {
					d[r] = 0
				}
			}
		}
	})
	tr.t++
	// fc1's gradient; the scale units' rows stay fixed.
	train1 := n.Hidden - 2
	tr.pool.Run(train1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			g := tr.g1[r*n.In : (r+1)*n.In]
			clear(g)
			for b := range B {
				if v := dh[b*n.Hidden+r]; v != 0 {
					ops.Axpy(g, v, x[b*n.In:(b+1)*n.In])
				}
			}
		}
		tr.opt1.step(n.W1, tr.g1, lo*n.In, hi*n.In, tr.t, tr.lr)
	})
	tr.pool.Run(n.Out, func(lo, hi int) {
		tr.opt2.step(n.W2, tr.g2, lo*n.Hidden, hi*n.Hidden, tr.t, tr.lr)
	})
	return total
}

// logSigmoid is log(1/(1+e^-z)) without overflow.
func logSigmoid(z float64) float64 {
	if z < 0 {
		return z - math.Log1p(math.Exp(z))
	}
	return -math.Log1p(math.Exp(-z))
}
