package placement

import (
	"encoding/binary"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
)

// Index is the content of PowerInfer's .gpuidx side file: a GGUF with magic
// PWRI holding, per layer, blk.N.gpu_idx (i32[n_ff], 1 for a neuron on the
// GPU) and blk.N.gpu_bucket (the ascending ids of those neurons), and the
// budget it was made for as split.vram_capacity. Dense, pinfer's own key
// (pinfer.gpu_dense), names the dense parts placed on the GPU; PowerInfer
// ignores it, and files that lack it leave it nil.
type Index struct {
	VRAMCapacity uint64
	Dense        []string
	Layers       []IndexLayer // numeric order
}

// IndexLayer is one layer of an Index.
type IndexLayer struct {
	Index  int
	NFF    int
	Bucket []int32 // ascending neuron ids on the GPU
}

// Index turns a plan into its side file's content.
func (p *Plan) Index() *Index {
	ix := &Index{VRAMCapacity: p.Budget, Dense: append([]string{}, p.Dense...)}
	for _, l := range p.Layers {
		ix.Layers = append(ix.Layers, IndexLayer{Index: l.Index, NFF: l.NFF, Bucket: append([]int32{}, l.GPU...)})
	}
	return ix
}

// WriteIndex writes ix to path.
func WriteIndex(path string, ix *Index) error {
	w := gguf.NewWriter()
	w.Magic = "PWRI"
	layers := slices.Clone(ix.Layers)
	sort.Slice(layers, func(a, b int) bool { return layers[a].Index < layers[b].Index })
	for _, kv := range []struct {
		k string
		v any
	}{{"general.architecture", "generic.gpu_index"}, {"generic.gpu_index.block_count", uint32(len(layers))},
		{"split.vram_capacity", ix.VRAMCapacity}, {"pinfer.gpu_dense", append([]string{}, ix.Dense...)}} {
		if err := w.Set(kv.k, kv.v); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
	}
	for _, l := range layers {
		mask := make([]int32, l.NFF)
		for _, id := range l.Bucket {
			if id < 0 || int(id) >= l.NFF {
				return fmt.Errorf("%s: layer %d: neuron %d of %d", path, l.Index, id, l.NFF)
			}
			mask[id] = 1
		}
		for _, t := range []struct {
			name string
			data []int32
		}{{fmt.Sprintf("blk.%d.gpu_idx", l.Index), mask}, {fmt.Sprintf("blk.%d.gpu_bucket", l.Index), l.Bucket}} {
			data := t.data
			err := w.AddTensor(t.name, ops.I32, []uint64{uint64(len(data))}, func(out io.Writer) error {
				return binary.Write(out, binary.LittleEndian, data)
			})
			if err != nil {
				return fmt.Errorf("%s: %v", path, err)
			}
		}
	}
	return w.WriteFile(path, nil)
}

var idxName = regexp.MustCompile(`^blk\.(\d+)\.(gpu_idx|gpu_bucket)$`)

// ReadIndex reads a .gpuidx file and checks that each layer's mask and
// bucket agree.
func ReadIndex(path string) (*Index, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ix := &Index{}
	if ix.VRAMCapacity, err = f.Uint("split.vram_capacity"); err != nil {
		return nil, err
	}
	if f.Has("pinfer.gpu_dense") {
		d, err := f.Strings("pinfer.gpu_dense")
		if err != nil {
			return nil, err
		}
		ix.Dense = append([]string{}, d...)
	}
	masks, buckets := map[int][]int32{}, map[int][]int32{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		m := idxName.FindStringSubmatch(t.Name)
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil || n > 1<<20 {
			return nil, fmt.Errorf("%s: tensor %s: bad block number", path, t.Name)
		}
		if t.Type != ops.I32 || len(t.Dims) != 1 {
			return nil, fmt.Errorf("%s: tensor %s: want a 1-D i32 tensor, got %s %v", path, t.Name, t.Type, t.Dims)
		}
		raw := f.Data(t)
		v := make([]int32, len(raw)/4)
		for j := range v {
			v[j] = int32(binary.LittleEndian.Uint32(raw[4*j:]))
		}
		if m[2] == "gpu_idx" {
			masks[n] = v
		} else {
			buckets[n] = v
		}
	}
	var idx []int
	for n := range masks {
		idx = append(idx, n)
	}
	sort.Ints(idx)
	for _, n := range idx {
		mask, bucket := masks[n], buckets[n]
		if bucket == nil {
			if _, ok := f.Tensor(fmt.Sprintf("blk.%d.gpu_bucket", n)); !ok {
				return nil, fmt.Errorf("%s: tensor blk.%d.gpu_bucket: missing", path, n)
			}
		}
		var want []int32
		for i, b := range mask {
			switch b {
			case 1:
				want = append(want, int32(i))
			case 0:
			default:
				return nil, fmt.Errorf("%s: tensor blk.%d.gpu_idx: element %d is %d, want 0 or 1", path, n, i, b)
			}
		}
		if !slices.Equal(want, bucket) {
			return nil, fmt.Errorf("%s: tensor blk.%d.gpu_bucket: does not list the neurons blk.%d.gpu_idx marks, in ascending order", path, n, n)
		}
		ix.Layers = append(ix.Layers, IndexLayer{Index: n, NFF: len(mask), Bucket: append([]int32{}, bucket...)})
	}
	for n := range buckets {
		if masks[n] == nil {
			return nil, fmt.Errorf("%s: tensor blk.%d.gpu_idx: missing", path, n)
		}
	}
	return ix, nil
}
