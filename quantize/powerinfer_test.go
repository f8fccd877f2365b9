package quantize_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/quantize"
	"github.com/pinfer/pinfer/sample"
	"github.com/pinfer/pinfer/synth"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withGPUIndex copies a PWRI file and adds, per layer, PowerInfer's
// blk.N.gpu_idx (i32[n_ff], 0/1) and blk.N.gpu_bucket (the sorted ids of
// the 1s), as its .gpuidx files hold them; it returns their bytes by name.
func withGPUIndex(t *testing.T, src, dst string, nLayer, nFF int) map[string][]byte {
	f := open(t, src)
	w, err := gguf.CopyOf(f)
	require.NoError(t, err)
	ints := map[string][]byte{}
	for l := range nLayer {
		var idx, bucket []byte
		for i := range nFF {
			on := (i*7+l)%5 == 0
			v := uint32(0)
			if on {
				v = 1
				bucket = binary.LittleEndian.AppendUint32(bucket, uint32(i))
			}
			idx = binary.LittleEndian.AppendUint32(idx, v)
		}
		for name, b := range map[string][]byte{fmt.Sprintf("blk.%d.gpu_idx", l): idx, fmt.Sprintf("blk.%d.gpu_bucket", l): bucket} {
			ints[name] = b
			require.NoError(t, w.AddTensor(name, ops.I32, []uint64{uint64(len(b) / 4)}, func(out io.Writer) error { _, err := out.Write(b); return err }))
		}
	}
	require.NoError(t, w.WriteFile(dst, nil))
	return ints
}

// rawTypeID is the type id a tensor's info holds in the file's header,
// before any mapping of PowerInfer's ids.
func rawTypeID(t *testing.T, raw []byte, name string) uint32 {
	key := binary.LittleEndian.AppendUint64(nil, uint64(len(name)))
	key = append(key, name...)
	i := bytes.Index(raw, key)
	require.GreaterOrEqual(t, i, 0, name)
	p := i + len(key)
	nd := int(binary.LittleEndian.Uint32(raw[p:]))
	return binary.LittleEndian.Uint32(raw[p+4+8*nd:])
}

// within requires q (a tensor dequantized from q4_0) to be src within q4_0's
// error per block of 32: q4_0 maps the block's largest magnitude to -8 and
// clamps the other side at +7 steps, so no element moves by more than
// amax/8, plus the f16 rounding of the scale.
func within(t *testing.T, name string, q, src []float32) {
	t.Helper()
	require.Len(t, q, len(src), name)
	for b := 0; b < len(src); b += 32 {
		var amax float64
		for _, v := range src[b : b+32] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		for i := b; i < b+32; i++ {
			if d := math.Abs(float64(q[i] - src[i])); d > amax/8+amax*1e-3+1e-12 {
				t.Fatalf("%s element %d: %g, source %g, more than q4_0's error %g", name, i, q[i], src[i], amax/8+amax*1e-3)
			}
		}
	}
}

func dequant(t *testing.T, f *gguf.File, ti *gguf.TensorInfo) []float32 {
	out := make([]float32, ti.Elems())
	rb, err := ti.Type.RowBytes(int(ti.Dims[0]))
	require.NoError(t, err)
	data := f.Data(ti)
	for r := 0; r*int(ti.Dims[0]) < len(out); r++ {
		require.NoError(t, ops.Dequantize(ti.Type, out[r*int(ti.Dims[0]):(r+1)*int(ti.Dims[0])], data[r*rb:(r+1)*rb]))
	}
	return out
}

