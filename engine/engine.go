// Package engine puts a model file, its graph and its tokenizer together and
// runs generation and perplexity: what the CLI and the server call.
package engine

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/grammar"
	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/models"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/tokenizer"
)

// Model is a loaded model, ready to make sessions.
type Model struct {
	Path string
	File *gguf.File
	Spec *graph.Spec
	Prog *graph.Program
	// Host, while Prog is a device's stand-in (the whole step on the GPU),
	// is the program it replaced, which runs on the CPU from the mapped
	// weights: what HiddenProgram falls back to. Nil otherwise.
	Host     *graph.Program
	Tok      *tokenizer.Tokenizer
	LoadTime time.Duration
	// KVType is the element type of the attention caches of the sessions
	// NewSession makes: ops.F32 (the zero value) or ops.F16.
	KVType ops.DType

	packing *ops.Packing // repack's
	denseMu sync.Mutex
	dense   *ops.Packing // PackDense's

	vocabOnce sync.Once
	vocab     *grammar.Vocab
}

// GrammarVocab is the vocabulary as a grammar's matcher reads it, made on
// first use.
func (m *Model) GrammarVocab() *grammar.Vocab {
	m.vocabOnce.Do(func() { m.vocab = grammar.NewVocab(m.Tok.Texts(), m.Tok.Ends()) })
	return m.vocab
}

// Load opens a GGUF file and binds it to graphPath, or, when that is empty,
// to the built-in graph that matches the file.
func Load(path, graphPath string) (*Model, error) {
	start := time.Now()
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m := &Model{Path: path, File: f}
	if err := m.checkRoPEScaling(); err != nil {
		f.Close()
		return nil, err
	}
	if err := m.bind(graphPath); err != nil {
		f.Close()
		return nil, err
	}
	if err := m.repack(); err != nil {
		f.Close()
		return nil, err
	}
	m.LoadTime = time.Since(start)
	return m, nil
}

func (m *Model) bind(graphPath string) error {
	var err error
	if graphPath != "" {
		if m.Spec, err = graph.LoadSpecFile(graphPath); err != nil {
			return err
		}
	} else {
		specs, err := BuiltinGraphs()
		if err != nil {
			return err
		}
		if m.Spec, err = graph.Select(specs, m.File); err != nil {
			return err
		}
	}
	if m.Prog, err = graph.Build(m.Spec, m.File); err != nil {
		return err
	}
	if m.Tok, err = tokenizer.FromGGUF(m.File); err != nil {
		return err
	}
	if m.Prog.Vocab != m.Tok.Size() {
		return fmt.Errorf("%s: the graph %s gives %d logits but the vocabulary has %d tokens", m.Path, m.Spec.File, m.Prog.Vocab, m.Tok.Size())
	}
	return nil
}

// repack packs the matrices that ops read whole (ops.Slot.Whole) where
// that pays (ops.PackAll), and lets the pages of the rows that only the
// packed copies are read for leave the process.
func (m *Model) repack() (err error) {
	m.packing, err = ops.PackAll(m.packs(func(s ops.Slot) bool { return s.Whole }), runtime.GOMAXPROCS(0), packBudget, m.File.Release)
	return err
}

// packs lists the matrices of the slots that want says to pack.
func (m *Model) packs(want func(ops.Slot) bool) []ops.Pack {
	var ps []ops.Pack
	for _, n := range m.Prog.Nodes {
		for i, s := range n.Op.Weights {
			if w := n.W[i]; want(s) && w != nil && w.M != nil {
				ps = append(ps, ops.Pack{M: w.M, Axpy: s.Axpy})
			}
		}
	}
	return ps
}

// PackDense packs, in the background and where that pays, the matrices
// that ops read whole when they run without a predictor (ops.Slot.Dense:
// a sparse FFN's gate, up and down), for a dense run. Their rows stay,
// for the sparse path. Once: later calls do nothing.
func (m *Model) PackDense() error {
	m.denseMu.Lock()
	defer m.denseMu.Unlock()
	if m.dense != nil {
		return nil
	}
	var err error
	m.dense, err = ops.PackAll(m.packs(func(s ops.Slot) bool { return s.Dense }), runtime.GOMAXPROCS(0), 0, nil)
	return err
}

// packBudget is how long Load waits for repack; the rest is packed while the
// model runs.
const packBudget = time.Second

// Repacked is the size of the q4_0 weights that repack and PackDense pack.
func (m *Model) Repacked() int {
	m.denseMu.Lock()
	defer m.denseMu.Unlock()
	return m.packing.Bytes() + m.dense.Bytes()
}

// WaitPacked returns once repack and PackDense are done: a benchmark then
// times what a run gets after its first seconds.
func (m *Model) WaitPacked() {
	m.packing.Wait()
	m.denseMu.Lock()
	d := m.dense
	m.denseMu.Unlock()
	d.Wait()
}

// BuiltinGraphs parses the graphs shipped in models/.
func BuiltinGraphs() ([]*graph.Spec, error) {
	names, texts := models.Graphs()
	var specs []*graph.Spec
	for i, n := range names {
		s, err := graph.ParseSpec("models/"+n, texts[i])
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// Close stops repack and unmaps the file.
func (m *Model) Close() error {
	m.packing.Close() // it reads the file
	m.denseMu.Lock()
	m.dense.Close()
	m.packing, m.dense = nil, nil
	m.denseMu.Unlock()
	return m.File.Close()
}

// ContextLength is the model's trained context, or 0 if the file lacks it.
func (m *Model) ContextLength() int {
	v, err := m.File.Uint(m.File.Arch() + ".context_length")
	if err != nil {
		return 0
	}
	return int(v)
}

// NewSession starts a sequence of at most nctx positions on threads workers,
// its KV cache of m.KVType.
func (m *Model) NewSession(nctx int, pool *ops.Pool) *graph.Session {
	return m.NewSessionOn(m.Prog, nctx, pool)
}

// HiddenProgram is the program whose hidden states (graph.Runner.Hidden)
// embeddings read: Prog, or when Prog's output reads no node the host
// program it stands in for, whose CPU pass gives the same states up to the
// device's rounding.
func (m *Model) HiddenProgram() (*graph.Program, error) {
	_, err := m.Prog.HiddenNode()
	if err != nil && m.Host != nil {
		if _, herr := m.Host.HiddenNode(); herr == nil {
			return m.Host, nil
		}
	}
	return m.Prog, err
}

// NewSessionOn is NewSession on p, one of m's programs (HiddenProgram's).
func (m *Model) NewSessionOn(p *graph.Program, nctx int, pool *ops.Pool) *graph.Session {
	s := p.NewSession(nctx, pool)
	if m.KVType != ops.F32 {
		// Only F16 passes ParseKVType; a new session has not started.
		if err := s.SetKVType(m.KVType); err != nil {
			panic(err)
		}
	}
	return s
}

// ParseKVType reads a KV cache type as the CLI's --kv-type gives it.
func ParseKVType(s string) (ops.DType, error) {
	t, err := ops.ParseDType(strings.ToLower(s))
	if err != nil || (t != ops.F32 && t != ops.F16) {
		return 0, fmt.Errorf("--kv-type %q: want f32 or f16", s)
	}
	return t, nil
}

// Encode tokenizes a prompt the way llama-cli does: BOS first when the
// vocabulary asks for it, and the text of special tokens (</s>, <|end|>)
// as those tokens.
func (m *Model) Encode(text string) []int {
	return m.Tok.EncodeSpecial(text, m.Tok.Vocab().AddBOS)
}
