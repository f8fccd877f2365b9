package train

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/pinfer/pinfer/ops"
)

// Options for Fit.
type Options struct {
	Rank   int     // fc1 rows per layer; 0: from each layer's sparsity (RankFor)
	Epochs int     // passes over the training split after the linear start
	Recall float64 // recall each layer's cut must reach on the held-out split (0: 0.99)
	// Kept is the share of the activation mass, over all layers together,
	// that the cuts must keep on the held-out split (0: 0.99999); see allocate.
	Kept     float64
	Holdout  float64 // share of samples held out for the cut and the report (0: 0.2)
	Batch    int     // minibatch size (0: 128)
	LR       float64 // Adam's step size (0: 1e-3)
	Pool     *ops.Pool
	Progress func(steps int) // called after each minibatch with the steps taken
	Started  func(total int) // called once, before training, with the steps to come
}

// Check refuses settings outside their ranges, named by the flags of
// "pinfer predictor train"; zero values stand for the defaults.
func (o *Options) Check() error {
	for _, c := range []struct {
		flag string
		v    float64
		ok   bool
		want string
	}{
		// Two fc1 rows per linear direction, and two scale units.
		{"--rank", float64(o.Rank), o.Rank == 0 || o.Rank >= 4 && o.Rank%2 == 0, "want an even number of at least 4, or 0 for each layer's own"},
		{"--epochs", float64(o.Epochs), o.Epochs >= 0, "want 0 or more passes"},
		{"--recall", o.Recall, o.Recall >= 0 && o.Recall <= 1, "want a share in (0, 1]"},
		{"--kept", o.Kept, o.Kept >= 0 && o.Kept <= 1, "want a share in (0, 1]"},
		{"--holdout", o.Holdout, o.Holdout >= 0 && o.Holdout < 1, "want a share in (0, 1)"},
		{"batch", float64(o.Batch), o.Batch >= 0, "want 0 or more samples"},
		{"learning rate", o.LR, o.LR >= 0 && !math.IsInf(o.LR, 0), "want a positive step"},
	} {
		if !c.ok {
			return fmt.Errorf("%s %v: %s", c.flag, c.v, c.want)
		}
	}
	return nil
}

func (o *Options) defaults() {
	if o.Recall == 0 {
		o.Recall = 0.99
	}
	if o.Kept == 0 {
		o.Kept = 0.99999
	}
	if o.Holdout == 0 {
		o.Holdout = 0.2
	}
	if o.Batch == 0 {
		o.Batch = 128
	}
	if o.LR == 0 {
		o.LR = 1e-3
	}
}

// RankFor is the rule for a layer's rank when none is given: 2k+2 fc1 rows
// (k linear directions, see init.go) with k = n_embd·(1-a) for a layer whose
// neurons fire at the rate a, rounded up to a multiple of 8. Why sparsity
// raises the rank: what a low rank misses shows up as false positives in
// proportion to the neurons that do not fire, while the bound that matters,
// predicted/true active neurons, divides by the ones that do; so the sparser
// the layer, the more directions it needs for the same bound (measured on
// the Shakespeare fixture at k = 3/4 n_embd: 1.14x-1.37x). k = n_embd keeps
// the whole linear map: the exact label, as costly as the gate.
func RankFor(nEmbd int, active float64) int {
	k := int(math.Ceil(float64(nEmbd)*(1-active)/8)) * 8
	k = min(max(k, 8), nEmbd)
	return 2*k + 2
}

// Steps is how many minibatches Fit takes for data and o.
func Steps(data []*Data, o Options) int {
	o.defaults()
	s := 0
	for _, d := range data {
		tr := int(float64(d.N) * (1 - o.Holdout))
		if tooFew(d, o) {
			continue
		}
		s += o.Epochs * ((tr + o.Batch - 1) / o.Batch)
	}
	return s
}

// Report is one layer's predictor measured on the held-out split.
type Report struct {
	Layer     int
	Expert    int     // expert index inside a mixture of experts, else 0
	Experts   int     // the mixture's experts; 0 for a plain FFN
	Dense     bool    // too few samples to fit: the predictor keeps every neuron (denseNet)
	Rank      int     // fc1 rows
	Cut       float64 // δ, the cut folded into fc2 (see fold)
	Recall    float64 // fired neurons that were predicted
	Mass      float64 // share of the fired neurons' activation mass predicted
	Precision float64 // predicted neurons that fired
	Predicted float64 // mean share of neurons predicted per token
	True      float64 // mean share of neurons that fired per token
}