// A PowerInfer file (`pinfer gen`'s layout) at f16 quantized to q4_0: still
// PWRI; its matrices, ffn_down_t and the fc1/fc2 predictors included, q4_0
// within q4_0's error of the f16 source; norms f32 as they were; its
// metadata kept (sparse_threshold). It loads, picks its own predictor, and
// runs sparse at the rate it was made for, as the f16 file does.
func TestPowerInferFile(t *testing.T) {
	dir := t.TempDir()
	shape := synth.Shape{NEmbd: 128, NFF: 512, NLayer: 3, NHead: 4, NKVHead: 2, Vocab: 300, Rank: 64}
	const active = 0.1
	in := filepath.Join(dir, "gen-f16.gguf")
	require.NoError(t, synth.Write(in, synth.Options{Shape: shape, Active: active, Type: ops.F16, Seed: 5}, nil))
	out := filepath.Join(dir, "gen-q4_0.gguf")
	_, err := quantize.File(in, out, quantize.Options{Type: ops.Q4_0, Threads: 2})
	require.NoError(t, err)

	src, got := open(t, in), open(t, out)
	require.Equal(t, "PWRI", got.Magic)
	require.Len(t, got.Tensors, len(src.Tensors))
	th, err := got.Float("powerinfer.sparse_threshold")
	require.NoError(t, err)
	assert.Equal(t, 0.0, th)
	ft, err := got.Uint("general.file_type")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), ft)
	for i := range src.Tensors {
		s, q := &src.Tensors[i], &got.Tensors[i]
		require.Equal(t, s.Name, q.Name)
		require.Equal(t, s.Dims, q.Dims, s.Name)
		if len(s.Dims) == 1 {
			assert.Equal(t, ops.F32, q.Type, s.Name)
			assert.Equal(t, src.Data(s), got.Data(q), s.Name)
			continue
		}
		require.Equal(t, ops.F16, s.Type, s.Name)
		require.Equal(t, ops.Q4_0, q.Type, s.Name)
		within(t, s.Name, dequant(t, got, q), dequant(t, src, s))
	}
	for _, name := range []string{"blk.0.fc1.weight", "blk.2.fc2.weight", "blk.1.ffn_down_t.weight"} {
		ti, ok := got.Tensor(name)
		require.True(t, ok, name)
		assert.Equal(t, ops.Q4_0, ti.Type, name)
	}

	for _, path := range []string{in, out} {
		m, err := engine.Load(path, "")
		require.NoError(t, err)
		pred, err := m.Predictor("")
		require.NoError(t, err)
		require.Equal(t, "mlp", pred.Name(), path)
		res, err := m.Generate(engine.Options{Prompt: "hello world, hello synthetic model", N: 24, Threads: 2, Sample: sample.Params{Temp: 0}, Predictor: pred})
		require.NoError(t, err)
		require.Len(t, res.Stats.ActiveFraction, shape.NLayer)
		for l, frac := range res.Stats.ActiveFraction {
			require.InDelta(t, active, frac, active*0.5, "%s layer %d", filepath.Base(path), l)
		}
		t.Logf("%s: active %.3f", filepath.Base(path), res.Stats.ActiveFraction)
		m.Close()
	}
}

// A PWRI file that also holds PowerInfer's GPU index (gpu_idx, gpu_bucket:
// i32, as its .gpuidx files hold them): the int tensors come out the same
// bytes, still i32 and stored under PowerInfer's id 18 for it; the rest
// under ggml's own ids.
func TestPowerInferIntTensors(t *testing.T) {
	dir := t.TempDir()
	shape := synth.Shape{NEmbd: 64, NFF: 128, NLayer: 2, NHead: 2, NKVHead: 2, Vocab: 260, Rank: 32}
	gen := filepath.Join(dir, "gen.gguf")
	require.NoError(t, synth.Write(gen, synth.Options{Shape: shape, Active: 0.2, Type: ops.F16, Seed: 1}, nil))
	in := filepath.Join(dir, "in.gguf")
	ints := withGPUIndex(t, gen, in, shape.NLayer, shape.NFF)
	out := filepath.Join(dir, "out.gguf")
	plan, err := quantize.File(in, out, quantize.Options{Type: ops.Q8_0})
	require.NoError(t, err)
	got := open(t, out)
	require.Equal(t, "PWRI", got.Magic)
	for name, b := range ints {
		ti, ok := got.Tensor(name)
		require.True(t, ok, name)
		assert.Equal(t, ops.I32, ti.Type, name)
		assert.Equal(t, b, got.Data(ti), name)
	}
	for _, p := range plan {
		assert.Equal(t, ints[p.Name] != nil || len(p.Dims) == 1, p.Copied(), p.Name)
	}
	raw := readFile(t, out)
	for l := range shape.NLayer {
		assert.Equal(t, uint32(18), rawTypeID(t, raw, fmt.Sprintf("blk.%d.gpu_idx", l)))
		assert.Equal(t, uint32(18), rawTypeID(t, raw, fmt.Sprintf("blk.%d.gpu_bucket", l)))
	}
	assert.Equal(t, uint32(8), rawTypeID(t, raw, "blk.0.fc1.weight"), "q8_0 is ggml's 8")
	assert.Equal(t, uint32(0), rawTypeID(t, raw, "blk.0.ffn_norm.weight"))
}
