package placement

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
)

// modelsDir finds shared/models by walking up from the working directory.
func modelsDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "shared", "models")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no shared/models in any parent directory of the working directory")
		}
		dir = parent
	}
}

func TestIndexRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	m := sevenB(r, 12) // layers 0..11: numeric order puts 10 after 9, not after 1
	for i := range m.Layers {
		m.Layers[i].Rates = m.Layers[i].Rates[:50+i]
	}
	p := Place(m, m.Bytes()/2, Costs{})
	path := filepath.Join(t.TempDir(), "m.gpuidx")
	if err := WriteIndex(path, p.Index()); err != nil {
		t.Fatal(err)
	}
	got, err := ReadIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p.Index()) {
		t.Fatalf("read back %+v, wrote %+v", got, p.Index())
	}
	for i, l := range got.Layers {
		if l.Index != i {
			t.Fatalf("layer %d read at position %d", l.Index, i)
		}
	}

	// The raw file, read without the gguf package: PowerInfer's magic, and
	// I32 stored as PowerInfer's id 18, tensors in numeric layer order.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw[:4]) != "PWRI" {
		t.Fatalf("magic %q", raw[:4])
	}
	name := []byte("blk.2.gpu_idx")
	at := bytes.Index(raw, name)
	if at < 0 {
		t.Fatal("no blk.2.gpu_idx")
	}
	info := raw[at+len(name):]
	if nd := binary.LittleEndian.Uint32(info); nd != 1 {
		t.Fatalf("blk.2.gpu_idx has %d dims", nd)
	}
	if n := binary.LittleEndian.Uint64(info[4:]); n != uint64(len(m.Layers[2].Rates)) {
		t.Fatalf("blk.2.gpu_idx has %d elements", n)
	}
	if id := binary.LittleEndian.Uint32(info[12:]); id != 18 {
		t.Fatalf("I32 stored as type id %d, want PowerInfer's 18", id)
	}
	if bytes.Index(raw, []byte("blk.10.gpu_idx")) < bytes.Index(raw, []byte("blk.9.gpu_bucket")) {
		t.Fatal("layer 10 written before layer 9")
	}
}

