// Package synth writes synthetic ReLU-sparse models with random weights, in
// the layout PowerInfer's converter writes (PWRI magic, fc1/fc2 predictors,
// ffn_down_t), so that speed can be measured at any shape without a real
// checkpoint.
//
// The weights are random but their sparsity is not. Every token embedding
// carries a constant component A on dimension 0, which the residual keeps
// because every other block output is small. After rms_norm that component
// is a near-constant c, so the dimension-0 entry of a gate row acts as a
// bias: neuron i fires when N(0, σ) > -b_i, that is with the probability p_i
// chosen for it. The p_i follow a power law with mean Active. The predictor
// gets the same treatment: one fc1 unit reads dimension 0 and stays near 1,
// and fc2's weight on it sets each neuron's chance of being predicted.
package synth

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/quantize"
)

// Shape is a model's size.
type Shape struct {
	NEmbd, NFF, NLayer, NHead, NKVHead, Vocab int
	Rank                                      int // predictor rank
}

// Presets are ReluLLaMA's shapes.
var Presets = map[string]Shape{
	"7b":  {NEmbd: 4096, NFF: 11008, NLayer: 32, NHead: 32, NKVHead: 32, Vocab: 32000, Rank: 256},
	"13b": {NEmbd: 5120, NFF: 13824, NLayer: 40, NHead: 40, NKVHead: 40, Vocab: 32000, Rank: 256},
}

// Options say what to write.
type Options struct {
	Shape
	Active float64   // mean fraction of FFN neurons that fire per token
	Type   ops.DType // f16, q8_0 or q4_0 for the matrices
	Seed   uint64
	// Alpha is the power law's exponent: neuron of rank r fires with
	// probability ∝ (r+1)^-Alpha before scaling to the mean.
	Alpha float64
}

// Check validates the options.
func (o *Options) Check() error {
	s := o.Shape
	// Named by gen's flags; the vocabulary holds the 256 byte tokens and 4 more.
	for _, f := range []struct {
		flag     string
		v, least int
		of32     bool // q8_0 and q4_0 rows are blocks of 32
	}{{"--n-embd", s.NEmbd, 32, true}, {"--n-ff", s.NFF, 32, true}, {"--n-layer", s.NLayer, 1, false}, {"--n-head", s.NHead, 1, false},
		{"--n-kv-head", s.NKVHead, 1, false}, {"--vocab", s.Vocab, 260, false}, {"--rank", s.Rank, 32, true}} {
		if f.v < f.least {
			return fmt.Errorf("%s %d: want at least %d", f.flag, f.v, f.least)
		}
		if f.of32 && f.v%32 != 0 {
			return fmt.Errorf("%s %d: want a multiple of 32", f.flag, f.v)
		}
	}
	switch {
	case s.NEmbd%s.NHead != 0 || s.NHead%s.NKVHead != 0:
		return fmt.Errorf("n_embd %d must divide into n_head %d heads, and n_head into n_kv_head %d groups", s.NEmbd, s.NHead, s.NKVHead)
	case (s.NEmbd/s.NHead)%2 != 0:
		return fmt.Errorf("the head size %d must be even for RoPE", s.NEmbd/s.NHead)
	case !(o.Active > 0 && o.Active <= 1): // NaN too
		return fmt.Errorf("--active %v must be in (0, 1]", o.Active)
	case o.Type != ops.F16 && o.Type != ops.Q8_0 && o.Type != ops.Q4_0 && o.Type != ops.F32:
		return fmt.Errorf("--type %s: want f32, f16, q8_0 or q4_0", o.Type)
	}
	return nil
}

// Bytes is the size the weights will take.
func (o *Options) Bytes() int64 {
	var n int64
	for _, t := range o.tensors() {
		n += int64(t.size())
	}
	return n
}

// Write streams the model to path; progress may be nil.
func Write(path string, o Options, progress func(done, total int64)) error {
	if err := o.Check(); err != nil {
		return err
	}
	if o.Alpha == 0 {
		o.Alpha = 1
	}
	w := gguf.NewWriter()
	w.Magic = "PWRI"
	for _, kv := range o.metadata() {
		if err := w.Set(kv.key, kv.val); err != nil {
			return fmt.Errorf("%s: metadata %s: %v", path, kv.key, err)
		}
	}
	for _, t := range o.tensors() {
		t := t
		if err := w.AddTensor(t.name, t.typ, t.dims, func(out io.Writer) error { return o.emit(t, out) }); err != nil {
			return err
		}
	}
	return w.WriteFile(path, progress)
}

