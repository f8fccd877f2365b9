// Package convert turns Hugging Face checkpoints (config.json, safetensors,
// tokenizer.model, or a byte-level BPE tokenizer.json) of the LLaMA, Mistral, Mixtral, Falcon and OPT families
// into GGUF files with llama.cpp's tensor names and metadata keys (PowerInfer's
// for OPT, which llama.cpp lacks), so llama.cpp and pinfer read the same file.
package convert

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"slices"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/outpath"
	bars "github.com/pinfer/pinfer/internal/progress"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/quantize"
	"github.com/pinfer/pinfer/safetensors"
	"github.com/pinfer/pinfer/tokenizer"
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

// Convert writes the model in hfDir to outPath as GGUF.
func Convert(hfDir, outPath string, opt Options) error {
	ftype, ok := quantize.FileType(opt.Type)
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
	vocab, err := readVocab(hfDir, hp, logf)
	if err != nil {
		return err
	}
	addEOS, err := applyAddedTokens(hfDir, &vocab, logf)
	if err != nil {
		return err
	}
	st, err := safetensors.OpenDir(hfDir)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := checkOutput(outPath, hfDir, st.Files()); err != nil {
		return err
	}

	w := gguf.NewWriter()
	if err := setMetadata(w, hfDir, hp, vocab, ftype, opt.Type); err != nil {
		return err
	}
	if addEOS != nil {
		if err := w.Set("tokenizer.ggml.add_eos_token", *addEOS); err != nil {
			return err
		}
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

	var progress func(done, total int64)
	if opt.Progress {
		var finish func()
		progress, finish = bars.Writing(outPath)
		defer finish()
	}
	return w.WriteFile(outPath, progress)
}

// inputFiles are the files of a checkpoint directory that conversion may
// read, besides its safetensors shards.
var inputFiles = []string{"config.json", "tokenizer.model", "tokenizer_config.json", "tokenizer.json", "added_tokens.json",
	"chat_template.jinja", "model.safetensors.index.json"}

// checkOutput refuses an output path that is one of the files conversion
// reads (renaming the finished GGUF over it would destroy the checkpoint),
// or one that cannot be written, before the conversion's work.
func checkOutput(outPath, dir string, shards []string) error {
	var ins []outpath.Input
	for _, n := range inputFiles {
		shards = append(shards, filepath.Join(dir, n))
	}
	for _, p := range shards {
		ins = append(ins, outpath.Input{Name: "file", Path: p})
	}
	if err := outpath.Check(outPath, ins...); err != nil {
		return fmt.Errorf("%s: %v (choose another -o)", outPath, err)
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
	kv := []keyValue{
		{"general.architecture", hp.fam.arch},
		{"general.name", filepath.Base(abs)},
		{"general.file_type", ftype},
		{"general.alignment", uint32(32)},
	}
	kv = append(kv, hp.fam.meta(hp)...)
	kv = append(kv, []keyValue{
		{"pinfer.ffn_activation", hp.act},
		{"pinfer.ffn_threshold", float32(hp.actParam)},
	}...)
	if v.Model == "gpt2" {
		bpe, err := bpeMetadata(dir, hp, v)
		if err != nil {
			return err
		}
		kv = append(kv, bpe...)
	} else {
		kv = append(kv, spmMetadata(hp, v)...)
	}
	tmpl, err := chatTemplates(dir)
	if err != nil {
		return err
	}
	kv = append(kv, tmpl...)
	if typ == ops.Q8_0 || typ == ops.Q4_0 {
		kv = append(kv, keyValue{"general.quantization_version", uint32(2)})
	}
	for _, e := range kv {
		if err := w.Set(e.key, e.val); err != nil {
			return err
		}
	}
	return nil
}

// spmMetadata is a SentencePiece ("llama") vocabulary's metadata.
func spmMetadata(hp *hparams, v tokenizer.Vocab) []keyValue {
	kv := []keyValue{
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", v.Tokens},
		{"tokenizer.ggml.scores", v.Scores},
		{"tokenizer.ggml.token_type", v.Types},
		{"tokenizer.ggml.bos_token_id", uint32(v.BOS)},
		{"tokenizer.ggml.eos_token_id", uint32(v.EOS)},
		{"tokenizer.ggml.unknown_token_id", uint32(v.UNK)},
	}
	if hp.pad >= 0 {
		kv = append(kv, keyValue{"tokenizer.ggml.padding_token_id", uint32(hp.pad)})
	}
	kv = append(kv, []keyValue{
		{"tokenizer.ggml.add_bos_token", v.AddBOS},
		{"tokenizer.ggml.add_space_prefix", v.AddSpacePrefix},
	}...)
	return kv
}

// readVocab loads tokenizer.model and fits it to vocab_size as llama.cpp's
// converter does: pieces past vocab_size are dropped with a warning, and
// missing ids become unused [PADi] tokens of score -10000. The special
// token ids come from specialTokenIDs, else from tokenizer.model; the
// padding id, when there is one, is left in hp.pad.
//
// Without tokenizer.model, a tokenizer.json makes a byte-level BPE ("gpt2")
// vocabulary instead: readBPEVocab.
func readVocab(dir string, hp *hparams, logf func(string, ...any)) (tokenizer.Vocab, error) {
	path := filepath.Join(dir, "tokenizer.model")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err == nil {
			return readBPEVocab(dir, hp, logf)
		}
	}
	v, err := tokenizer.ReadModelProto(path)
	if err != nil {
		return v, err
	}
	if len(v.Tokens) > hp.nVocab {
		logf("%s: ignoring pieces from id %d on: %d pieces, more than config.json's vocab_size %d", path, hp.nVocab, len(v.Tokens), hp.nVocab)
		v.Tokens, v.Scores, v.Types = v.Tokens[:hp.nVocab], v.Scores[:hp.nVocab], v.Types[:hp.nVocab]
	}
	for i := len(v.Tokens); i < hp.nVocab; i++ {
		v.Tokens = append(v.Tokens, fmt.Sprintf("[PAD%d]", i))
		v.Scores = append(v.Scores, -10000)
		v.Types = append(v.Types, tokenUnused)
	}
	if err := setSpecialIDs(dir, hp, &v, logf); err != nil {
		return v, err
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

// tensorPlan is one GGUF tensor and where its rows come from: one source,
// or several stacked in order (Mixtral's experts).
type tensorPlan struct {
	srcs   []*safetensors.Tensor
	name   string
	dims   []uint64 // GGUF order: dims[0] is the row length
	rows   int      // of all sources together; 1 for vectors
	cols   int
	rowMap func(r int) int // output row -> source row; nil: the same row
}

// planner collects the tensors of one checkpoint and remembers which of its
// tensors found a place, so that none is silently dropped.
type planner struct {
	st   *safetensors.Dir
	used map[string]bool
	plan []tensorPlan
	logf func(string, ...any)
}

func (p *planner) source(hf string, shape []int) (*safetensors.Tensor, error) {
	t, err := p.st.Tensor(hf)
	if err != nil {
		return nil, err
	}
	p.used[hf] = true
	if !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("%s: tensor %q has shape %v, expected %v", t.File, hf, t.Shape, shape)
	}
	if t.DType != "F32" && t.DType != "F16" && t.DType != "BF16" {
		return nil, fmt.Errorf("%s: tensor %q has dtype %s, want F32, F16 or BF16", t.File, hf, t.DType)
	}
	return t, nil
}

// add queues tensor hf, of Hugging Face shape [rows, cols] or [n], as name.
func (p *planner) add(hf, name string, shape []int, rowMap func(int) int) error {
	t, err := p.source(hf, shape)
	if err != nil {
		return err
	}
	tp := tensorPlan{srcs: []*safetensors.Tensor{t}, name: name, rows: 1, cols: shape[0], rowMap: rowMap}
	if len(shape) == 2 {
		tp.rows, tp.cols = shape[0], shape[1]
	}
	tp.dims = []uint64{uint64(tp.cols)}
	if len(shape) == 2 {
		tp.dims = append(tp.dims, uint64(tp.rows))
	}
	p.plan = append(p.plan, tp)
	return nil
}

// stack queues matrices of one shape [rows, cols] as the 3-D tensor name of
// GGUF dims {cols, rows, len(hfs)}, as llama.cpp stores experts.
func (p *planner) stack(hfs []string, name string, shape []int) error {
	tp := tensorPlan{name: name, rows: shape[0] * len(hfs), cols: shape[1],
		dims: []uint64{uint64(shape[1]), uint64(shape[0]), uint64(len(hfs))}}
	for _, hf := range hfs {
		t, err := p.source(hf, shape)
		if err != nil {
			return err
		}
		tp.srcs = append(tp.srcs, t)
	}
	p.plan = append(p.plan, tp)
	return nil
}

// output adds the output projection unless the embeddings are tied.
func (p *planner) output(hp *hparams, head string) error {
	switch {
	case hp.tied:
		p.used[head] = true // transformers ignores a stored copy of a tied head
	case !p.st.Has(head):
		p.logf("%s: no %s; the output projection will reuse token_embd", p.st.Path, head)
	default:
		return p.add(head, "output.weight", []int{hp.nVocab, hp.nEmbd}, nil)
	}
	return nil
}

// leftovers rejects tensors that found no place in the file.
func (p *planner) leftovers(hp *hparams) error {
	for _, n := range p.st.Names() {
		// Old checkpoints store RoPE's inverse frequencies, derived from rope_theta.
		if !p.used[n] && !isInvFreq(n) {
			return fmt.Errorf("%s: tensor %q has no place in a %s GGUF (model_type %q)", p.st.Path, n, hp.fam.arch, hp.modelType)
		}
	}
	return nil
}

func planTensors(st *safetensors.Dir, hp *hparams, logf func(string, ...any)) ([]tensorPlan, error) {
	p := &planner{st: st, used: map[string]bool{}, logf: logf}
	if err := hp.fam.tensors(p, hp); err != nil {
		return nil, err
	}
	if err := p.leftovers(hp); err != nil {
		return nil, err
	}
	return p.plan, nil
}

func isInvFreq(name string) bool {
	return filepath.Ext(name) == ".inv_freq"
}

// add queues the tensor. A HF [out, in] matrix is GGUF dims [in, out] with
// the same row-major bytes, so rows are copied in order (bar the permutation).
func (p tensorPlan) add(w *gguf.Writer, want ops.DType, logf func(string, ...any)) error {
	typ, note := quantize.TensorType(p.name, p.dims, want)
	if note != "" {
		logf("%s: %s", p.name, note)
	}
	return w.AddTensor(p.name, typ, p.dims, func(out io.Writer) error {
		if err := p.write(out, typ); err != nil {
			return fmt.Errorf("%s: tensor %q: %w", p.srcs[0].File, p.srcs[0].Name, err)
		}
		return nil
	})
}

// permuteHeads maps output rows to source rows for q and k: HF orders each
// head's rows as [first halves | second halves] for rotate-half RoPE; GGUF
// interleaves them: output row 2i of a head is source row i, row 2i+1 is
// source row i+hd/2.
func permuteHeads(rows, heads int) func(int) int {
	hd := rows / heads
	return func(r int) int {
		h, j := r/hd, r%hd
		return h*hd + j/2 + (j%2)*(hd/2)
	}
}

// write streams one row at a time, so memory stays at a row plus an output
// chunk whatever the tensor's size.
func (p tensorPlan) write(out io.Writer, typ ops.DType) error {
	rowBytes, err := typ.RowBytes(p.cols)
	if err != nil {
		return err
	}
	per := p.rows / len(p.srcs)
	row := make([]float32, p.cols)
	perChunk := max(1, (1<<20)/rowBytes)
	chunk := make([]byte, 0, perChunk*rowBytes)
	for r := 0; r < p.rows; r++ {
		s := r
		if p.rowMap != nil {
			s = p.rowMap(r)
		}
		src := p.srcs[s/per]
		inBytes := len(src.Data) / per
		i := s % per
		if err := safetensors.Decode(src.DType, row, src.Data[i*inBytes:(i+1)*inBytes]); err != nil {
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