func TestIndexEdgeBudgets(t *testing.T) {
	m := sevenB(rand.New(rand.NewPCG(13, 14)), 2)
	for _, b := range []uint64{0, m.Bytes()} {
		path := filepath.Join(t.TempDir(), "e.gpuidx")
		if err := WriteIndex(path, Place(m, b, Costs{}).Index()); err != nil {
			t.Fatal(err)
		}
		ix, err := ReadIndex(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ix.Layers {
			if want := map[bool]int{true: 0, false: l.NFF}[b == 0]; len(l.Bucket) != want {
				t.Fatalf("budget %d: layer %d has %d GPU neurons, want %d", b, l.Index, len(l.Bucket), want)
			}
		}
		if ix.VRAMCapacity != b {
			t.Fatalf("split.vram_capacity %d, want %d", ix.VRAMCapacity, b)
		}
	}
}

func i32Tensor(w *gguf.Writer, t *testing.T, name string, v []int32) {
	if err := w.AddTensor(name, ops.I32, []uint64{uint64(len(v))}, func(out io.Writer) error {
		return binary.Write(out, binary.LittleEndian, v)
	}); err != nil {
		t.Fatal(err)
	}
}

func TestReadIndexRejects(t *testing.T) {
	for _, c := range []struct {
		name, want string
		mask, buck []int32
	}{
		{"mask not 0/1", "element 1 is 2", []int32{1, 2, 0}, []int32{0}},
		{"bucket disagrees", "blk.0.gpu_bucket", []int32{1, 0, 1}, []int32{0}},
		{"bucket unsorted", "ascending", []int32{1, 0, 1}, []int32{2, 0}},
	} {
		w := gguf.NewWriter()
		w.Magic = "PWRI"
		w.Set("split.vram_capacity", uint64(1))
		i32Tensor(w, t, "blk.0.gpu_idx", c.mask)
		i32Tensor(w, t, "blk.0.gpu_bucket", c.buck)
		path := filepath.Join(t.TempDir(), "bad.gpuidx")
		if err := w.WriteFile(path, nil); err != nil {
			t.Fatal(err)
		}
		_, err := ReadIndex(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: error %v, want one naming %s and %q", c.name, err, path, c.want)
		}
	}
}

// TestFromGGUF sizes a file shaped like the Shakespeare fixture (6 layers,
// d=256, n_ff=1024, GQA 8/4) with PowerInfer's tensors, against the
// fixture's own activation profile, and checks each part by hand.
func TestFromGGUF(t *testing.T) {
	st, err := predictors.ReadStats(filepath.Join(modelsDir(t), "shakespeare-relu-6m", "activation_stats.json"))
	if err != nil {
		t.Fatal(err)
	}
	const d, ff, kv, vocab, rank = 256, 1024, 128, 1024, 64
	w := gguf.NewWriter()
	w.Magic = "PWRI"
	add := func(name string, typ ops.DType, dims ...uint64) {
		n := uint64(1)
		for _, x := range dims {
			n *= x
		}
		size := n / uint64(typ.BlockElems()) * uint64(typ.BlockBytes())
		if err := w.AddTensor(name, typ, dims, func(out io.Writer) error {
			_, err := out.Write(make([]byte, size))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	add("token_embd.weight", ops.F16, d, vocab)
	add("output_norm.weight", ops.F32, d)
	add("output.weight", ops.Q8_0, d, vocab)
	// Layers written out of order: the model's order comes from the numbers.
	for _, l := range []string{"3", "0", "5", "1", "4", "2"} {
		b := "blk." + l + "."
		add(b+"attn_norm.weight", ops.F32, d)
		add(b+"attn_q.weight", ops.Q4_0, d, d)
		add(b+"attn_k.weight", ops.Q4_0, d, kv)
		add(b+"attn_v.weight", ops.Q4_0, d, kv)
		add(b+"attn_output.weight", ops.Q4_0, d, d)
		add(b+"ffn_norm.weight", ops.F32, d)
		add(b+"ffn_gate.weight", ops.Q4_0, d, ff)
		add(b+"ffn_up.weight", ops.Q4_0, d, ff)
		add(b+"ffn_down_t.weight", ops.Q4_0, d, ff)
		add(b+"fc1.weight", ops.F16, d, rank)
		add(b+"fc2.weight", ops.F16, rank, ff)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := w.WriteFile(path, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := FromGGUF(f, st)
	if err != nil {
		t.Fatal(err)
	}
	q4 := func(n uint64) uint64 { return n / 32 * 18 }
	want := map[string]uint64{
		"blk.0.attn": 4*d + q4(d*d)*2 + q4(d*kv)*2,
		"blk.0.pred": 2*d*rank + 2*rank*ff,
		"blk.0.rest": 4 * d,
		"output":     4*d + d*vocab/32*34,
		"embd":       2 * d * vocab,
	}
	for _, p := range m.Parts {
		if w, ok := want[p.Name]; ok && p.Bytes != w {
			t.Errorf("part %s: %d bytes, want %d", p.Name, p.Bytes, w)
		}
		if p.Name == "embd" && p.Read != 2*d {
			t.Errorf("embd reads %g bytes per token, want one row of %d", p.Read, 2*d)
		}
	}
	if len(m.Parts) != 6*3+2 || len(m.Layers) != 6 {
		t.Fatalf("%d parts and %d layers", len(m.Parts), len(m.Layers))
	}
	for i, l := range m.Layers {
		if l.Index != i || l.NeuronBytes != 3*q4(d) || len(l.Rates) != ff {
			t.Fatalf("layer %+v", l)
		}
		if l.Rates[5] != st.Layers[i].Frequency[5] {
			t.Fatalf("layer %d rates are not the profile's", i)
		}
	}
	// Every tensor here is a multiple of 32 bytes, so the parts and neurons
	// add up to the data section.
	last := f.Tensors[len(f.Tensors)-1]
	if m.Bytes() != last.Offset+last.Size {
		t.Errorf("parts and neurons sum to %d bytes, the data section is %d", m.Bytes(), last.Offset+last.Size)
	}

	// A profile for another model is refused, naming the file and tensor.
	st.Layers[3].Frequency = st.Layers[3].Frequency[:1000]
	if _, err := FromGGUF(f, st); err == nil || !strings.Contains(err.Error(), "blk.3.ffn_gate.weight") || !strings.Contains(err.Error(), path) {
		t.Fatalf("mismatched profile: %v", err)
	}
}
