package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func allTypesKVs() []KV {
	return []KV{
		{"t.u8", Value{Type: Uint8, V: uint8(255)}},
		{"t.i8", Value{Type: Int8, V: int8(-128)}},
		{"t.u16", Value{Type: Uint16, V: uint16(65535)}},
		{"t.i16", Value{Type: Int16, V: int16(-32768)}},
		{"t.u32", Value{Type: Uint32, V: uint32(4000000000)}},
		{"t.i32", Value{Type: Int32, V: int32(-2000000000)}},
		{"t.f32", Value{Type: Float32, V: float32(-1.5)}},
		{"t.bool", Value{Type: Bool, V: true}},
		{"t.str", Value{Type: String, V: "héllo ▁world"}},
		{"t.empty", Value{Type: String, V: ""}},
		{"t.u64", Value{Type: Uint64, V: uint64(math.MaxUint64)}},
		{"t.i64", Value{Type: Int64, V: int64(math.MinInt64)}},
		{"t.f64", Value{Type: Float64, V: math.Pi}},
		{"a.u8", Value{Type: Array, Elem: Uint8, V: []uint8{0, 1, 255}}},
		{"a.i8", Value{Type: Array, Elem: Int8, V: []int8{-1, 2}}},
		{"a.u16", Value{Type: Array, Elem: Uint16, V: []uint16{7}}},
		{"a.i16", Value{Type: Array, Elem: Int16, V: []int16{-7, 7}}},
		{"a.u32", Value{Type: Array, Elem: Uint32, V: []uint32{1, 2, 3}}},
		{"a.i32", Value{Type: Array, Elem: Int32, V: []int32{-3, 0, 3}}},
		{"a.f32", Value{Type: Array, Elem: Float32, V: []float32{0.25, -0.5}}},
		{"a.bool", Value{Type: Array, Elem: Bool, V: []bool{true, false, true}}},
		{"a.str", Value{Type: Array, Elem: String, V: []string{"a", "", "ccc"}}},
		{"a.u64", Value{Type: Array, Elem: Uint64, V: []uint64{1 << 63}}},
		{"a.i64", Value{Type: Array, Elem: Int64, V: []int64{-1 << 62}}},
		{"a.f64", Value{Type: Array, Elem: Float64, V: []float64{1e300}}},
		{"a.empty", Value{Type: Array, Elem: Uint32, V: []uint32{}}},
		{"a.nested", Value{Type: Array, Elem: Array, V: []Value{
			{Type: Array, Elem: Int32, V: []int32{1, 2}},
			{Type: Array, Elem: String, V: []string{"x"}},
		}}},
	}
}

type testTensor struct {
	name string
	typ  ops.DType
	dims []uint64
	size int // computed by hand from the GGML block layouts
}

var testTensors = []testTensor{
	{"f32", ops.F32, []uint64{8, 3}, 8 * 3 * 4},
	{"f16", ops.F16, []uint64{5, 2}, 5 * 2 * 2},
	{"q8", ops.Q8_0, []uint64{64, 2}, 2 * 2 * 34},
	{"q4", ops.Q4_0, []uint64{32, 3, 1, 2}, 6 * 18},
}

func TestRoundTrip(t *testing.T) {
	for _, align := range []uint32{1, 48, 64} {
		t.Run(fmt.Sprint(align), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(align), 1))
			w := NewWriter()
			kvs := append([]KV{{"general.alignment", Value{Type: Uint32, V: align}}}, allTypesKVs()...)
			for _, kv := range kvs {
				require.NoError(t, w.Set(kv.Key, kv.V()))
			}
			payload := map[string][]byte{}
			for _, tt := range testTensors {
				b := make([]byte, tt.size)
				for i := range b {
					b[i] = byte(rng.UintN(255) + 1) // nonzero, so padding stands out
				}
				payload[tt.name] = b
				require.NoError(t, w.AddTensor(tt.name, tt.typ, tt.dims, func(out io.Writer) error {
					// two writes: the writer must accept data in pieces
					if _, err := out.Write(b[:len(b)/2]); err != nil {
						return err
					}
					_, err := out.Write(b[len(b)/2:])
					return err
				}))
			}
			path := filepath.Join(t.TempDir(), "rt.gguf")
			var last, total int64
			require.NoError(t, w.WriteFile(path, func(done, tot int64) {
				assert.GreaterOrEqual(t, done, last)
				last, total = done, tot
			}))
			assert.Equal(t, total, last)
			assert.NoFileExists(t, path+".tmp")

			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, "GGUF", string(raw[:4]))
			assert.Equal(t, uint32(3), binary.LittleEndian.Uint32(raw[4:]))
			assert.Equal(t, uint64(len(testTensors)), binary.LittleEndian.Uint64(raw[8:]))
			assert.Equal(t, uint64(len(kvs)), binary.LittleEndian.Uint64(raw[16:]))

			f, err := Open(path)
			require.NoError(t, err)
			defer f.Close()
			assert.Equal(t, uint64(align), f.Alignment)
			assert.Equal(t, kvs, f.KVs)
			require.Len(t, f.Tensors, len(testTensors))
			used := make([]bool, len(raw))
			for i, tt := range testTensors {
				info := f.Tensors[i]
				assert.Equal(t, tt.name, info.Name)
				assert.Equal(t, tt.typ, info.Type)
				assert.Equal(t, tt.dims, info.Dims)
				assert.Equal(t, uint64(tt.size), info.Size)
				assert.Zero(t, info.Offset%uint64(align))
				assert.Equal(t, payload[tt.name], f.Data(&info))
				start := int(f.DataOffset + info.Offset)
				for j := start; j < start+tt.size; j++ {
					used[j] = true
				}
			}
			assert.Zero(t, f.DataOffset%uint64(align))
			for j := int(f.DataOffset); j < len(raw); j++ {
				if !used[j] {
					require.Zero(t, raw[j], "padding byte %d", j)
				}
			}
			assert.Equal(t, int64(len(raw))-int64(f.DataOffset), total)
		})
	}
}

