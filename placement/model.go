// Package placement decides which weights of a model live in GPU memory
// under a VRAM budget: the dense parts that are read for every token, and
// per layer the FFN neurons that fire most often, so that the CPU is left
// the fewest bytes to read per token. It reads and writes PowerInfer's
// .gpuidx side file.
package placement

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/predictors"
)

// Part is a dense piece of the model that goes to the GPU whole or not at
// all. Read is the bytes it costs the CPU per token when it stays there.
type Part struct {
	Name  string // "blk.N.attn", "blk.N.pred", "blk.N.rest", "output", "embd"
	Layer int    // -1 for the parts outside the blocks
	Bytes uint64
	Read  float64
}

// Layer is one block's FFN, whose neurons are placed one by one.
type Layer struct {
	Index       int
	NeuronBytes uint64    // gate + up + down rows of one neuron
	Rates       []float32 // activation frequency of each neuron, from a profile
}

// Model is what placement needs to know of a model: its parts, its FFN
// layers in numeric order, and how the CPU's reading costs compare.
type Model struct {
	Parts  []Part
	Layers []Layer
	// CPU is the bytes that stay on the CPU whatever the budget: a mixture
	// of experts' predictors, which only the CPU runs.
	CPU uint64
}

// Bytes is the size of everything that can be placed.
func (m *Model) Bytes() uint64 {
	var n uint64
	for _, p := range m.Parts {
		n += p.Bytes
	}
	for _, l := range m.Layers {
		n += l.NeuronBytes * uint64(len(l.Rates))
	}
	return n
}

var blkName = regexp.MustCompile(`^blk\.(\d+)\.(.*)$`)

