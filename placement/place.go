package placement

import (
	"math"
	"slices"
	"sort"
)

// The problem. Every token the CPU reads each dense part it holds and each
// FFN neuron it holds with that neuron's activation rate; whatever sits in
// VRAM it does not read, and the GPU's share runs alongside at many times
// the CPU's bandwidth. So placement maximises the value moved to the GPU,
// value being the bytes a token would have read (times a per-kind cost),
// under the budget: a knapsack whose items are the dense parts (whole) and
// the single neurons.
//
// Why the method below is optimal. Within a layer all neurons have the same
// size b, so among any k of them the best are the k most active; across
// layers of one neuron size, k neurons of the whole model are best chosen as
// the k with the highest rate, and as values are not negative, k is as large
// as the space allows. So for a remaining capacity C the best neuron value
// N(C) is the prefix sum of the rates sorted in descending order, up to
// ⌊C/b⌋ neurons: the greedy by value per byte is exact here (the exchange
// argument: a chosen neuron of lower rate than an unchosen one can be
// swapped for it at equal size and no loss). The dense parts are few and come
// in few sizes (every layer's attention is alike), and two parts of equal
// size and value are interchangeable, so trying every count of every class
// of parts and adding N of what is left covers every solution that matters:
// the best of these is the optimum. Where the counts are too many to try
// (over 2^20 combinations: parts that differ in every layer) or neuron sizes
// differ between layers, a greedy by value per byte that skips what does not
// fit is used, within one item's value of the optimum in the worst case.

// Costs weigh the CPU's time per byte: quantized sparse rows read slower on
// the CPU than dense streams (DESIGN.md: 15-22 GB/s against 27-31 GB/s), so
// a profile of the CPU may weigh them higher. Zero means 1.
type Costs struct {
	Dense, Sparse float64
}

// Plan is a placement.
type Plan struct {
	Budget uint64   // bytes allowed
	Used   uint64   // bytes placed
	Value  float64  // weighted bytes per token taken off the CPU
	Total  float64  // the same with everything placed
	Dense  []string // names of the dense parts on the GPU, in model order
	Layers []LayerPlan
}

// LayerPlan lists the neurons of one layer that go to the GPU.
type LayerPlan struct {
	Index int
	NFF   int
	GPU   []int32 // ascending
}

type neuron struct {
	layer, id int32
	bytes     uint64
	value     float64
	density   float64
}

