package train

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
)

// Write copies src's metadata and tensors to out with the PWRI magic, adds
// each layer's predictor as blk.N.fc1.weight {n_embd, R} and
// blk.N.fc2.weight {R, n_ff} in f16 (replacing any already there), sets
// powerinfer.sparse_threshold to 0 (the nets' cut is folded into fc2), and
// adds blk.N.ffn_down_t.weight, down stored neuron-major as PowerInfer's
// converter writes it, where the file has only ffn_down.
func Write(src *gguf.File, nets []*Net, layers []int, out string, progress func(done, total int64)) error {
	if len(nets) != len(layers) {
		return fmt.Errorf("%s: %d predictors for %d layers", out, len(nets), len(layers))
	}
	w := gguf.NewWriter()
	w.Magic = "PWRI"
	for _, kv := range src.KVs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return fmt.Errorf("%s: %v", src.Path, err)
		}
	}
	if err := w.Set("powerinfer.sparse_threshold", float32(0)); err != nil {
		return err
	}
	ours := map[string]bool{}
	for _, l := range layers {
		ours[fmt.Sprintf("blk.%d.fc1.weight", l)] = true
		ours[fmt.Sprintf("blk.%d.fc2.weight", l)] = true
	}
	for i := range src.Tensors {
		t := &src.Tensors[i]
		if ours[t.Name] {
			continue
		}
		data := src.Data(t)
		if err := w.AddTensor(t.Name, t.Type, t.Dims, bytesWriter(data)); err != nil {
			return fmt.Errorf("%s: %v", src.Path, err)
		}
		if err := addDownT(w, src, t); err != nil {
			return err
		}
	}
	for k, n := range nets {
		l := layers[k]
		if err := w.AddTensor(fmt.Sprintf("blk.%d.fc1.weight", l), ops.F16, []uint64{uint64(n.In), uint64(n.Hidden)}, f16Writer(n.W1)); err != nil {
			return err
		}
		if err := w.AddTensor(fmt.Sprintf("blk.%d.fc2.weight", l), ops.F16, []uint64{uint64(n.Hidden), uint64(n.Out)}, f16Writer(n.W2)); err != nil {
			return err
		}
	}
	return w.WriteFile(out, progress)
}

// addDownT adds blk.N.ffn_down_t.weight after blk.N.ffn_down.weight when
// the file lacks it, transposed once here rather than at every load.
func addDownT(w *gguf.Writer, src *gguf.File, t *gguf.TensorInfo) error {
	base, ok := strings.CutSuffix(t.Name, ".ffn_down.weight")
	if !ok || !strings.HasPrefix(base, "blk.") {
		return nil
	}
	name := base + ".ffn_down_t.weight"
	if _, has := src.Tensor(name); has {
		return nil
	}
	if len(t.Dims) != 2 {
		return fmt.Errorf("%s: tensor %s has dims %v, want a matrix", src.Path, t.Name, t.Dims)
	}
	m, err := ops.NewMatrix(t.Type, int(t.Dims[1]), int(t.Dims[0]), src.Data(t))
	if err != nil {
		return fmt.Errorf("%s: tensor %s: %v", src.Path, t.Name, err)
	}
	tr, err := ops.Transpose(m)
	if err != nil {
		return fmt.Errorf("%s: tensor %s: %v", src.Path, t.Name, err)
	}
	return w.AddTensor(name, tr.Type, []uint64{uint64(tr.Cols), uint64(tr.Rows)}, bytesWriter(tr.Data))
}

func bytesWriter(b []byte) func(io.Writer) error {
	return func(o io.Writer) error { _, err := o.Write(b); return err }
}

func f16Writer(v []float32) func(io.Writer) error {
	return func(o io.Writer) error {
		b := make([]byte, 2*len(v))
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("predictor weight %d is %v", i, x)
			}
			binary.LittleEndian.PutUint16(b[2*i:], ops.F32ToF16(x))
		}
		_, err := o.Write(b)
		return err
	}
}