// FromGGUF sizes the parts of f and attaches each layer's rates from st.
// A tensor belongs to:
//   - a layer's FFN when its name is blk.N.ffn_* and one of its dimensions
//     is that layer's neuron count (ffn_gate, ffn_up, ffn_down_t, ffn_down,
//     their biases): it is divided evenly among the neurons;
//   - blk.N.attn for blk.N.attn_* (norm, q, k, v, output, fused qkv);
//   - blk.N.pred for PowerInfer's predictor blk.N.fc1 / fc2;
//   - blk.N.rest for the block's other tensors (ffn_norm, ffn_down.bias);
//   - output for output.weight and output_norm.*, or for token_embd.weight
//     when the file has no output.weight (tied embeddings);
//   - embd for the remaining global tensors (token and position
//     embeddings), of which a token reads one row;
//   - blk.N.ffn for a layer's FFN when the profile has no layers at all
//     (a model without sparse FFNs, read whole by every token, as its
//     matmul nodes do);
//   - blk.N.exps for a mixture of experts' router and expert stacks
//     (ffn_gate_inp, ffn_{gate,up,down}_exps), read at the share of the
//     experts a token uses; its predictors (ffn_fc1_exps, ffn_fc2_exps)
//     stay on the CPU (Model.CPU).
func FromGGUF(f *gguf.File, st *predictors.Stats) (*Model, error) {
	// A mixture of experts' FFN (its router ffn_gate_inp and the
	// ffn_*_exps stacks) is placed whole, one part a layer: its neurons are
	// not placed one by one, so its layers' profile entries, one per
	// expert, place nothing.
	moe := map[int]bool{}
	for _, t := range f.Tensors {
		if sm := blkName.FindStringSubmatch(t.Name); sm != nil && isExperts(sm[2]) {
			n, _ := strconv.Atoi(sm[1])
			moe[n] = true
		}
	}
	// A token reads its n_expert_used experts of the layer's n_expert (the
	// router's rows); all of them when the file does not say.
	usedShare := 1.0
	if used, err := f.Uint(f.Arch() + ".expert_used_count"); err == nil {
		if n, err := f.Uint(f.Arch() + ".expert_count"); err == nil && n > 0 && used <= n {
			usedShare = float64(used) / float64(n)
		}
	}
	rates := map[int][]float32{}
	for _, ls := range st.Layers {
		if moe[ls.Layer] {
			continue
		}
		if ls.Expert != 0 {
			return nil, fmt.Errorf("%s: the profile has layer %d expert %d, but the model's layer %d has no experts", f.Path, ls.Layer, ls.Expert, ls.Layer)
		}
		rates[ls.Layer] = ls.Frequency
	}
	type acc struct {
		attn, pred, rest, ffn, exps, dense uint64
		hasFFN                             bool
	}
	// Each block's neuron count, from the matrices whose rows are neurons
	// (ffn_gate, ffn_up {n_embd, n_ff}): a profile of another width is for
	// another model, even when its width happens to be one of the
	// dimensions (n_embd) of these tensors.
	nffFrom := map[int]*gguf.TensorInfo{} // n_ff is its Dims[1]
	for i := range f.Tensors {
		t := &f.Tensors[i]
		sm := blkName.FindStringSubmatch(t.Name)
		if sm == nil {
			continue
		}
		n, err := strconv.Atoi(sm[1])
		if err != nil || n > 1<<20 {
			return nil, fmt.Errorf("%s: tensor %s: bad block number", f.Path, t.Name)
		}
		switch sm[2] {
		case "ffn_gate.weight", "ffn_up.weight", "ffn_down_t.weight":
			if len(t.Dims) == 2 && nffFrom[n] == nil {
				nffFrom[n] = t
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(nffFrom)) {
		t, want := nffFrom[n], int(nffFrom[n].Dims[1])
		if r, ok := rates[n]; ok && len(r) != want {
			return nil, fmt.Errorf("%s: tensor %s has dims %v: layer %d has %d neurons, but the profile gives it %d", f.Path, t.Name, t.Dims, n, want, len(r))
		}
	}
	layers := map[int]*acc{}
	m := &Model{}
	out := Part{Name: "output", Layer: -1}
	embd := Part{Name: "embd", Layer: -1}
	_, hasOutput := f.Tensor("output.weight")
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if sm := blkName.FindStringSubmatch(t.Name); sm != nil {
			n, _ := strconv.Atoi(sm[1]) // checked above
			// A file with down stored both ways (pinfer predictor train
			// keeps ffn_down beside the ffn_down_t it adds) is run from
			// ffn_down_t: ffn_down is never read, and a neuron on the GPU
			// needs one copy of its down row, not two.
			if sm[2] == "ffn_down.weight" {
				if _, ok := f.Tensor(fmt.Sprintf("blk.%d.ffn_down_t.weight", n)); ok {
					continue
				}
			}
			a := layers[n]
			if a == nil {
				a = &acc{}
				layers[n] = a
			}
			rest := sm[2]
			switch kind := blockPart(rest); {
			case kind == "exps" && (strings.HasPrefix(rest, "ffn_fc1_exps.") || strings.HasPrefix(rest, "ffn_fc2_exps.")):
				m.CPU += t.Size
			case kind == "exps":
				a.exps += t.Size
			case kind == "attn":
				a.attn += t.Size
			case kind == "pred":
				a.pred += t.Size
			case kind == "ffn" && len(st.Layers) == 0:
				a.dense += t.Size
			case kind == "ffn":
				r, ok := rates[n]
				if !ok {
					return nil, fmt.Errorf("%s: tensor %s: the profile has no layer %d", f.Path, t.Name, n)
				}
				if !hasDim(t, len(r)) {
					if len(t.Dims) >= 2 {
						return nil, fmt.Errorf("%s: tensor %s has dims %v but the profile gives layer %d %d neurons", f.Path, t.Name, t.Dims, n, len(r))
					}
					a.rest += t.Size
					continue
				}
				a.ffn += t.Size
				a.hasFFN = true
			default:
				a.rest += t.Size
			}
			continue
		}
		switch {
		case t.Name == "output.weight" || strings.HasPrefix(t.Name, "output_norm."):
			out.Bytes += t.Size
			out.Read += float64(t.Size)
		case t.Name == "token_embd.weight" && !hasOutput:
			out.Bytes += t.Size
			out.Read += float64(t.Size)
		default:
			embd.Bytes += t.Size
			if len(t.Dims) >= 2 && t.Dims[len(t.Dims)-1] > 0 {
				embd.Read += float64(t.Size) / float64(t.Dims[len(t.Dims)-1])
			} else {
				embd.Read += float64(t.Size)
			}
		}
	}
	idx := make([]int, 0, len(layers))
	for n := range layers {
		idx = append(idx, n)
	}
	sort.Ints(idx) // numeric: layer 10 after layer 2
	for _, n := range idx {
		a := layers[n]
		name := fmt.Sprintf("blk.%d.", n)
		for _, p := range []Part{{Name: name + "attn", Bytes: a.attn}, {Name: name + "pred", Bytes: a.pred}, {Name: name + "rest", Bytes: a.rest}} {
			if p.Bytes > 0 {
				p.Layer, p.Read = n, float64(p.Bytes)
				m.Parts = append(m.Parts, p)
			}
		}
		if a.exps > 0 {
			m.Parts = append(m.Parts, Part{Name: name + "exps", Layer: n, Bytes: a.exps, Read: float64(a.exps) * usedShare})
		}
		if a.dense > 0 {
			m.Parts = append(m.Parts, Part{Name: name + "ffn", Layer: n, Bytes: a.dense, Read: float64(a.dense)})
		}
		if a.hasFFN {
			r := rates[n]
			m.Layers = append(m.Layers, Layer{Index: n, Rates: r, NeuronBytes: (a.ffn + uint64(len(r)) - 1) / uint64(len(r))})
		}
	}
	for _, p := range []Part{out, embd} {
		if p.Bytes > 0 {
			m.Parts = append(m.Parts, p)
		}
	}
	for n := range rates {
		if a := layers[n]; a == nil || !a.hasFFN {
			return nil, fmt.Errorf("%s: the profile has layer %d, which has no FFN tensors in the model", f.Path, n)
		}
	}
	if len(m.Layers) == 0 && len(moe) == 0 && len(st.Layers) > 0 {
		return nil, fmt.Errorf("%s: no blk.N.ffn_* tensors match the profile's layers", f.Path)
	}
	return m, nil
}

// isExperts tells whether a block's tensor (its name after blk.N.) is a
// mixture of experts' router or expert stack.
func isExperts(rest string) bool {
	return strings.HasPrefix(rest, "ffn_gate_inp.") || strings.Contains(rest, "_exps.")
}

// blockPart is the kind of a block's tensor (its name after blk.N.): exps
// (a mixture's router and experts), attn, pred (PowerInfer's predictor),
// ffn (the FFN's, its norm aside) or rest.
func blockPart(rest string) string {
	switch {
	case isExperts(rest):
		return "exps"
	case strings.HasPrefix(rest, "attn_"):
		return "attn"
	case strings.HasPrefix(rest, "fc1.") || strings.HasPrefix(rest, "fc2."):
		return "pred"
	case strings.HasPrefix(rest, "ffn_") && !strings.HasPrefix(rest, "ffn_norm"):
		return "ffn"
	}
	return "rest"
}

// MatMulPart names the part that holds a matrix a matmul reads whole, as
// FromGGUF groups its tensor: blk.N. and its blockPart inside the blocks
// (blk.N.ffn: a dense model's FFN), output for output.weight, embd for the
// other global tensors.
func MatMulPart(name string) string {
	sm := blkName.FindStringSubmatch(name)
	if sm == nil {
		if name == "output.weight" {
			return "output"
		}
		return "embd"
	}
	return "blk." + sm[1] + "." + blockPart(sm[2])
}

func hasDim(t *gguf.TensorInfo, n int) bool {
	for _, d := range t.Dims {
		if d == uint64(n) {
			return true
		}
	}
	return false
}
