// Package convert turns Hugging Face LLaMA-family checkpoints (config.json,
// safetensors, tokenizer.model) into GGUF files with llama.cpp's tensor names
// and metadata keys, so llama.cpp and pinfer read the same file.
package convert

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/safetensors"
	"github.com/pinfer/pinfer/tokenizer"
	"github.com/schollz/progressbar/v3"
)

// Options choose the output.
type Options struct {
	// Type is the type of 2-D weights: F32 (the zero value), F16, BF16, Q8_0
	// or Q4_0. Norm vectors are always F32.
	Type ops.DType
	// Progress draws a bar on stderr over the bytes written.
	Progress bool
	// Logf receives notes such as type fallbacks; nil logs with log.Printf.
	Logf func(format string, args ...any)
}

// fileTypes are llama.cpp's general.file_type ids (LLAMA_FTYPE_*).
var fileTypes = map[ops.DType]uint32{ops.F32: 0, ops.F16: 1, ops.Q4_0: 2, ops.Q8_0: 7, ops.BF16: 32}

// Convert writes the model in hfDir to outPath as GGUF.
func Convert(hfDir, outPath string, opt Options) error {
	ftype, ok := fileTypes[opt.Type]
	if !ok {
		return fmt.Errorf("convert: output type %s is not supported (want f32, f16, bf16, q8_0 or q4_0)", opt.Type)
	}
	logf := opt.Logf
	if logf == nil {
		logf = log.Printf
	}
	hp, err := readConfig(hfDir)
	if err != nil {
		return err
	}
	vocab, err := readVocab(hfDir, hp)
	if err != nil {
		return err
	}
	st, err := safetensors.OpenDir(hfDir)
	if err != nil {
		return err
	}
	defer st.Close()

	w := gguf.NewWriter()
	if err := setMetadata(w, hfDir, hp, vocab, ftype, opt.Type); err != nil {
		return err
	}
	plan, err := planTensors(st, hp, logf)
	if err != nil {
		return err
	}
	for _, p := range plan {
		if err := p.add(w, opt.Type, logf); err != nil {
			return err
		}
	}

	var bar *progressbar.ProgressBar
	var progress func(done, total int64)
	if opt.Progress {
		progress = func(done, total int64) {
			if bar == nil {
				bar = progressbar.NewOptions64(total,
					progressbar.OptionSetWriter(os.Stderr),
					progressbar.OptionSetDescription("writing "+filepath.Base(outPath)),
					progressbar.OptionShowBytes(true),
					progressbar.OptionShowCount(),
					progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionOnCompletion(func() { fmt.Fprintln(os.Stderr) }))
			}
			bar.Set64(done)
		}
	}
	if err := w.WriteFile(outPath, progress); err != nil {
		return err
	}
	if bar != nil {
		bar.Finish()
	}
	return nil
}

type keyValue struct {
	key string
	val any
}

func setMetadata(w *gguf.Writer, dir string, hp *hparams, v tokenizer.Vocab, ftype uint32, typ ops.DType) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	u := func(n int) uint32 { return uint32(n) }
	kv := []keyValue{
		{"general.architecture", "llama"},
		{"general.name", filepath.Base(abs)},
		{"general.file_type", ftype},
		{"general.alignment", uint32(32)},
		{"llama.context_length", u(hp.nCtx)},
		{"llama.embedding_length", u(hp.nEmbd)},
		{"llama.block_count", u(hp.nLayer)},
		{"llama.feed_forward_length", u(hp.nFF)},
		{"llama.attention.head_count", u(hp.nHead)},
		{"llama.attention.head_count_kv", u(hp.nHeadKV)},
		{"llama.rope.dimension_count", u(hp.headDim)},
		{"llama.rope.freq_base", float32(hp.ropeTheta)},
		{"llama.attention.layer_norm_rms_epsilon", float32(hp.eps)},
		{"llama.vocab_size", u(hp.nVocab)},
		{"pinfer.ffn_activation", hp.act},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", v.Tokens},
		{"tokenizer.ggml.scores", v.Scores},
		{"tokenizer.ggml.token_type", v.Types},
		{"tokenizer.ggml.bos_token_id", u(v.BOS)},
		{"tokenizer.ggml.eos_token_id", u(v.EOS)},
		{"tokenizer.ggml.unknown_token_id", u(v.UNK)},
		{"tokenizer.ggml.add_bos_token", v.AddBOS},
		{"tokenizer.ggml.add_space_prefix", v.AddSpacePrefix},
	}
	if typ == ops.Q8_0 || typ == ops.Q4_0 {
		kv = append(kv, keyValue{"general.quantization_version", uint32(2)})
	}
	if hp.headDim*hp.nHead != hp.nEmbd {
		// llama.cpp assumes n_embd/n_head unless these say otherwise.
		kv = append(kv, keyValue{"llama.attention.key_length", u(hp.headDim)},
			keyValue{"llama.attention.value_length", u(hp.headDim)})
	}
	if hp.slidingWindow > 0 {
		// llama.cpp's llama architecture has no window; pinfer applies it.
		kv = append(kv, keyValue{"pinfer.attention.sliding_window", u(hp.slidingWindow)})
	}
	for _, e := range kv {
		if err := w.Set(e.key, e.val); err != nil {
			return err
		}
	}
	return nil
}