// Fit trains one predictor per layer: the linear start, then Adam on
// class-weighted binary cross-entropy over the first 1-Holdout of each
// layer's samples; then it places every layer's cut, all together, on the
// rest (allocate).
func Fit(data []*Data, o Options) ([]*Net, []Report, error) {
	if err := o.Check(); err != nil {
		return nil, nil, err
	}
	o.defaults()
	var nets []*Net
	var curves []*curve
	steps := 0
	if o.Started != nil {
		o.Started(Steps(data, o))
	}
	for _, d := range data {
		trn, held := d.Split(1 - o.Holdout)
		if tooFew(d, o) {
			// The text routed too few tokens to this expert to fit it; a
			// plain layer sees every token, so there the text is too short.
			if d.Experts == 0 {
				return nil, nil, fmt.Errorf("%s: %d samples are too few to fit inputs of %d and hold some out", d.name(), d.N, d.Layer.NEmbd)
			}
			nets = append(nets, denseNet(d))
			curves = append(curves, nil)
			continue
		}
		pos := positives(trn)
		active := pos / float64(trn.N) / float64(d.Layer.NFF)
		rank := o.Rank
		if rank == 0 {
			rank = RankFor(d.Layer.NEmbd, active)
		}
		net, err := linearStart(trn, (rank-2)/2, o.Pool)
		if err != nil {
			return nil, nil, err
		}
		// Weighting positives by the ratio of negatives to positives
		// balances the classes, so the loss does not buy precision with
		// missed neurons: the cut then only has to move a little.
		posWeight := float32((1 - active) / max(active, 1e-6))
		fitScale(net, trn, posWeight, o.Pool)
		if o.Epochs > 0 {
			tr := newTrainer(net, o.Pool, o.Batch, posWeight, o.LR)
			xb := make([]float32, o.Batch*net.In)
			order := make([]int, trn.N)
			for i := range order {
				order[i] = i
			}
			rng := uint64(d.Layer.Index+1)<<16 | uint64(d.Layer.Expert)
			for range o.Epochs {
				shuffle(order, &rng)
				for lo := 0; lo < trn.N; lo += o.Batch {
					idx := order[lo:min(lo+o.Batch, trn.N)]
					for b, n := range idx {
						copy(xb[b*net.In:], trn.Row(n))
					}
					tr.step(xb, len(idx), func(b, o int) bool { return trn.Fired(idx[b], o) })
					steps++
					if o.Progress != nil {
						o.Progress(steps)
					}
				}
			}
		}
		roundF16(net.W1)
		roundF16(net.W2)
		nets = append(nets, net)
		curves = append(curves, newCurve(net, held, o.Recall, o.Pool))
	}
	cuts := allocate(curves, o.Kept)
	var reps []Report
	for k, d := range data {
		if curves[k] == nil {
			r := Report{Recall: 1, Mass: 1, Predicted: 1}
			if d.N > 0 {
				r = measure(nets[k], d, o.Pool)
			}
			r.Layer, r.Expert, r.Experts, r.Rank, r.Dense = d.Layer.Index, d.Layer.Expert, d.Experts, nets[k].Hidden, true
			reps = append(reps, r)
			continue
		}
		_, held := d.Split(1 - o.Holdout)
		net, delta := nets[k], cuts[k]
		base := append([]float32(nil), net.W2...)
		r := fold(net, base, delta, held, o.Pool)
		// Rounding the folded fc2 to f16 moves each neuron's cut a little:
		// give up a little precision until the recall floor holds again.
		for step := 1; r.Recall < o.Recall && step <= 20; step++ {
			delta = curves[k].lower(delta, step)
			r = fold(net, base, delta, held, o.Pool)
		}
		r.Layer, r.Expert, r.Experts, r.Rank, r.Cut = d.Layer.Index, d.Layer.Expert, d.Experts, net.Hidden, delta
		reps = append(reps, r)
	}
	return nets, reps, nil
}

// tooFew reports whether d has too few samples for the linear start (at
// least one per input dimension) after some are held out.
func tooFew(d *Data, o Options) bool {
	trn := int(float64(d.N) * (1 - o.Holdout))
	return trn < d.Layer.NEmbd || trn == d.N
}

// denseNet predicts every neuron: its score, |u·x| with u the mean input's
// direction, is above 0 off one hyperplane. It stands in for an expert the
// text routed too few tokens to for a fit, so that the file still has a
// predictor for every FFN and that expert runs dense.
func denseNet(d *Data) *Net {
	in, out := d.Layer.NEmbd, d.Layer.NFF
	u := make([]float64, in)
	for n := range d.N {
		for i, v := range d.Row(n) {
			u[i] += float64(v)
		}
	}
	var norm float64
	for _, v := range u {
		norm += v * v
	}
	if norm == 0 {
		for i := range u {
			u[i] = 1
		}
		norm = float64(in)
	}
	n := &Net{In: in, Hidden: 2, Out: out, W1: make([]float32, 2*in), W2: make([]float32, 2*out), Spread: make([]float32, out)}
	for i, v := range u {
		n.W1[i] = float32(v / math.Sqrt(norm))
		n.W1[in+i] = -n.W1[i]
	}
	for i := range n.W2 {
		n.W2[i] = 1
	}
	for o := range n.Spread {
		n.Spread[o] = 1
	}
	roundF16(n.W1)
	return n
}

