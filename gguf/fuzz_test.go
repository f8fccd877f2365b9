package gguf

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/ops"
)

func smallFile(t testing.TB) []byte {
	w := NewWriter()
	for _, kv := range allTypesKVs()[:14] {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range testTensors {
		n := tt.size
		if err := w.AddTensor(tt.name, tt.typ, tt.dims, func(out io.Writer) error {
			_, err := out.Write(make([]byte, n))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(t.TempDir(), "seed.gguf")
	if err := w.WriteFile(p, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzOpen(f *testing.F) {
	seed := smallFile(f)
	f.Add(seed)
	for _, n := range []int{0, 3, 8, 23, 24, 40, 100, len(seed) / 2, len(seed) - 1} {
		f.Add(seed[:n])
	}
	pwri := append([]byte("PWRI"), seed[4:]...)
	f.Add(pwri)
	path := filepath.Join(f.TempDir(), "fuzz.gguf")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		g, err := Open(path)
		if err != nil {
			return
		}
		defer g.Close()
		for _, kv := range g.KVs {
			g.String(kv.Key)
			g.Uint(kv.Key)
			g.Int(kv.Key)
			g.Float(kv.Key)
			g.Bool(kv.Key)
			g.Strings(kv.Key)
			g.Float32s(kv.Key)
			g.Int32s(kv.Key)
		}
		for i := range g.Tensors {
			ti := &g.Tensors[i]
			if uint64(len(g.Data(ti))) != ti.Size || !ti.Type.Known() || ti.Type == ops.DType(18) {
				t.Fatalf("tensor %q: inconsistent info %+v", ti.Name, ti)
			}
		}
	})
}