type kv struct {
	key string
	val any
}

func (o *Options) metadata() []kv {
	s := o.Shape
	tokens, scores, types := vocab(s.Vocab)
	ftype, _ := quantize.FileType(o.Type)
	return []kv{
		{"general.architecture", "llama"},
		{"general.name", fmt.Sprintf("synthetic-relu-%dx%d-active%.2f", s.NLayer, s.NEmbd, o.Active)},
		{"general.file_type", ftype},
		{"llama.context_length", uint32(4096)},
		{"llama.embedding_length", uint32(s.NEmbd)},
		{"llama.block_count", uint32(s.NLayer)},
		{"llama.feed_forward_length", uint32(s.NFF)},
		{"llama.attention.head_count", uint32(s.NHead)},
		{"llama.attention.head_count_kv", uint32(s.NKVHead)},
		{"llama.rope.dimension_count", uint32(s.NEmbd / s.NHead)},
		{"llama.rope.freq_base", float32(10000)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.vocab_size", uint32(s.Vocab)},
		{"pinfer.ffn_activation", "relu"},
		{"pinfer.synthetic.active", float32(o.Active)},
		{"pinfer.synthetic.seed", o.Seed},
		{"powerinfer.sparse_threshold", float32(0)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.bos_token_id", uint32(1)},
		{"tokenizer.ggml.eos_token_id", uint32(2)},
		{"tokenizer.ggml.unknown_token_id", uint32(0)},
		{"tokenizer.ggml.add_bos_token", true},
	}
}

// vocab is byte fallback plus filler pieces: enough for any text to encode.
func vocab(n int) ([]string, []float32, []int32) {
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6)
	}
	for i := len(tokens); i < n; i++ {
		tokens = append(tokens, fmt.Sprintf("▁tok%d", i))
		types = append(types, 1)
	}
	scores := make([]float32, n)
	for i := range scores {
		scores[i] = -float32(i)
	}
	return tokens, scores, types
}

// tensor is one weight to write: rows of cols, each produced by gen.
type tensor struct {
	name  string
	typ   ops.DType
	dims  []uint64
	rows  int
	cols  int
	layer int
	kind  string
}

func (t tensor) size() int {
	b, _ := t.typ.RowBytes(t.cols)
	return b * t.rows
}

func (o *Options) tensors() []tensor {
	s := o.Shape
	hd := s.NEmbd / s.NHead
	kvDim := hd * s.NKVHead
	mat := func(name, kind string, layer, rows, cols int) tensor {
		return tensor{name: name, typ: o.Type, dims: []uint64{uint64(cols), uint64(rows)}, rows: rows, cols: cols, layer: layer, kind: kind}
	}
	vec := func(name string, layer, n int) tensor {
		return tensor{name: name, typ: ops.F32, dims: []uint64{uint64(n)}, rows: 1, cols: n, layer: layer, kind: "ones"}
	}
	ts := []tensor{mat("token_embd.weight", "embd", -1, s.Vocab, s.NEmbd)}
	for l := 0; l < s.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			vec(p+"attn_norm.weight", l, s.NEmbd),
			mat(p+"attn_q.weight", "proj", l, s.NEmbd, s.NEmbd),
			mat(p+"attn_k.weight", "proj", l, kvDim, s.NEmbd),
			mat(p+"attn_v.weight", "proj", l, kvDim, s.NEmbd),
			mat(p+"attn_output.weight", "small", l, s.NEmbd, s.NEmbd),
			vec(p+"ffn_norm.weight", l, s.NEmbd),
			mat(p+"ffn_gate.weight", "gate", l, s.NFF, s.NEmbd),
			mat(p+"ffn_up.weight", "proj", l, s.NFF, s.NEmbd),
			mat(p+"ffn_down_t.weight", "small", l, s.NFF, s.NEmbd),
			mat(p+"fc1.weight", "fc1", l, s.Rank, s.NEmbd),
			mat(p+"fc2.weight", "fc2", l, s.NFF, s.Rank),
		)
	}
	return append(ts, vec("output_norm.weight", -1, s.NEmbd), mat("output.weight", "proj", -1, s.Vocab, s.NEmbd))
}

// The residual's constant component, and what it becomes after rms_norm.
func (o *Options) embConst() float64 { return math.Sqrt(float64(o.NEmbd)) / 2 }
func (o *Options) normConst() float64 {
	d := float64(o.NEmbd)
	a := o.embConst()
	return a / math.Sqrt((a*a+(d-1))/d)
}