// readVocab loads tokenizer.model, pads it to vocab_size as llama.cpp's
// converter does, and lets config.json's bos/eos ids win.
func readVocab(dir string, hp *hparams) (tokenizer.Vocab, error) {
	path := filepath.Join(dir, "tokenizer.model")
	v, err := tokenizer.ReadModelProto(path)
	if err != nil {
		return v, err
	}
	if len(v.Tokens) > hp.nVocab {
		return v, fmt.Errorf("%s: %d tokens, more than config.json's vocab_size %d", path, len(v.Tokens), hp.nVocab)
	}
	for i := len(v.Tokens); i < hp.nVocab; i++ {
		v.Tokens = append(v.Tokens, fmt.Sprintf("[PAD%d]", i))
		v.Scores = append(v.Scores, -1000)
		v.Types = append(v.Types, tokenUnused)
	}
	if hp.bos >= 0 {
		v.BOS = hp.bos
	}
	if hp.eos >= 0 {
		v.EOS = hp.eos
	}
	for _, id := range []struct {
		name string
		id   int
	}{{"bos", v.BOS}, {"eos", v.EOS}, {"unknown", v.UNK}} {
		if id.id < 0 || id.id >= hp.nVocab {
			return v, fmt.Errorf("%s: %s token id %d is outside the vocabulary of %d", dir, id.name, id.id, hp.nVocab)
		}
	}
	return v, nil
}

// tokenUnused is SentencePiece's UNUSED piece type, as GGUF stores it.
const tokenUnused = 5

// tensorPlan is one GGUF tensor and where its rows come from.
type tensorPlan struct {
	src   *safetensors.Tensor
	name  string
	rows  int // 1 for vectors
	cols  int
	heads int // >0: permute rows per head from rotate-half to interleaved
}