// Name is the layer as tables show it: "3", or "3/1" for expert 1 of
// block 3.
func (r Report) Name() string {
	if r.Experts > 0 {
		return fmt.Sprintf("%d/%d", r.Layer, r.Expert)
	}
	return fmt.Sprint(r.Layer)
}

func positives(d *Data) float64 {
	var n int
	for _, w := range d.Y {
		for ; w != 0; w &= w - 1 {
			n++
		}
	}
	return float64(n)
}

// fitScale multiplies fc2 by the factor, among a few, that gives the least
// weighted cross-entropy on a sample of d: the linear start's scores are
// in the units of the gate, not of a logit.
func fitScale(n *Net, d *Data, posWeight float32, pool *ops.Pool) {
	B := min(d.N, 512)
	h, s := make([]float32, B*n.Hidden), make([]float32, B*n.Out)
	n.Scores(pool, d.X[:B*n.In], B, h, s)
	best, bestLoss := 1.0, math.Inf(1)
	for a := 1.0 / 64; a <= 64; a *= math.Sqrt2 {
		var loss float64
		for b := range B {
			for o := range n.Out {
				z := a * float64(s[b*n.Out+o])
				if d.Fired(b, o) {
					loss -= float64(posWeight) * logSigmoid(z)
				} else {
					loss -= logSigmoid(-z)
				}
			}
		}
		if loss < bestLoss {
			best, bestLoss = a, loss
		}
	}
	for i := range n.W2 {
		n.W2[i] *= float32(best)
	}
}

// The cut. A neuron is predicted when score > δ·e·b, where b is the sum
// of all hidden units and e the neuron's spread (Net.Spread). The net is
// positively homogeneous, so its scores, and their errors, grow with the
// input; b is a norm of the input that grows with them, so one δ in these
// units fits every token (a cut on the raw score, or on one unit, misses
// whole tokens at once). e widens the cut of the neurons the low rank
// predicts worst. b being a sum of hidden units, δ·e·b folds into fc2.

// ratio is a score in the cut's units.
func (n *Net) ratio(o int, v, b float32) float64 {
	return float64(v) / max(float64(b)*float64(n.Spread[o]), 1e-30)
}

// fold sets fc2 to base less the cut δ and measures the result on d.
func fold(n *Net, base []float32, delta float64, d *Data, pool *ops.Pool) Report {
	for o := range n.Out {
		c := float32(delta) * n.Spread[o]
		for r := range n.Hidden {
			i := o*n.Hidden + r
			n.W2[i] = roundF16One(base[i] - c)
		}
	}
	return measure(n, d, pool)
}

// curve is what each cut costs one layer on held-out samples: cut j, δ
// just below the j-th lowest-scoring fired neuron, misses the j below it,
// which hold miss[j] of activation mass, and predicts pred[j] neurons;
// both per token. total is all the fired mass per token.
type curve struct {
	delta, pred, miss []float64
	total             float64
	all               []float32 // every sample's and neuron's ratio, sorted
}

// newCurve scores d and keeps the cuts that miss at most 1-floor of the
// fired neurons.
func newCurve(n *Net, d *Data, floor float64, pool *ops.Pool) *curve {
	type hit struct{ r, mass float64 }
	var hits []hit
	all := make([]float32, 0, d.N*n.Out)
	var total float64
	eachScore(n, d, pool, func(i int, h, s []float32, fired func(o int) bool) {
		b := sum32(h)
		ms := d.Masses(i)
		k := 0
		for o, v := range s {
			r := n.ratio(o, v, b)
			all = append(all, float32(r))
			if fired(o) {
				hits = append(hits, hit{r, float64(ms[k])})
				total += float64(ms[k])
				k++
			}
		}
	})
	slices.Sort(all)
	sort.Slice(hits, func(a, b int) bool { return hits[a].r < hits[b].r })
	tokens := float64(d.N)
	c := &curve{all: all, total: total / tokens}
	if len(hits) == 0 {
		c.delta, c.pred, c.miss = []float64{0}, []float64{0}, []float64{0}
		return c
	}
	var missed float64
	for j := 0; j <= int((1-floor)*float64(len(hits))) && j < len(hits); j++ {
		delta := math.Nextafter(hits[0].r, math.Inf(-1))
		if j > 0 {
			missed += hits[j-1].mass
			delta = (hits[j-1].r + hits[j].r) / 2
		}
		above := len(all) - sort.Search(len(all), func(i int) bool { return float64(all[i]) > delta })
		c.delta = append(c.delta, delta)
		c.pred = append(c.pred, float64(above)/tokens)
		c.miss = append(c.miss, missed/tokens)
	}
	return c
}

