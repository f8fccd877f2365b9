package train

import (
	"fmt"
	"math"

	"github.com/pinfer/pinfer/ops"
)

// The linear start. With an RMS norm, gate·normed(x) = gate·(w⊙x)/rms(x), so
// whether a neuron fires is the sign of a linear function of the residual x:
// the scores t = gate·normed(x)·rms(x) are W x for some W (Out x In). Least
// squares over the samples finds W from data (and the best linear stand-in
// where the norm is not a pure scale, as with LayerNorm). A rank-k predictor
// then keeps the k directions that carry most of the variance of W x: with Q
// the top-k eigenvectors of W C Wᵀ (C = Σ x xᵀ), scores ≈ Q Qᵀ W x. In
// PowerInfer's bias-free relu(x·fc1)·fc2 a linear map of rank k takes 2k
// hidden units, since v = relu(v) - relu(-v): fc1 = [QᵀW; -QᵀW],
// fc2 = [Q, -Q].
//
// fc2 has no bias, and no input is constant, so the two last hidden units
// carry |u·x| (u is the mean direction of x, so u·x rarely comes near 0):
// their fc2 column acts as each neuron's bias, scaled with the input the
// way the whole bias-free net is (relu nets without biases are positively
// homogeneous). Training learns it. (The recall cut is folded into all of
// fc2 instead: see fold in fit.go.)

// linearStart builds a net of rank 2k+2 from d's samples.
func linearStart(d *Data, k int, pool *ops.Pool) (*Net, error) {
	l := d.Layer
	in, out := l.NEmbd, l.NFF
	if d.N < in {
		return nil, fmt.Errorf("%s: %d samples are too few for inputs of %d", d.name(), d.N, in)
	}
	c, nx, mean, rx := moments(d, pool)
	// A touch of ridge keeps the solve stable on directions x never takes.
	var tr float64
	for i := range in {
		tr += c[i*in+i]
	}
	for i := range in {
		c[i*in+i] += 1e-6 * tr / float64(in)
	}
	chol := append([]float64(nil), c...)
	if err := cholesky(chol, in); err != nil {
		return nil, fmt.Errorf("%s: %v", d.name(), err)
	}
	// W's row o solves C w = (gate · NX)_o + b_o·RX, b the gate's bias (OPT:
	// a neuron fires when gate·normed + b > 0); it is then scaled so that each
	// neuron's score has unit spread: whether a neuron fires does not depend
	// on its scale, so every neuron should count alike in what the low rank
	// keeps, and one cut in these units serves them all.
	w := make([]float64, out*in)
	pool.Run(out, func(lo, hi int) {
		g := make([]float32, in)
		for o := lo; o < hi; o++ {
			l.Gate.RowF32(o, g)
			row := w[o*in : (o+1)*in]
			for i, gi := range g {
				for j, v := range nx[i*in : (i+1)*in] {
					row[j] += float64(gi) * v
				}
			}
			if l.GateBias != nil {
				for j, v := range rx {
					row[j] += float64(l.GateBias[o]) * v
				}
			}
			cholSolve(chol, in, row)
			if sd := math.Sqrt(quad(c, row, in) / float64(d.N)); sd > 0 {
				for j := range row {
					row[j] /= sd
				}
			}
		}
	})
	// The top-k principal directions of W x, found in whitened input space:
	// with C = L Lᵀ and x = L x' (x' has unit covariance), W x = (W L) x',
	// whose top right singular vectors V are the top eigenvectors of
	// Lᵀ WᵀW L. Then W x ≈ (W L V)(Vᵀ L⁻¹ x) for any orthonormal V:
	// fc1 rows (L⁻ᵀ vⱼ)ᵀ, fc2 columns W L vⱼ.
	lo := lower(chol, in)
	m := mul(transpose(lo, in, in), mul(gram(w, out, in, pool), lo, in), in)
	v := topEigen(m, in, k)
	lv := mulRect(lo, in, in, v, k) // L V, in x k
	n := &Net{In: in, Hidden: 2*k + 2, Out: out, W1: make([]float32, (2*k+2)*in), W2: make([]float32, out*(2*k+2))}
	// C sums over the N samples, so vⱼᵀ x' sums to 1 in square over them:
	// scaling by √N gives the hidden units unit spread.
	sd := math.Sqrt(float64(d.N))
	dir := make([]float64, in)
	for j := range k {
		for i := range in {
			dir[i] = v[i*k+j]
		}
		solveUpper(chol, in, dir)
		for i, x := range dir {
			n.W1[j*in+i] = float32(x * sd)
			n.W1[(k+j)*in+i] = float32(-x * sd)
		}
	}
	pool.Run(out, func(lo, hi int) {
		for o := lo; o < hi; o++ {
			row := w[o*in : (o+1)*in]
			for j := range k {
				var u float64
				for i, wv := range row {
					u += wv * lv[i*k+j]
				}
				n.W2[o*n.Hidden+j] = float32(u / sd)
				n.W2[o*n.Hidden+k+j] = float32(-u / sd)
			}
		}
	})
	// In whitened space each neuron's unit-spread score is a·x' with |a|² = N,
	// of which the k directions keep |Vᵀa|² = N·Σⱼ fc2ⱼ²: the rest is
	// the spread of what the low rank misses.
	n.Spread = make([]float32, out)
	for o := range out {
		var kept float64
		for j := range k {
			v := float64(n.W2[o*n.Hidden+j])
			kept += v * v
		}
		n.Spread[o] = float32(math.Sqrt(max(1-kept, 1e-4)))
	}
	// The scale units: ±u, scaled to a mean of 1 together.
	var mu, absMean float64
	for _, v := range mean {
		mu += v * v
	}
	mu = math.Sqrt(mu)
	if mu == 0 {
		return nil, fmt.Errorf("%s: the residual has zero mean; no scale direction", d.name())
	}
	for n2 := range d.N {
		var p float64
		for i, v := range d.Row(n2) {
			p += mean[i] / mu * float64(v)
		}
		absMean += math.Abs(p)
	}
	absMean /= float64(d.N)
	for i, v := range mean {
		n.W1[2*k*in+i] = float32(v / mu / absMean)
		n.W1[(2*k+1)*in+i] = float32(-v / mu / absMean)
	}
	return n, nil
}

