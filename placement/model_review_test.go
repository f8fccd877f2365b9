package placement

import (
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
)

// shakespeare is the Shakespeare fixture converted to f16, the built-in
// model (models/): config.json gives hidden_size 256, intermediate_size
// 1024 and 6 layers.
func shakespeare(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "models", "shakespeare-relu-6m-f16.gguf")
}

const (
	shakespeareEmbd = 256  // config.json hidden_size
	shakespeareFF   = 1024 // config.json intermediate_size
)

// A profile whose layers have n_embd neurons is not this model's (n_ff =
// 1024), even though 256 is one of the FFN tensors' dimensions: place must
// refuse it rather than write an index whose gpu_idx has 256 entries for a
// layer of 1024 neurons.
func TestFromGGUFRefusesProfileOfModelWidth(t *testing.T) {
	st, err := predictors.ReadStats(filepath.Join(modelsDir(t), "shakespeare-relu-6m", "activation_stats.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range st.Layers {
		if len(st.Layers[i].Frequency) != shakespeareFF {
			t.Fatalf("fixture layer %d has %d neurons", i, len(st.Layers[i].Frequency))
		}
	}
	// The fixture as it is fits.
	f, err := gguf.Open(shakespeare(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := FromGGUF(f, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Layers {
		if len(l.Rates) != shakespeareFF {
			t.Fatalf("layer %d: %d rates", l.Index, len(l.Rates))
		}
	}
	for i := range st.Layers {
		st.Layers[i].Frequency = st.Layers[i].Frequency[:shakespeareEmbd]
	}
	_, err = FromGGUF(f, st)
	if err == nil {
		t.Fatal("a profile of 256 neurons per layer was placed on a model of 1024")
	}
	msg := err.Error()
	for _, want := range []string{f.Path, "blk.0.ffn_", "layer 0", "1024", "256"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error %q is more than one line", msg)
	}
}

// A file that holds down both ways (what 'pinfer predictor train' writes:
// ffn_down kept, ffn_down_t added) runs from ffn_down_t; a neuron needs
// its gate, up and down rows, three rows of n_embd f16 values, on the GPU,
// not four.
func TestFromGGUFCountsOneDownRow(t *testing.T) {
	src, err := gguf.Open(shakespeare(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w := gguf.NewWriter()
	for _, kv := range src.KVs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for i := range src.Tensors {
		tn := &src.Tensors[i]
		data := src.Data(tn)
		if err := w.AddTensor(tn.Name, tn.Type, tn.Dims, func(o io.Writer) error { _, err := o.Write(data); return err }); err != nil {
			t.Fatal(err)
		}
		if base, ok := strings.CutSuffix(tn.Name, ".ffn_down.weight"); ok {
			// Transposed: {n_embd, n_ff}; the values do not matter here.
			zero := make([]byte, len(data))
			if err := w.AddTensor(base+".ffn_down_t.weight", tn.Type, []uint64{tn.Dims[1], tn.Dims[0]}, func(o io.Writer) error { _, err := o.Write(zero); return err }); err != nil {
				t.Fatal(err)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "both.gguf")
	if err := w.WriteFile(path, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if tn, ok := f.Tensor("blk.0.ffn_gate.weight"); !ok || tn.Type != ops.F16 {
		t.Fatalf("fixture's ffn_gate is not f16: %+v", tn)
	}
	st, err := predictors.ReadStats(filepath.Join(modelsDir(t), "shakespeare-relu-6m", "activation_stats.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := FromGGUF(f, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 6 {
		t.Fatalf("%d layers, want 6", len(m.Layers))
	}
	for _, l := range m.Layers {
		if want := uint64(3 * shakespeareEmbd * 2); l.NeuronBytes != want {
			t.Errorf("layer %d: %d bytes per neuron, want %d (gate, up and one down row of 256 f16)", l.Index, l.NeuronBytes, want)
		}
	}
}

// A mixture of experts (ffn_*_exps, a router ffn_gate_inp, a profile per
// expert) is one part a layer, blk.N.exps, read per token at the share of
// experts a token uses (2 of 4 here); its predictors stay on the CPU,
// which Model.CPU counts. A budget takes what saves the CPU the most
// reads: the small attention alone, the experts (half of their bytes a
// token) over it when only one fits, then both. A profile with experts for a layer
// that has none is refused, naming the file.
func TestFromGGUFPlacesExpertsWhole(t *testing.T) {
	const embd, ff, experts = 8, 16, 4
	w := gguf.NewWriter()
	if err := w.Set("general.architecture", "llama"); err != nil {
		t.Fatal(err)
	}
	add := func(name string, dims ...uint64) {
		n := uint64(4)
		for _, d := range dims {
			n *= d
		}
		data := make([]byte, n)
		if err := w.AddTensor(name, ops.F32, dims, func(o io.Writer) error { _, err := o.Write(data); return err }); err != nil {
			t.Fatal(err)
		}
	}
	add("blk.0.attn_q.weight", embd, embd)
	add("blk.0.ffn_gate_inp.weight", embd, experts)
	add("blk.0.ffn_gate_exps.weight", embd, ff, experts)
	add("blk.0.ffn_up_exps.weight", embd, ff, experts)
	add("blk.0.ffn_down_exps.weight", ff, embd, experts)
	add("blk.0.ffn_fc1_exps.weight", embd, 2, experts)
	for k, v := range map[string]uint32{"llama.expert_count": experts, "llama.expert_used_count": 2} {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "moe.gguf")
	if err := w.WriteFile(path, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st := &predictors.Stats{Tokens: 10}
	for e := range experts {
		st.Layers = append(st.Layers, predictors.LayerStats{Layer: 0, Expert: e, Frequency: make([]float32, ff)})
	}
	m, err := FromGGUF(f, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 0 {
		t.Errorf("expert layers placed by neuron: %+v", m.Layers)
	}
	const attn, exps = 4 * embd * embd, 4 * (embd*experts + 3*embd*ff*experts)
	want := []Part{{Name: "blk.0.attn", Layer: 0, Bytes: attn, Read: attn}, {Name: "blk.0.exps", Layer: 0, Bytes: exps, Read: exps / 2}}
	if !reflect.DeepEqual(m.Parts, want) {
		t.Errorf("parts %+v, want %+v", m.Parts, want)
	}
	if cpu := uint64(4 * embd * 2 * experts); m.CPU != cpu {
		t.Errorf("%d bytes left on the CPU, want %d (the experts' fc1)", m.CPU, cpu)
	}
	for _, c := range []struct {
		budget uint64
		dense  []string
	}{{attn, []string{"blk.0.attn"}}, {attn + exps - 1, []string{"blk.0.exps"}}, {attn + exps, []string{"blk.0.attn", "blk.0.exps"}}} {
		if p := Place(m, c.budget, Costs{}); !reflect.DeepEqual(p.Dense, c.dense) {
			t.Errorf("budget %d placed %v, want %v", c.budget, p.Dense, c.dense)
		}
	}

	// The same profile for a model without experts.
	w = gguf.NewWriter()
	if err := w.Set("general.architecture", "llama"); err != nil {
		t.Fatal(err)
	}
	add("blk.0.ffn_gate.weight", embd, ff)
	dense := filepath.Join(t.TempDir(), "dense.gguf")
	if err := w.WriteFile(dense, nil); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Open(dense)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	_, err = FromGGUF(g, st)
	if err == nil || !strings.Contains(err.Error(), dense) || !strings.Contains(err.Error(), "expert 1") {
		t.Errorf("a profile of experts for a layer without them: %v", err)
	}
}

// A model without sparse FFNs (a profile without layers, which only the
// hybrid planner makes: ReadStats refuses one) has each block's FFN as a
// dense part, blk.N.ffn, read whole by every token, as its matmuls do:
// stories260K's five blocks, gate, up and down each.
func TestFromGGUFDenseFFNs(t *testing.T) {
	f, err := gguf.Open(fixtures.Path(t, "stories260K", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := FromGGUF(f, &predictors.Stats{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 0 {
		t.Errorf("%d neuron layers, want none", len(m.Layers))
	}
	ffn := 0
	for _, p := range m.Parts {
		if !strings.HasSuffix(p.Name, ".ffn") {
			continue
		}
		ffn++
		var want uint64
		for _, w := range []string{"gate", "up", "down"} {
			ti, ok := f.Tensor(fmt.Sprintf("blk.%d.ffn_%s.weight", p.Layer, w))
			if !ok {
				t.Fatalf("blk.%d.ffn_%s.weight missing", p.Layer, w)
			}
			want += ti.Size
		}
		if p.Bytes != want || p.Read != float64(want) {
			t.Errorf("%s: %d bytes, read %v a token; want %d, all of them", p.Name, p.Bytes, p.Read, want)
		}
	}
	if ffn != 5 {
		t.Errorf("%d blk.N.ffn parts, want 5", ffn)
	}
}