// lower moves δ down past step thousandths of a percent of the ratios.
func (c *curve) lower(delta float64, step int) float64 {
	i := sort.Search(len(c.all), func(i int) bool { return float64(c.all[i]) >= delta })
	return float64(c.all[max(i-step*max(1, len(c.all)/100000), 0)])
}

// best is the cut that minimizes pred + λ·miss.
func (c *curve) best(lambda float64) int {
	j := 0
	for i := range c.pred {
		if c.pred[i]+lambda*c.miss[i] < c.pred[j]+lambda*c.miss[j] {
			j = i
		}
	}
	return j
}

// allocate places the cuts of all layers at once (a nil curve is a layer
// without a cut, see denseNet): the fewest predicted
// neurons, summed over layers, such that the activation mass they miss,
// summed over layers, is at most 1-kept of all the fired mass. A missed
// neuron costs its mass, not 1: what moves the logits is how much a miss
// takes out of the FFN's output, and the many neurons that fire barely
// above 0 take out almost nothing. Mass is in the logits' units in every
// layer (Data.Mass), so the layers share one budget; at the optimum one
// more predicted neuron buys the same mass in every layer (one λ), so a
// layer whose cut is cheap to lower keeps more.
func allocate(cs []*curve, kept float64) []float64 {
	var total float64
	for _, c := range cs {
		if c != nil {
			total += c.total
		}
	}
	budget := (1 - kept) * total
	missAt := func(lambda float64) float64 {
		var m float64
		for _, c := range cs {
			if c != nil {
				m += c.miss[c.best(lambda)]
			}
		}
		return m
	}
	lo, hi := 1e-12, 1e12
	for range 100 {
		mid := math.Sqrt(lo * hi)
		if missAt(mid) <= budget {
			hi = mid
		} else {
			lo = mid
		}
	}
	out := make([]float64, len(cs))
	for k, c := range cs {
		if c != nil {
			out[k] = c.delta[c.best(hi)]
		}
	}
	return out
}

func sum32(v []float32) float32 {
	var s float32
	for _, x := range v {
		s += x
	}
	return s
}

// measure compares the net's predictions (score > 0) with d's labels.
func measure(n *Net, d *Data, pool *ops.Pool) Report {
	var tp, fp, fn, kept, mass float64
	eachScore(n, d, pool, func(i int, _, s []float32, fired func(o int) bool) {
		ms := d.Masses(i)
		k := 0
		for o, v := range s {
			switch p, f := v > 0, fired(o); {
			case p && f:
				tp++
				kept += float64(ms[k])
			case p:
				fp++
			case f:
				fn++
			}
			if fired(o) {
				mass += float64(ms[k])
				k++
			}
		}
	})
	tot := float64(d.N * n.Out)
	return Report{Recall: tp / max(tp+fn, 1), Mass: kept / max(mass, 1e-30), Precision: tp / max(tp+fp, 1), Predicted: (tp + fp) / tot, True: (tp + fn) / tot}
}

// eachScore runs the net over d in chunks and calls f per sample, in order.
func eachScore(n *Net, d *Data, pool *ops.Pool, f func(i int, h, s []float32, fired func(o int) bool)) {
	const B = 256
	h, s := make([]float32, B*n.Hidden), make([]float32, B*n.Out)
	for lo := 0; lo < d.N; lo += B {
		m := min(B, d.N-lo)
		n.Scores(pool, d.X[lo*n.In:(lo+m)*n.In], m, h, s)
		for b := range m {
			i := lo + b
			f(i, h[b*n.Hidden:(b+1)*n.Hidden], s[b*n.Out:(b+1)*n.Out], func(o int) bool { return d.Fired(i, o) })
		}
	}
}

func roundF16(w []float32) {
	for i, v := range w {
		w[i] = roundF16One(v)
	}
}

func roundF16One(v float32) float32 { return ops.F16ToF32(ops.F32ToF16(v)) }

func shuffle(a []int, state *uint64) {
	for i := len(a) - 1; i > 0; i-- {
		*state ^= *state << 13
		*state ^= *state >> 7
		*state ^= *state << 17
		j := int(*state % uint64(i+1))
		a[i], a[j] = a[j], a[i]
	}
}