// moments returns C = Σ x xᵀ, NX = Σ normed(x) xᵀ rms(x), Σ x and
// RX = Σ rms(x) x over d.
func moments(d *Data, pool *ops.Pool) (c, nx, sum, rx []float64) {
	in := d.Layer.NEmbd
	c, nx, sum, rx = make([]float64, in*in), make([]float64, in*in), make([]float64, in), make([]float64, in)
	rms := make([]float64, d.N)
	for n := range d.N {
		var ss float64
		for _, v := range d.Row(n) {
			ss += float64(v) * float64(v)
			_ = v
		}
		rms[n] = math.Sqrt(ss / float64(in))
	}
	pool.Run(in, func(lo, hi int) {
		for n := range d.N {
			x, nr := d.Row(n), d.Normed[n*in:(n+1)*in]
			for i := lo; i < hi; i++ {
				xi, ni := float64(x[i]), float64(nr[i])*rms[n]
				sum[i] += xi
				rx[i] += rms[n] * xi
				ci, nxi := c[i*in:(i+1)*in], nx[i*in:(i+1)*in]
				for j, v := range x {
					ci[j] += xi * float64(v)
					nxi[j] += ni * float64(v)
				}
			}
		}
	})
	return c, nx, sum, rx
}

// topEigen returns an orthonormal basis (n x k, as columns) of the top-k
// eigenvectors of the symmetric n x n matrix m, by subspace iteration.
func topEigen(m []float64, n, k int) []float64 {
	q := make([]float64, n*k)
	seed := uint64(0x9E3779B97F4A7C15)
	for i := range q {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		q[i] = float64(seed>>11)/float64(1<<53) - 0.5
	}
	orthonormalize(q, n, k)
	// A few rounds place the top of the spectrum; what is left mixed lies
	// among directions of nearly equal weight, where either serves.
	for range 12 {
		q = mulRect(m, n, n, q, k)
		orthonormalize(q, n, k)
	}
	return q
}

// lower returns the lower triangle of a cholesky factor as a full matrix.
func lower(a []float64, n int) []float64 {
	l := make([]float64, n*n)
	for i := range n {
		copy(l[i*n:i*n+i+1], a[i*n:i*n+i+1])
	}
	return l
}

func transpose(a []float64, rows, cols int) []float64 {
	t := make([]float64, rows*cols)
	for i := range rows {
		for j := range cols {
			t[j*rows+i] = a[i*cols+j]
		}
	}
	return t
}

// mul multiplies two n x n matrices.
func mul(a, b []float64, n int) []float64 { return mulRect(a, n, n, b, n) }

// mulRect multiplies the r x m matrix a by the m x c matrix b.
func mulRect(a []float64, r, m int, b []float64, c int) []float64 {
	out := make([]float64, r*c)
	for i := range r {
		o := out[i*c : (i+1)*c]
		for p, av := range a[i*m : (i+1)*m] {
			if av == 0 {
				continue
			}
			for j, bv := range b[p*c : (p+1)*c] {
				o[j] += av * bv
			}
		}
	}
	return out
}

// gram is Wᵀ W for the rows x cols matrix w.
func gram(w []float64, rows, cols int, pool *ops.Pool) []float64 {
	g := make([]float64, cols*cols)
	pool.Run(cols, func(lo, hi int) {
		for o := range rows {
			row := w[o*cols : (o+1)*cols]
			for i := lo; i < hi; i++ {
				gi := g[i*cols : (i+1)*cols]
				for j, v := range row {
					gi[j] += row[i] * v
				}
			}
		}
	})
	return g
}

// quad is vᵀ C v.
func quad(c, v []float64, n int) float64 {
	var s float64
	for i := range n {
		var r float64
		for j := range n {
			r += c[i*n+j] * v[j]
		}
		s += v[i] * r
	}
	return s
}