// V lets a test KV be handed to Set as the Value itself.
func (kv KV) V() any { return kv.Value }

func TestSetInfersTypes(t *testing.T) {
	w := NewWriter()
	for _, kv := range allTypesKVs() {
		if kv.Value.Elem == Array {
			continue
		}
		require.NoError(t, w.Set(kv.Key, kv.Value.V), kv.Key)
		got := w.kvs[w.kvIdx[kv.Key]].Value
		assert.Equal(t, kv.Value, got, kv.Key)
	}
	require.NoError(t, w.Set("t.u8", "replaced"))
	assert.Equal(t, "t.u8", w.kvs[0].Key)
	assert.Equal(t, "replaced", w.kvs[0].Value.V)

	err := w.Set("k.int", 5)
	assert.ErrorContains(t, err, `metadata key "k.int"`)
	err = w.Set("k.bad", Value{Type: Uint32, V: "no"})
	assert.ErrorContains(t, err, `metadata key "k.bad"`)
	assert.Error(t, w.Set("", "x"))
}

func TestWriterErrors(t *testing.T) {
	w := NewWriter()
	assert.ErrorContains(t, w.AddTensor("q", ops.Q8_0, []uint64{33}, func(io.Writer) error { return nil }), `tensor "q"`)
	assert.ErrorContains(t, w.AddTensor("u", ops.DType(99), []uint64{4}, func(io.Writer) error { return nil }), `tensor "u": unknown dtype id 99`)
	assert.ErrorContains(t, w.AddTensor("d", ops.F32, []uint64{1, 1, 1, 1, 1}, func(io.Writer) error { return nil }), `tensor "d"`)

	for name, n := range map[string]int{"short": 15, "long": 17} {
		w := NewWriter()
		require.NoError(t, w.AddTensor(name, ops.F32, []uint64{4}, func(out io.Writer) error {
			_, err := out.Write(make([]byte, n))
			return err
		}))
		path := filepath.Join(t.TempDir(), "x.gguf")
		err := w.WriteFile(path, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), fmt.Sprintf("tensor %q", name))
		assert.NoFileExists(t, path)
		assert.NoFileExists(t, path+".tmp")
	}
	require.NoError(t, w.AddTensor("dup", ops.F32, []uint64{1}, func(io.Writer) error { return nil }))
	assert.ErrorContains(t, w.AddTensor("dup", ops.F32, []uint64{1}, func(io.Writer) error { return nil }), `tensor "dup"`)
}

func TestPowerInfer(t *testing.T) {
	// Hand-built PWRI file: one i32 tensor whose type is stored as 18.
	r := header("PWRI", 3, 1, 0)
	r.str("blk.0.gpu_idx").u32(1).u64(4).u32(18).u64(0).pad(32)
	for i := 0; i < 4; i++ {
		r.u32(uint32(i % 2))
	}
	f, err := Open(writeTemp(t, "m.gpuidx", r.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, "PWRI", f.Magic)
	assert.Equal(t, ops.I32, f.Tensors[0].Type)
	assert.Equal(t, uint64(16), f.Tensors[0].Size)
	f.Close()

	// The writer stores I32 as 18 again in PWRI files.
	w := NewWriter()
	w.Magic = "PWRI"
	data := []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}
	require.NoError(t, w.AddTensor("blk.0.gpu_idx", ops.I32, []uint64{4}, func(out io.Writer) error {
		_, err := out.Write(data)
		return err
	}))
	path := filepath.Join(t.TempDir(), "w.gpuidx")
	require.NoError(t, w.WriteFile(path, nil))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	typeAt := 24 + 8 + len("blk.0.gpu_idx") + 4 + 8
	assert.Equal(t, "PWRI", string(raw[:4]))
	assert.Equal(t, uint32(18), binary.LittleEndian.Uint32(raw[typeAt:]))
	f, err = Open(path)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, ops.I32, f.Tensors[0].Type)
	assert.True(t, bytes.Equal(data, f.Data(&f.Tensors[0])))
}