// fireProbs are one layer's per-neuron firing probabilities: a power law
// over a random order of neurons, scaled to mean Active.
func (o *Options) fireProbs(layer int) []float64 {
	n := o.NFF
	rng := rand.New(rand.NewPCG(o.Seed, uint64(layer)*7919+1))
	order := rng.Perm(n)
	raw := make([]float64, n)
	for r := range raw {
		raw[r] = math.Pow(float64(r+1), -o.Alpha)
	}
	// Scale so the clipped mean is Active: bisect the scale.
	lo, hi := 0.0, 1e9
	for it := 0; it < 100; it++ {
		mid := (lo + hi) / 2
		var sum float64
		for _, v := range raw {
			sum += math.Min(0.99, v*mid)
		}
		if sum/float64(n) < o.Active {
			lo = mid
		} else {
			hi = mid
		}
	}
	p := make([]float64, n)
	for r, v := range raw {
		p[order[r]] = math.Max(1e-4, math.Min(0.99, v*lo))
	}
	return p
}

func (o *Options) emit(t tensor, out io.Writer) error {
	if t.kind == "ones" {
		buf := make([]byte, 4*t.cols)
		for i := 0; i < t.cols; i++ {
			putF32(buf[4*i:], 1)
		}
		_, err := out.Write(buf)
		return err
	}
	var probs []float64
	if t.kind == "gate" || t.kind == "fc2" {
		probs = o.fireProbs(t.layer)
	}
	h := fnv.New64a()
	h.Write([]byte(t.name))
	base := o.Seed ^ h.Sum64()
	rowBytes, _ := t.typ.RowBytes(t.cols)
	const chunk = 64
	row := make([]float32, t.cols)
	buf := make([]byte, rowBytes*chunk)
	for r0 := 0; r0 < t.rows; r0 += chunk {
		n := min(chunk, t.rows-r0)
		for k := 0; k < n; k++ {
			r := r0 + k
			o.fillRow(t, r, rand.New(rand.NewPCG(base, uint64(r))), probs, row)
			if err := ops.Quantize(t.typ, buf[k*rowBytes:(k+1)*rowBytes], row); err != nil {
				return fmt.Errorf("%s: %v", t.name, err)
			}
		}
		if _, err := out.Write(buf[:n*rowBytes]); err != nil {
			return err
		}
	}
	return nil
}

// fillRow makes one row of a tensor, by the tensor's role.
func (o *Options) fillRow(t tensor, r int, rng *rand.Rand, probs []float64, row []float32) {
	d := float64(t.cols)
	std := 1 / math.Sqrt(d)
	switch t.kind {
	case "small": // block outputs stay small, so the residual keeps its constant
		std *= 0.05
	case "fc2":
		std = 0.5 / math.Sqrt(d)
	}
	for i := range row {
		row[i] = float32(rng.NormFloat64() * std)
	}
	switch t.kind {
	case "embd":
		for i := range row {
			row[i] = float32(rng.NormFloat64())
		}
		row[0] = float32(o.embConst())
	case "gate":
		// Random part: N(0,1/d) weights over a normed input of ~unit spread.
		row[0] = float32(invNormal(probs[r]) * 0.9 / o.normConst())
	case "fc1":
		if r == 0 { // the unit that reads the constant: h0 ≈ 1
			clear(row)
			row[0] = float32(1 / o.embConst())
		}
	case "fc2":
		// Noise from the other units: Σ h_j² ≈ ·E[relu(N(0,1.25))²].
		noise := 0.5 / math.Sqrt(d) * math.Sqrt((d-1)*1.25/2)
		row[0] = float32(invNormal(probs[r]) * noise)
	}
}

// invNormal is Φ⁻¹(p), by bisection on the error function.
func invNormal(p float64) float64 {
	lo, hi := -10.0, 10.0
	for it := 0; it < 80; it++ {
		mid := (lo + hi) / 2
		if 0.5*math.Erfc(-mid/math.Sqrt2) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

func putF32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

// Describe lists the tensors by size, for a summary.
func (o *Options) Describe() string {
	ts := o.tensors()
	sort.SliceStable(ts, func(a, b int) bool { return ts[a].size() > ts[b].size() })
	return fmt.Sprintf("%d tensors, %.2f GB", len(ts), float64(o.Bytes())/1e9)
}
