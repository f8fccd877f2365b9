package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// value recomputes a plan's value from the model, independently of Place.
func planValue(t *testing.T, m *Model, p *Plan) (float64, uint64) {
	t.Helper()
	var v float64
	var used uint64
	for _, name := range p.Dense {
		i := slices.IndexFunc(m.Parts, func(pt Part) bool { return pt.Name == name })
		if i < 0 {
			t.Fatalf("plan names part %q the model lacks", name)
		}
		v += m.Parts[i].Read
		used += m.Parts[i].Bytes
	}
	for li, lp := range p.Layers {
		if !slices.IsSorted(lp.GPU) {
			t.Fatalf("layer %d: GPU neurons not ascending: %v", lp.Index, lp.GPU)
		}
		if len(slices.Compact(slices.Clone(lp.GPU))) != len(lp.GPU) {
			t.Fatalf("layer %d: a neuron is listed twice", lp.Index)
		}
		l := m.Layers[li]
		for _, id := range lp.GPU {
			v += float64(l.Rates[id]) * float64(l.NeuronBytes)
			used += l.NeuronBytes
		}
	}
	return v, used
}

// bruteForce tries every subset of parts and neurons.
func bruteForce(m *Model, budget uint64) float64 {
	type item struct {
		b uint64
		v float64
	}
	var items []item
	for _, p := range m.Parts {
		items = append(items, item{p.Bytes, p.Read})
	}
	for _, l := range m.Layers {
		for _, r := range l.Rates {
			items = append(items, item{l.NeuronBytes, float64(r) * float64(l.NeuronBytes)})
		}
	}
	best := 0.0
	for mask := 0; mask < 1<<len(items); mask++ {
		var b uint64
		var v float64
		for i, it := range items {
			if mask>>i&1 == 1 {
				b += it.b
				v += it.v
			}
		}
		if b <= budget && v > best {
			best = v
		}
	}
	return best
}

// randModel makes a small instance: parts of a few sizes (some alike, as
// real layers are) and layers of 1-4 neurons.
func randModel(r *rand.Rand, uniform bool) *Model {
	m := &Model{}
	sizes := []uint64{uint64(5 + r.IntN(40)), uint64(5 + r.IntN(40))}
	for i := range 1 + r.IntN(4) {
		b := sizes[r.IntN(2)]
		m.Parts = append(m.Parts, Part{Name: "p" + string(rune('a'+i)), Bytes: b, Read: float64(b)})
	}
	nb := uint64(3 + r.IntN(10))
	for li := range 1 + r.IntN(3) {
		l := Layer{Index: li, NeuronBytes: nb}
		if !uniform {
			l.NeuronBytes = uint64(3 + r.IntN(10))
		}
		for range 1 + r.IntN(4) {
			l.Rates = append(l.Rates, float32(r.IntN(11))/10) // ties and zeros too
		}
		m.Layers = append(m.Layers, l)
	}
	for len(m.Parts)+countNeurons(m) > 16 {
		m.Layers = m.Layers[:len(m.Layers)-1]
	}
	return m
}

func countNeurons(m *Model) int {
	n := 0
	for _, l := range m.Layers {
		n += len(l.Rates)
	}
	return n
}

func TestPlaceMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 400 {
		m := randModel(r, true)
		budget := uint64(r.IntN(int(m.Bytes()) + 20))
		p := Place(m, budget, Costs{})
		v, used := planValue(t, m, p)
		if used != p.Used || used > budget {
			t.Fatalf("trial %d: plan uses %d bytes (says %d), budget %d", trial, used, p.Used, budget)
		}
		if math.Abs(v-p.Value) > 1e-9*(1+v) {
			t.Fatalf("trial %d: plan says value %g, its items sum to %g", trial, p.Value, v)
		}
		if want := bruteForce(m, budget); math.Abs(v-want) > 1e-9*(1+want) {
			t.Fatalf("trial %d: value %g, brute force finds %g (budget %d, model %+v)", trial, v, want, budget, m)
		}
	}
}

// With neuron sizes that differ between layers the greedy fallback is used:
// never better than the optimum, and short of it by at most one item.
func TestPlaceMixedSizesNearOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		m := randModel(r, false)
		budget := uint64(r.IntN(int(m.Bytes()) + 20))
		p := Place(m, budget, Costs{})
		v, used := planValue(t, m, p)
		if used > budget {
			t.Fatalf("trial %d: over budget", trial)
		}
		maxItem := 0.0
		for _, pt := range m.Parts {
			maxItem = max(maxItem, pt.Read)
		}
		for _, l := range m.Layers {
			maxItem = max(maxItem, float64(l.NeuronBytes))
		}
		want := bruteForce(m, budget)
		if v > want+1e-9 || v < want-maxItem-1e-9 {
			t.Fatalf("trial %d: value %g, optimum %g, largest item %g", trial, v, want, maxItem)
		}
	}
}

func TestBudgetEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	m := sevenB(r, 4)
	p := Place(m, 0, Costs{})
	if p.Used != 0 || len(p.Dense) != 0 || p.Value != 0 {
		t.Fatalf("budget 0 placed %d bytes, parts %v", p.Used, p.Dense)
	}
	for _, l := range p.Layers {
		if len(l.GPU) != 0 {
			t.Fatalf("budget 0 placed neurons of layer %d", l.Index)
		}
	}
	for _, b := range []uint64{m.Bytes(), m.Bytes() + 1, 1 << 50} {
		p = Place(m, b, Costs{})
		if p.Used != m.Bytes() || len(p.Dense) != len(m.Parts) {
			t.Fatalf("budget %d of a %d-byte model placed %d bytes, %d of %d parts", b, m.Bytes(), p.Used, len(p.Dense), len(m.Parts))
		}
		for i, l := range p.Layers {
			if len(l.GPU) != len(m.Layers[i].Rates) {
				t.Fatalf("budget %d left neurons of layer %d on the CPU", b, l.Index)
			}
		}
	}
	// One byte short of everything: the least valuable item stays behind.
	p = Place(m, m.Bytes()-1, Costs{})
	if p.Used > m.Bytes()-1 || p.Value < p.Total-float64(m.Layers[0].NeuronBytes) {
		t.Fatalf("budget total-1: used %d, value %g of %g", p.Used, p.Value, p.Total)
	}
}

// Dense parts go first under the default costs: with room for exactly the
// parts, no neuron is placed; with more, hotter neurons come before colder.
func TestDenseFirstThenHottest(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	m := sevenB(r, 3)
	var dense uint64
	for _, p := range m.Parts {
		if p.Name != "embd" {
			dense += p.Bytes
		}
	}
	p := Place(m, dense, Costs{})
	if len(p.Dense) != len(m.Parts)-1 || slices.Contains(p.Dense, "embd") {
		t.Fatalf("budget of the dense parts placed %v", p.Dense)
	}
	p = Place(m, dense+1000*m.Layers[0].NeuronBytes, Costs{})
	minIn, maxOut := float32(2), float32(-1)
	for li, lp := range p.Layers {
		rates := m.Layers[li].Rates
		for i, r := range rates {
			if _, in := slices.BinarySearch(lp.GPU, int32(i)); in {
				minIn = min(minIn, r)
			} else {
				maxOut = max(maxOut, r)
			}
		}
	}
	if minIn < maxOut {
		t.Fatalf("a neuron of rate %g is on the GPU while one of rate %g is not", minIn, maxOut)
	}
}

// sevenB is a LLaMA-7B-shaped q4_0 instance: per layer attention 4·4096²,
// a predictor of rank 1024 in f16, norms, 11008 neurons of 3 rows of 4096;
// activation rates skewed as ReLU models' are.
func sevenB(r *rand.Rand, layers int) *Model {
	const d, ff = 4096, 11008
	q4 := func(n uint64) uint64 { return n / 32 * 18 }
	m := &Model{}
	for l := range layers {
		for _, p := range []Part{{Name: "attn", Bytes: 4 * q4(d*d)}, {Name: "pred", Bytes: 2 * (d*1024 + 1024*ff)}, {Name: "rest", Bytes: 4 * d}} {
			p.Name = "blk." + strconv.Itoa(l) + "." + p.Name
			p.Layer, p.Read = l, float64(p.Bytes)
			m.Parts = append(m.Parts, p)
		}
		rates := make([]float32, ff)
		for i := range rates {
			rates[i] = float32(math.Pow(r.Float64(), 8))
		}
		m.Layers = append(m.Layers, Layer{Index: l, NeuronBytes: 3 * q4(d), Rates: rates})
	}
	m.Parts = append(m.Parts, Part{Name: "output", Layer: -1, Bytes: q4(32000 * d), Read: float64(q4(32000 * d))},
		Part{Name: "embd", Layer: -1, Bytes: q4(32000 * d), Read: float64(q4(d))})
	return m
}

// At a 7B's scale (32 layers of 11008 neurons, 352k items) the plan fits
// each budget, recounts to its own Used and Value from the model's parts
// and neuron rates, and a larger budget takes at least as many bytes per
// token off the CPU. How fast it solves is BenchmarkPlace7B's (a speed
// target is a benchmark's, not a timed test's).
func TestSevenB(t *testing.T) {
	m := sevenB(rand.New(rand.NewPCG(9, 9)), 32)
	last := -1.0
	for _, frac := range budgets7B {
		budget := uint64(frac * float64(m.Bytes()))
		p := Place(m, budget, Costs{})
		value, used := planValue(t, m, p)
		n := 0
		for _, lp := range p.Layers {
			n += len(lp.GPU)
		}
		t.Logf("budget %.0f%% of %.2f GB: %d dense parts, %d neurons, %.1f%% of the CPU's bytes per token moved",
			100*frac, float64(m.Bytes())/1e9, len(p.Dense), n, 100*p.Value/p.Total)
		if used > budget || used != p.Used || math.Abs(value-p.Value) > 1e-9*value || p.Value < last {
			t.Fatalf("budget %d: used %d (plan says %d), value %g (plan says %g), the last budget's %g", budget, used, p.Used, value, p.Value, last)
		}
		last = p.Value
	}
}

var budgets7B = []float64{0.1, 0.25, 0.5, 0.9}

// BenchmarkPlace7B: issue 7 asks for a 7B's placement in under a second.
func BenchmarkPlace7B(b *testing.B) {
	m := sevenB(rand.New(rand.NewPCG(9, 9)), 32)
	for _, frac := range budgets7B {
		b.Run(fmt.Sprintf("%.0fpct", 100*frac), func(b *testing.B) {
			budget := uint64(frac * float64(m.Bytes()))
			for b.Loop() {
				Place(m, budget, Costs{})
			}
		})
	}
}