func planTensors(st *safetensors.Dir, hp *hparams, logf func(string, ...any)) ([]tensorPlan, error) {
	used := map[string]bool{}
	var plan []tensorPlan
	add := func(hf, name string, shape []int, heads int) error {
		t, err := st.Tensor(hf)
		if err != nil {
			return err
		}
		used[hf] = true
		if !equal(t.Shape, shape) {
			return fmt.Errorf("%s: tensor %q has shape %v, expected %v", t.File, hf, t.Shape, shape)
		}
		if t.DType != "F32" && t.DType != "F16" && t.DType != "BF16" {
			return fmt.Errorf("%s: tensor %q has dtype %s, want F32, F16 or BF16", t.File, hf, t.DType)
		}
		p := tensorPlan{src: t, name: name, rows: 1, cols: shape[0], heads: heads}
		if len(shape) == 2 {
			p.rows, p.cols = shape[0], shape[1]
		}
		plan = append(plan, p)
		return nil
	}
	d, q, kv := hp.nEmbd, hp.nHead*hp.headDim, hp.nHeadKV*hp.headDim
	if err := add("model.embed_tokens.weight", "token_embd.weight", []int{hp.nVocab, d}, 0); err != nil {
		return nil, err
	}
	for i := 0; i < hp.nLayer; i++ {
		hf := fmt.Sprintf("model.layers.%d.", i)
		blk := fmt.Sprintf("blk.%d.", i)
		for _, m := range []struct {
			hf, gg string
			shape  []int
			heads  int
		}{
			{"input_layernorm", "attn_norm", []int{d}, 0},
			{"self_attn.q_proj", "attn_q", []int{q, d}, hp.nHead},
			{"self_attn.k_proj", "attn_k", []int{kv, d}, hp.nHeadKV},
			{"self_attn.v_proj", "attn_v", []int{kv, d}, 0},
			{"self_attn.o_proj", "attn_output", []int{d, q}, 0},
			{"post_attention_layernorm", "ffn_norm", []int{d}, 0},
			{"mlp.gate_proj", "ffn_gate", []int{hp.nFF, d}, 0},
			{"mlp.up_proj", "ffn_up", []int{hp.nFF, d}, 0},
			{"mlp.down_proj", "ffn_down", []int{d, hp.nFF}, 0},
		} {
			if err := add(hf+m.hf+".weight", blk+m.gg+".weight", m.shape, m.heads); err != nil {
				return nil, err
			}
		}
	}
	if err := add("model.norm.weight", "output_norm.weight", []int{d}, 0); err != nil {
		return nil, err
	}
	const head = "lm_head.weight"
	switch {
	case hp.tied:
		used[head] = true // transformers ignores a stored copy of a tied head
	case !st.Has(head):
		logf("%s: no %s; the output projection will reuse token_embd", st.Path, head)
	default:
		if err := add(head, "output.weight", []int{hp.nVocab, d}, 0); err != nil {
			return nil, err
		}
	}
	for _, n := range st.Names() {
		// Old checkpoints store RoPE's inverse frequencies, derived from rope_theta.
		if !used[n] && !isInvFreq(n) {
			return nil, fmt.Errorf("%s: tensor %q has no place in a LLaMA GGUF (model_type %q)", st.Path, n, hp.modelType)
		}
	}
	return plan, nil
}

func isInvFreq(name string) bool {
	return filepath.Ext(name) == ".inv_freq"
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// add queues the tensor. A HF [out, in] matrix is GGUF dims [in, out] with
// the same row-major bytes, so rows are copied in order (bar the permutation).
func (p tensorPlan) add(w *gguf.Writer, want ops.DType, logf func(string, ...any)) error {
	typ := want
	if len(p.src.Shape) == 1 {
		typ = ops.F32 // norms are tiny and precision-sensitive
	} else if _, err := typ.RowBytes(p.cols); err != nil {
		logf("%s: row length %d is not a multiple of %d, writing f16 instead of %s", p.name, p.cols, typ.BlockElems(), typ)
		typ = ops.F16
	}
	dims := []uint64{uint64(p.cols)}
	if len(p.src.Shape) == 2 {
		dims = append(dims, uint64(p.rows))
	}
	return w.AddTensor(p.name, typ, dims, func(out io.Writer) error {
		if err := p.write(out, typ); err != nil {
			return fmt.Errorf("%s: tensor %q: %w", p.src.File, p.src.Name, err)
		}
		return nil
	})
}

// srcRow maps an output row to its source row. HF orders each head's rows as
// [first halves | second halves] for rotate-half RoPE; GGUF interleaves them:
// output row 2i of a head is source row i, row 2i+1 is source row i+hd/2.
func (p tensorPlan) srcRow(r int) int {
	if p.heads == 0 {
		return r
	}
	hd := p.rows / p.heads
	h, j := r/hd, r%hd
	return h*hd + j/2 + (j%2)*(hd/2)
}

// write streams one row at a time, so memory stays at a row plus an output
// chunk whatever the tensor's size.
func (p tensorPlan) write(out io.Writer, typ ops.DType) error {
	rowBytes, err := typ.RowBytes(p.cols)
	if err != nil {
		return err
	}
	inBytes := len(p.src.Data) / p.rows
	row := make([]float32, p.cols)
	perChunk := max(1, (1<<20)/rowBytes)
	chunk := make([]byte, 0, perChunk*rowBytes)
	for r := 0; r < p.rows; r++ {
		s := p.srcRow(r)
		if err := safetensors.Decode(p.src.DType, row, p.src.Data[s*inBytes:(s+1)*inBytes]); err != nil {
			return err
		}
		n := len(chunk)
		chunk = chunk[:n+rowBytes]
		if err := ops.Quantize(typ, chunk[n:], row); err != nil {
			return err
		}
		if len(chunk)+rowBytes > cap(chunk) || r == p.rows-1 {
			if _, err := out.Write(chunk); err != nil {
				return err
			}
			chunk = chunk[:0]
		}
	}
	return nil
}
