package safetensors

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// llama.cpp's converter reads every tensor of every shard; a tensor that
// model.safetensors.index.json leaves out is still part of the model and
// must not vanish from the Dir.
func TestOpenDirKeepsTensorsTheIndexLeavesOut(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), encode(t, []rawTensor{
		{"a", "F16", []int{1}, u16s(0x3c00)},
		{"lm_head.weight", "F16", []int{1}, u16s(0x4000)},
	}))
	write(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), encode(t, []rawTensor{
		{"b", "F16", []int{1}, u16s(0x4200)},
	}))
	writeIndex(t, dir, map[string]string{
		"a": "model-00001-of-00002.safetensors",
		"b": "model-00002-of-00002.safetensors",
	})
	d, err := OpenDir(dir)
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, []string{"a", "b", "lm_head.weight"}, d.Names())
	x, err := d.Tensor("lm_head.weight")
	require.NoError(t, err)
	v, err := x.Float32s()
	require.NoError(t, err)
	assert.Equal(t, []float32{2}, v)
}

// Without an index or model.safetensors, the shards are every
// model*.safetensors of the directory (llama.cpp's converter's rule); a
// tensor in two of them is an error naming both files.
func TestOpenDirShardsWithoutIndex(t *testing.T) {
	dir := t.TempDir()
	s1 := write(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), encode(t, []rawTensor{
		{"a", "F16", []int{1}, u16s(0x3c00)},
	}))
	write(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), encode(t, []rawTensor{
		{"b", "BF16", []int{1}, u16s(0x4040)},
	}))
	write(t, filepath.Join(dir, "optimizer.safetensors"), encode(t, []rawTensor{
		{"z", "F16", []int{1}, u16s(0)},
	}))
	d, err := OpenDir(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, d.Names())
	b, err := d.Tensor("b")
	require.NoError(t, err)
	v, err := b.Float32s()
	require.NoError(t, err)
	assert.Equal(t, []float32{3}, v)
	require.NoError(t, d.Close())

	s3 := write(t, filepath.Join(dir, "model-extra.safetensors"), encode(t, []rawTensor{
		{"a", "F16", []int{1}, u16s(0x3c00)},
	}))
	_, err = OpenDir(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"a"`)
	assert.Contains(t, err.Error(), s1)
	assert.Contains(t, err.Error(), s3)
}