// Place solves the placement of m under budget bytes.
func Place(m *Model, budget uint64, c Costs) *Plan {
	if c.Dense == 0 {
		c.Dense = 1
	}
	if c.Sparse == 0 {
		c.Sparse = 1
	}
	p := &Plan{Budget: budget}
	// Order the neurons by value per byte (rate times cost, whatever the
	// size), then by position so the answer is reproducible: sorting plain
	// keys is several times faster than sorting structs with a comparison.
	var keys []uint64
	var first []int // global index of each layer's neuron 0
	uniform := true
	for _, l := range m.Layers {
		p.Layers = append(p.Layers, LayerPlan{Index: l.Index, NFF: len(l.Rates)})
		first = append(first, len(keys))
		for _, r := range l.Rates {
			d := float32(float64(max(r, 0)) * c.Sparse)
			keys = append(keys, uint64(^math.Float32bits(d))<<32|uint64(len(keys)))
		}
		uniform = uniform && l.NeuronBytes == m.Layers[0].NeuronBytes
	}
	slices.Sort(keys)
	ns := make([]neuron, len(keys))
	for i, k := range keys {
		g := int(uint32(k))
		li := sort.Search(len(first), func(j int) bool { return first[j] > g }) - 1
		l := &m.Layers[li]
		id := g - first[li]
		v := float64(max(l.Rates[id], 0)) * float64(l.NeuronBytes) * c.Sparse
		ns[i] = neuron{int32(li), int32(id), l.NeuronBytes, v, v / float64(max(l.NeuronBytes, 1))}
		p.Total += v
	}
	cumB := make([]uint64, len(ns)+1)
	cumV := make([]float64, len(ns)+1)
	for i, n := range ns {
		cumB[i+1] = cumB[i] + n.bytes
		cumV[i+1] = cumV[i] + n.value
	}
	// fill is N(C) with the prefix it takes.
	fill := func(cap uint64) (int, float64) {
		k := sort.Search(len(ns), func(i int) bool { return cumB[i+1] > cap })
		return k, cumV[k]
	}
	dv := make([]float64, len(m.Parts))
	for i, pt := range m.Parts {
		dv[i] = pt.Read * c.Dense
		p.Total += dv[i]
	}

	take := make([]bool, len(m.Parts))
	best := math.Inf(-1)
	if classes, ok := partClasses(m.Parts, dv); ok {
		count := make([]int, len(classes))
		cur := make([]int, len(classes))
		var walk func(ci int, bytes uint64, val float64)
		walk = func(ci int, bytes uint64, val float64) {
			if ci == len(classes) {
				if _, nv := fill(budget - bytes); val+nv > best {
					best = val + nv
					copy(count, cur)
				}
				return
			}
			cl := classes[ci]
			for k := 0; k <= len(cl.members); k++ {
				b := bytes + uint64(k)*cl.bytes
				if b > budget || (k > 0 && cl.bytes > 0 && b < bytes) {
					break
				}
				cur[ci] = k
				walk(ci+1, b, val+float64(k)*cl.value)
			}
			cur[ci] = 0
		}
		walk(0, 0, 0)
		for ci, cl := range classes {
			for _, i := range cl.members[:count[ci]] {
				take[i] = true
			}
		}
	} else {
		uniform = false
	}

	var chosen []int // indices into ns
	if uniform {
		var used uint64
		for i, t := range take {
			if t {
				used += m.Parts[i].Bytes
			}
		}
		k, _ := fill(budget - used)
		for i := range k {
			chosen = append(chosen, i)
		}
	} else {
		take, chosen = greedy(m.Parts, dv, ns, budget)
	}

	for i, t := range take {
		if t {
			p.Dense = append(p.Dense, m.Parts[i].Name)
			p.Used += m.Parts[i].Bytes
			p.Value += dv[i]
		}
	}
	for _, i := range chosen {
		n := ns[i]
		p.Layers[n.layer].GPU = append(p.Layers[n.layer].GPU, n.id)
		p.Used += n.bytes
		p.Value += n.value
	}
	for i := range p.Layers {
		slices.Sort(p.Layers[i].GPU)
	}
	return p
}

type class struct {
	bytes   uint64
	value   float64
	members []int // part indices, in model order
}

// partClasses groups interchangeable parts; ok is false when trying every
// count of every class would take too long.
func partClasses(parts []Part, dv []float64) ([]class, bool) {
	var cs []class
	at := map[[2]uint64]int{}
	for i, pt := range parts {
		key := [2]uint64{pt.Bytes, math.Float64bits(dv[i])}
		ci, ok := at[key]
		if !ok {
			ci = len(cs)
			at[key] = ci
			cs = append(cs, class{bytes: pt.Bytes, value: dv[i]})
		}
		cs[ci].members = append(cs[ci].members, i)
	}
	combos := 1.0
	for _, c := range cs {
		combos *= float64(len(c.members) + 1)
	}
	return cs, combos <= 1<<20
}

// greedy takes items by value per byte, skipping those that no longer fit.
func greedy(parts []Part, dv []float64, ns []neuron, budget uint64) ([]bool, []int) {
	type item struct {
		part    int // -1 for a neuron
		n       int
		bytes   uint64
		density float64
	}
	items := make([]item, 0, len(parts)+len(ns))
	for i, pt := range parts {
		items = append(items, item{i, 0, pt.Bytes, dv[i] / float64(max(pt.Bytes, 1))})
	}
	for i, n := range ns {
		items = append(items, item{-1, i, n.bytes, n.density})
	}
	// Stable: the neurons keep their order, parts precede neurons of equal
	// density and larger parts go first.
	sort.SliceStable(items, func(a, b int) bool {
		if items[a].density != items[b].density {
			return items[a].density > items[b].density
		}
		return items[a].part >= 0 && (items[b].part < 0 || items[a].bytes > items[b].bytes)
	})
	take := make([]bool, len(parts))
	var chosen []int
	left := budget
	for _, it := range items {
		if it.bytes > left {
			continue
		}
		left -= it.bytes
		if it.part >= 0 {
			take[it.part] = true
		} else {
			chosen = append(chosen, it.n)
		}
	}
	slices.Sort(chosen)
	return take, chosen
}
