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

// Target is where one predictor goes in the file: blk.Block.fc1/fc2, or,
// for expert Expert of a mixture of Experts (Experts > 0), its slice of
// blk.Block.ffn_fc1_exps/ffn_fc2_exps.
type Target struct{ Block, Expert, Experts int }

// Write copies src's metadata and tensors to out with the PWRI magic, adds
// each plain FFN's predictor as blk.N.fc1.weight {n_embd, R} and
// blk.N.fc2.weight {R, n_ff} in f16, and each mixture's experts' predictors
// stacked as llama.cpp stacks expert weights, blk.N.ffn_fc1_exps.weight
// {n_embd, R, n_expert} and blk.N.ffn_fc2_exps.weight {R, n_ff, n_expert},
// with R the block's largest rank: a smaller one is padded with zero hidden
// units, which relu maps to 0 (replacing any predictors already there). It
// sets powerinfer.sparse_threshold to 0 (the nets' cut is folded into fc2),
// and adds blk.N.ffn_down_t.weight, down stored neuron-major as PowerInfer's
// converter writes it, where the file has only ffn_down.
func Write(src *gguf.File, nets []*Net, at []Target, out string, progress func(done, total int64)) error {
	if len(nets) != len(at) {
		return fmt.Errorf("%s: %d predictors for %d layers", out, len(nets), len(at))
	}
	blocks, err := stackExperts(nets, at, out)
	if err != nil {
		return err
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
	for _, t := range at {
		for _, name := range predictorNames(t) {
			ours[name] = true
		}
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
		t := at[k]
		names := predictorNames(t)
		if t.Experts == 0 {
			if err := w.AddTensor(names[0], ops.F16, []uint64{uint64(n.In), uint64(n.Hidden)}, f16Writer(n.W1)); err != nil {
				return err
			}
			if err := w.AddTensor(names[1], ops.F16, []uint64{uint64(n.Hidden), uint64(n.Out)}, f16Writer(n.W2)); err != nil {
				return err
			}
			continue
		}
		if t.Expert != 0 {
			continue // the block's tensors go out once, at its expert 0
		}
		s := blocks[t.Block]
		if err := w.AddTensor(names[0], ops.F16, []uint64{uint64(n.In), uint64(s.rank), uint64(t.Experts)}, f16Writer(s.fc1)); err != nil {
			return err
		}
		if err := w.AddTensor(names[1], ops.F16, []uint64{uint64(s.rank), uint64(n.Out), uint64(t.Experts)}, f16Writer(s.fc2)); err != nil {
			return err
		}
	}
	return w.WriteFile(out, progress)
}

// predictorNames are the fc1 and fc2 tensor names of t.
func predictorNames(t Target) [2]string {
	if t.Experts > 0 {
		return [2]string{fmt.Sprintf("blk.%d.ffn_fc1_exps.weight", t.Block), fmt.Sprintf("blk.%d.ffn_fc2_exps.weight", t.Block)}
	}
	return [2]string{fmt.Sprintf("blk.%d.fc1.weight", t.Block), fmt.Sprintf("blk.%d.fc2.weight", t.Block)}
}

// stacked is one block's experts' predictors, laid out as the file stores
// them: expert after expert, each rank rows of fc1 and n_ff rows of fc2.
type stacked struct {
	rank     int
	fc1, fc2 []float32
}

// stackExperts stacks each mixture's predictors, which must cover its
// experts exactly once and share their input and output widths.
func stackExperts(nets []*Net, at []Target, out string) (map[int]*stacked, error) {
	byBlock := map[int][]*Net{}
	for k, t := range at {
		if t.Experts == 0 {
			continue
		}
		b := byBlock[t.Block]
		if b == nil {
			b = make([]*Net, t.Experts)
			byBlock[t.Block] = b
		}
		if len(b) != t.Experts || t.Expert < 0 || t.Expert >= t.Experts || b[t.Expert] != nil {
			return nil, fmt.Errorf("%s: block %d: expert %d of %d is out of place or given twice", out, t.Block, t.Expert, t.Experts)
		}
		b[t.Expert] = nets[k]
	}
	res := map[int]*stacked{}
	for blk, b := range byBlock {
		s := &stacked{}
		for e, n := range b {
			if n == nil {
				return nil, fmt.Errorf("%s: block %d: expert %d has no predictor", out, blk, e)
			}
			if n.In != b[0].In || n.Out != b[0].Out {
				return nil, fmt.Errorf("%s: block %d: expert %d's predictor is %dx%d, expert 0's %dx%d", out, blk, e, n.In, n.Out, b[0].In, b[0].Out)
			}
			s.rank = max(s.rank, n.Hidden)
		}
		for _, n := range b {
			fc1 := make([]float32, s.rank*n.In)
			copy(fc1, n.W1)
			s.fc1 = append(s.fc1, fc1...)
			fc2 := make([]float32, n.Out*s.rank)
			for o := range n.Out {
				copy(fc2[o*s.rank:], n.w2(o))
			}
			s.fc2 = append(s.fc2, fc2...)
		}
		res[blk] = s
	}
	return res, nil
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
