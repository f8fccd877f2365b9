package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sharedModels is shared/models beside the checkout (a missing one fails the test).
func sharedModels(t *testing.T) string { return fixtures.Dir(t) }

type rawTensor struct {
	name  string
	dtype string
	shape []int
	data  []byte
}

// encode builds a safetensors file by hand from the format description: an
// 8-byte little-endian header length, the JSON header, then the data.
func encode(t testing.TB, ts []rawTensor) []byte {
	t.Helper()
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, x := range ts {
		hdr[x.name] = map[string]any{"dtype": x.dtype, "shape": x.shape, "data_offsets": []int{len(data), len(data) + len(x.data)}}
		data = append(data, x.data...)
	}
	js, err := json.Marshal(hdr)
	require.NoError(t, err)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	return append(append(out, js...), data...)
}

func write(t *testing.T, path string, b []byte) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

func u16s(v ...uint16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return b
}

func TestOpenDecodesEachDType(t *testing.T) {
	// f16: 1, -2, 1/3 rounded (0x3555 = 1365/4096), smallest subnormal 2^-24.
	// bf16: 1, -0.5. f32: 1.5, 3.
	f32 := binary.LittleEndian.AppendUint32(nil, 0x3fc00000)
	f32 = binary.LittleEndian.AppendUint32(f32, 0x40400000)
	path := write(t, filepath.Join(t.TempDir(), "a.safetensors"), encode(t, []rawTensor{
		{"h", "F16", []int{2, 2}, u16s(0x3c00, 0xc000, 0x3555, 0x0001)},
		{"b", "BF16", []int{2}, u16s(0x3f80, 0xbf00)},
		{"f", "F32", []int{2}, f32},
		{"i", "I32", []int{1}, []byte{1, 0, 0, 0}},
	}))
	f, err := Open(path)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, []string{"b", "f", "h", "i"}, f.Names())
	assert.Equal(t, map[string]string{"format": "pt"}, f.Metadata)

	h, err := f.Tensor("h")
	require.NoError(t, err)
	assert.Equal(t, "F16", h.DType)
	assert.Equal(t, []int{2, 2}, h.Shape)
	v, err := h.Float32s()
	require.NoError(t, err)
	assert.Equal(t, []float32{1, -2, 1365.0 / 4096, 1.0 / (1 << 24)}, v)

	b, _ := f.Tensor("b")
	v, err = b.Float32s()
	require.NoError(t, err)
	assert.Equal(t, []float32{1, -0.5}, v)

	ft, _ := f.Tensor("f")
	v, err = ft.Float32s()
	require.NoError(t, err)
	assert.Equal(t, []float32{1.5, 3}, v)

	it, _ := f.Tensor("i")
	_, err = it.Float32s()
	assert.ErrorContains(t, err, `"i"`)

	_, err = f.Tensor("nope")
	assert.ErrorContains(t, err, path)
	assert.ErrorContains(t, err, `"nope"`)
}

func TestOpenFixture(t *testing.T) {
	f, err := Open(filepath.Join(sharedModels(t), "shakespeare-relu-6m", "model.safetensors"))
	require.NoError(t, err)
	defer f.Close()
	assert.Len(t, f.Names(), 2+9*6+1)
	norm, err := f.Tensor("model.norm.weight")
	require.NoError(t, err)
	v, err := norm.Float32s()
	require.NoError(t, err)
	require.Len(t, v, 256)
	// First four values as Python's struct '<e' decodes the file's bytes.
	assert.Equal(t, []float32{2.216796875, 2.08984375, 2.138671875, 2.146484375}, v[:4])
	q, err := f.Tensor("model.layers.0.self_attn.q_proj.weight")
	require.NoError(t, err)
	assert.Equal(t, []int{256, 256}, q.Shape)
	v, err = q.Float32s()
	require.NoError(t, err)
	assert.Equal(t, float32(0.0181884765625), v[256*3+5])
}

func TestOpenRejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	good := encode(t, []rawTensor{{"w", "F16", []int{2}, u16s(1, 2)}})
	hdrLen := int(binary.LittleEndian.Uint64(good))

	withHeader := func(js string) []byte {
		return append(binary.LittleEndian.AppendUint64(nil, uint64(len(js))), js...)
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "8-byte header length"},
		{"hugelen", binary.LittleEndian.AppendUint64(nil, 1<<40), "header length"},
		{"truncated", good[:8+hdrLen+2], "outside"},
		{"notjson", withHeader("{nope"), "JSON"},
		{"dtype", withHeader(`{"w":{"dtype":"Q9","shape":[1],"data_offsets":[0,0]}}`), `unknown dtype "Q9"`},
		{"size", append(withHeader(`{"w":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}}`), 0, 0, 0, 0), "needs 6"},
		{"offsets", withHeader(`{"w":{"dtype":"F16","shape":[1],"data_offsets":[2]}}`), "data_offsets"},
		{"negative", withHeader(`{"w":{"dtype":"F16","shape":[-1],"data_offsets":[0,0]}}`), "negative"},
		{"reversed", append(withHeader(`{"w":{"dtype":"F16","shape":[0],"data_offsets":[2,0]}}`), 0, 0), "outside"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := write(t, filepath.Join(dir, c.name+".safetensors"), c.data)
			f, err := Open(p)
			require.Error(t, err)
			assert.Nil(t, f)
			assert.ErrorContains(t, err, p)
			assert.ErrorContains(t, err, c.want)
		})
	}
	_, err := Open(filepath.Join(dir, "missing.safetensors"))
	assert.ErrorContains(t, err, "missing.safetensors")
}

func writeIndex(t *testing.T, dir string, m map[string]string) {
	t.Helper()
	js, err := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": m})
	require.NoError(t, err)
	write(t, filepath.Join(dir, "model.safetensors.index.json"), js)
}

func TestOpenDirSharded(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), encode(t, []rawTensor{
		{"a", "F16", []int{2}, u16s(0x3c00, 0x4000)},
	}))
	write(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), encode(t, []rawTensor{
		{"b", "BF16", []int{1}, u16s(0x4040)},
		{"c", "F16", []int{1}, u16s(0xbc00)},
	}))
	writeIndex(t, dir, map[string]string{
		"a": "model-00001-of-00002.safetensors",
		"b": "model-00002-of-00002.safetensors",
		"c": "model-00002-of-00002.safetensors",
	})
	d, err := OpenDir(dir)
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, []string{"a", "b", "c"}, d.Names())
	for name, want := range map[string][]float32{"a": {1, 2}, "b": {3}, "c": {-1}} {
		tn, err := d.Tensor(name)
		require.NoError(t, err)
		v, err := tn.Float32s()
		require.NoError(t, err)
		assert.Equal(t, want, v, name)
	}
	b, _ := d.Tensor("b")
	assert.Equal(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), b.File)
	_, err = d.Tensor("z")
	assert.ErrorContains(t, err, "model.safetensors.index.json")
	assert.ErrorContains(t, err, `"z"`)
}

func TestOpenDirSingleAndErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := OpenDir(dir)
	assert.ErrorContains(t, err, filepath.Join(dir, "model.safetensors"))

	write(t, filepath.Join(dir, "model.safetensors"), encode(t, []rawTensor{{"x", "F32", []int{0}, nil}}))
	d, err := OpenDir(dir)
	require.NoError(t, err)
	assert.True(t, d.Has("x"))
	require.NoError(t, d.Close())

	write(t, filepath.Join(dir, "s1.safetensors"), encode(t, []rawTensor{{"x", "F32", []int{0}, nil}}))
	for name, c := range map[string]struct {
		m    map[string]string
		want string
	}{
		"missing shard":  {map[string]string{"x": "s9.safetensors"}, "s9.safetensors"},
		"missing tensor": {map[string]string{"y": "s1.safetensors"}, `"y"`},
		"escaping path":  {map[string]string{"x": "../s1.safetensors"}, "not a file name"},
		"empty":          {map[string]string{}, "weight_map"},
	} {
		writeIndex(t, dir, c.m)
		_, err := OpenDir(dir)
		assert.ErrorContains(t, err, "model.safetensors.index.json", name)
		assert.ErrorContains(t, err, c.want, name)
	}
	write(t, filepath.Join(dir, "model.safetensors.index.json"), []byte("{"))
	_, err = OpenDir(dir)
	assert.ErrorContains(t, err, "JSON")
}
