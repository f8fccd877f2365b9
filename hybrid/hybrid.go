// Package hybrid decides what a GPU backend holds for a loaded model: it
// maps a placement plan (or a .gpuidx side file) onto the program's weight
// matrices, makes and caches the index when none is given, and makes the
// llama.cpp -ngl layer split that the hybrid placement is measured against.
// It is pure Go; the backend that uploads the result is ops/cuda's, behind
// the cuda build tag.
package hybrid

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/ops/cuda"
	"github.com/pinfer/pinfer/placement"
)

// part names the placement part a matrix read by ops.MatMul belongs to:
// output for the output node (output.weight, or token_embd.weight when
// tied), else as placement.FromGGUF groups its tensor.
func part(op, name string) string {
	if op == "output" {
		return "output"
	}
	return placement.MatMulPart(name)
}

// Resident maps plan onto p's matrices: the dense parts it names, for the
// matmul and output nodes, the predictors' fc1/fc2 and a mixture of
// experts' router and experts (each expert's gate, up and down as its own
// matrix, ops.ExpertRows), and for every sparse_ffn node its layer's GPU
// neurons.
func Resident(p *graph.Program, plan *placement.Plan) (*cuda.Residency, error) {
	onGPU := map[string]bool{}
	for _, d := range plan.Dense {
		onGPU[d] = true
	}
	hot := map[int]placement.LayerPlan{}
	for _, l := range plan.Layers {
		hot[l.Index] = l
	}
	r := &cuda.Residency{}
	seen := map[*ops.Matrix]bool{}
	dense := func(m *ops.Matrix) {
		if !seen[m] {
			seen[m] = true
			r.Dense = append(r.Dense, m)
		}
	}
	for _, n := range p.Nodes {
		switch {
		case n.Op.Name == "matmul" || n.Op.Name == "output":
			if w := n.W[0]; w != nil && w.M != nil && onGPU[part(n.Op.Name, w.Name)] {
				dense(w.M)
			}
		case n.Op.Name == "moe":
			router := n.W[0]
			if !onGPU[part(n.Op.Name, router.Name)] { // its block's exps
				continue
			}
			dense(router.M)
			nE := router.M.Rows
			for _, w := range n.W[1:4] {
				for e := range nE {
					dense(ops.ExpertRows(w.M, e, w.M.Rows/nE))
				}
			}
		case n.Op.Name == "sparse_ffn" && len(n.Layers) == 1:
			l := n.Layers[0]
			if onGPU["blk."+strconv.Itoa(l.Index)+".pred"] && l.FC1 != nil && l.FC2 != nil {
				dense(l.FC1)
				dense(l.FC2)
			}
			lp, ok := hot[l.Index]
			if !ok || len(lp.GPU) == 0 {
				continue
			}
			if lp.NFF != l.NFF {
				return nil, fmt.Errorf("%s: the GPU index gives layer %d %d neurons, the model %d", n.Where, l.Index, lp.NFF, l.NFF)
			}
			down := slot(n, "down")
			if down == nil {
				return nil, fmt.Errorf("%s: sparse_ffn has no down matrix", n.Where)
			}
			r.FFNs = append(r.FFNs, cuda.HotFFN{Gate: l.Gate, Up: l.Up, Down: down, GateBias: l.GateBias,
				Act: l.Act, Threshold: l.Threshold, Hot: lp.GPU})
		}
	}
	return r, r.Check()
}

func slot(n *graph.Node, name string) *ops.Matrix {
	for i, s := range n.Op.Weights {
		if s.Name == name && i < len(n.W) && n.W[i] != nil {
			return n.W[i].M
		}
	}
	return nil
}

// Split is llama.cpp's -ngl placement: whole layers, the attention with
// the full FFN, from the last layer down while they fit, then the output
// once every layer is on the GPU. Predictors stay on the CPU: this mode
// runs dense.
func Split(m *placement.Model, budget uint64) *placement.Plan {
	p := &placement.Plan{Budget: budget}
	parts := map[int][]placement.Part{}
	var output *placement.Part
	for i, pt := range m.Parts {
		switch {
		case pt.Name == "output":
			output = &m.Parts[i]
		case pt.Layer >= 0 && !strings.HasSuffix(pt.Name, ".pred"):
			parts[pt.Layer] = append(parts[pt.Layer], pt)
		}
	}
	// Every block, whether its FFN is placed by neuron or (a mixture of
	// experts) as a part.
	neurons := map[int]placement.Layer{}
	blocks := map[int]bool{}
	for _, l := range m.Layers {
		neurons[l.Index], blocks[l.Index] = l, true
	}
	for i := range parts {
		blocks[i] = true
	}
	all := true
	for _, i := range slices.Backward(slices.Sorted(maps.Keys(blocks))) {
		l, sparse := neurons[i]
		bytes := l.NeuronBytes * uint64(len(l.Rates))
		for _, pt := range parts[i] {
			bytes += pt.Bytes
		}
		if p.Used+bytes > budget {
			all = false
			break
		}
		p.Used += bytes
		for _, pt := range parts[i] {
			p.Dense = append(p.Dense, pt.Name)
		}
		if sparse {
			ids := make([]int32, len(l.Rates))
			for k := range ids {
				ids[k] = int32(k)
			}
			p.Layers = append(p.Layers, placement.LayerPlan{Index: i, NFF: len(l.Rates), GPU: ids})
		}
	}
	if all && output != nil && p.Used+output.Bytes <= budget {
		p.Used += output.Bytes
		p.Dense = append(p.Dense, output.Name)
	}
	return p
}

// FromIndex turns a .gpuidx's content back into a plan. An index that
// PowerInfer wrote names no dense parts: only its neurons go to the GPU.
func FromIndex(ix *placement.Index) *placement.Plan {
	p := &placement.Plan{Budget: ix.VRAMCapacity, Dense: append([]string{}, ix.Dense...)}
	for _, l := range ix.Layers {
		p.Layers = append(p.Layers, placement.LayerPlan{Index: l.Index, NFF: l.NFF, GPU: append([]int32{}, l.Bucket...)})
	}
	return p
}
