package convert

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"

	"github.com/stretchr/testify/require"
)

// sharedModels is shared/models beside the checkout (a missing one fails the test).
func sharedModels(t *testing.T) string { return fixtures.Dir(t) }

// stTensor is a tensor as the test reads it straight from the file format,
// independently of package safetensors.
type stTensor struct {
	Name  string
	DType string
	Shape []int
	Data  []byte
}

func readST(t *testing.T, path string) map[string]stTensor {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(b)
	var hdr map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b[8:8+n], &hdr))
	out := map[string]stTensor{}
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType string `json:"dtype"`
			Shape []int  `json:"shape"`
			Off   [2]int `json:"data_offsets"`
		}
		require.NoError(t, json.Unmarshal(raw, &e))
		out[name] = stTensor{name, e.DType, e.Shape, b[8+int(n)+e.Off[0] : 8+int(n)+e.Off[1]]}
	}
	return out
}

// writeST is the smallest safetensors writer: length, JSON header, data.
func writeST(t *testing.T, path string, ts []stTensor) {
	t.Helper()
	hdr := map[string]any{}
	var data []byte
	for _, x := range ts {
		hdr[x.Name] = map[string]any{"dtype": x.DType, "shape": x.Shape, "data_offsets": []int{len(data), len(data) + len(x.Data)}}
		data = append(data, x.Data...)
	}
	js, err := json.Marshal(hdr)
	require.NoError(t, err)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	require.NoError(t, os.WriteFile(path, append(append(out, js...), data...), 0o644))
}

// half decodes IEEE binary16 with float64 arithmetic, as a reference.
func half(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, man := int(h>>10&0x1f), float64(h&0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(man, -24)
	case 0x1f:
		if man == 0 {
			return math.Inf(int(sign))
		}
		return math.NaN()
	}
	return sign * math.Ldexp(1+man/1024, exp-15)
}

// values decodes a source tensor to float64.
func (s stTensor) values(t *testing.T) []float64 {
	t.Helper()
	var out []float64
	switch s.DType {
	case "F16":
		for i := 0; i < len(s.Data); i += 2 {
			out = append(out, half(binary.LittleEndian.Uint16(s.Data[i:])))
		}
	case "BF16":
		for i := 0; i < len(s.Data); i += 2 {
			out = append(out, float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(s.Data[i:]))<<16)))
		}
	case "F32":
		for i := 0; i < len(s.Data); i += 4 {
			out = append(out, float64(math.Float32frombits(binary.LittleEndian.Uint32(s.Data[i:]))))
		}
	default:
		t.Fatalf("dtype %s", s.DType)
	}
	return out
}

func f32s(b []byte) []float64 {
	out := make([]float64, len(b)/4)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return out
}

// dequant decodes GGML blocks by the published layouts: q8_0 is an f16 scale
// and 32 int8; q4_0 an f16 scale and 16 bytes whose low nibbles are elements
// 0-15 and high nibbles 16-31, each stored +8.
func dequant(t *testing.T, typ string, b []byte) []float64 {
	t.Helper()
	var out []float64
	switch typ {
	case "f32":
		return f32s(b)
	case "f16":
		for i := 0; i < len(b); i += 2 {
			out = append(out, half(binary.LittleEndian.Uint16(b[i:])))
		}
	case "q8_0":
		for ; len(b) > 0; b = b[34:] {
			d := half(binary.LittleEndian.Uint16(b))
			for _, q := range b[2:34] {
				out = append(out, d*float64(int8(q)))
			}
		}
	case "q4_0":
		for ; len(b) > 0; b = b[18:] {
			d := half(binary.LittleEndian.Uint16(b))
			var blk [32]float64
			for j, q := range b[2:18] {
				blk[j] = d * float64(int(q&15)-8)
				blk[j+16] = d * float64(int(q>>4)-8)
			}
			out = append(out, blk[:]...)
		}
	default:
		t.Fatalf("type %s", typ)
	}
	return out
}

// copyModel makes a temp model dir from src with config edits and a
// rewritten safetensors (edit returns the tensors to keep, in order).
func copyModel(t *testing.T, src string, cfg func(map[string]any), edit func(map[string]stTensor) []stTensor) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	require.NoError(t, os.Mkdir(dir, 0o755))
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, json.Unmarshal(raw, &c))
	if cfg != nil {
		cfg(c)
	}
	raw, err = json.Marshal(c)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644))
	tok, err := os.ReadFile(filepath.Join(src, "tokenizer.model"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.model"), tok, 0o644))
	ts := readST(t, filepath.Join(src, "model.safetensors"))
	var keep []stTensor
	if edit != nil {
		keep = edit(ts)
	} else {
		for _, x := range ts {
			keep = append(keep, x)
		}
	}
	writeST(t, filepath.Join(dir, "model.safetensors"), keep)
	return dir
}

func readConfigMap(t *testing.T, dir string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, json.Unmarshal(raw, &c))
	return c
}
