package gguf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func listDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out[e.Name()] = string(b)
	}
	return out
}

// WriteFile's temporary file must be one of its own: a user's FILE.tmp
// beside the output is neither truncated nor removed, whether the write
// succeeds or fails, and a failed write leaves the directory as it was
// (an existing output keeps its bytes).
func TestWriteFileLeavesOtherFilesAlone(t *testing.T) {
	for _, fail := range []bool{false, true} {
		dir := t.TempDir()
		path := filepath.Join(dir, "m.gguf")
		require.NoError(t, os.WriteFile(path+".tmp", []byte("the user's notes"), 0o644))
		require.NoError(t, os.WriteFile(path, []byte("old model"), 0o644))
		before := listDir(t, dir)

		w := NewWriter()
		require.NoError(t, w.AddTensor("t", ops.F32, []uint64{4}, func(out io.Writer) error {
			if fail {
				return errors.New("source went away")
			}
			_, err := out.Write(make([]byte, 16))
			return err
		}))
		err := w.WriteFile(path, nil)
		after := listDir(t, dir)
		assert.Equal(t, "the user's notes", after["m.gguf.tmp"], "fail=%v", fail)
		if fail {
			require.Error(t, err)
			assert.Equal(t, before, after)
			continue
		}
		require.NoError(t, err)
		assert.Len(t, after, 2, "only the output and the user's file: %v", after)
		f, err := Open(path)
		require.NoError(t, err)
		_, ok := f.Tensor("t")
		assert.True(t, ok)
		f.Close()
	}
}

// An output path that is a directory fails at once, naming the path, before
// any tensor is produced, and leaves nothing behind.
func TestWriteFileToDirectory(t *testing.T) {
	parent := t.TempDir()
	path := filepath.Join(parent, "out")
	require.NoError(t, os.Mkdir(path, 0o755))
	w := NewWriter()
	called := false
	require.NoError(t, w.AddTensor("t", ops.F32, []uint64{1}, func(out io.Writer) error {
		called = true
		_, err := out.Write(make([]byte, 4))
		return err
	}))
	err := w.WriteFile(path, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "directory")
	assert.False(t, called, "the tensors were produced for nothing")
	assert.Equal(t, map[string]string{"out": ""}, listDir(t, parent))
}

// A copy with one key replaced keeps the magic, every other key in its
// place and every tensor's bytes; an added tensor follows the source's.
func TestCopyOf(t *testing.T) {
	src, err := Open(fixtures.Path(t, "stories260K", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w, err := CopyOf(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Set("llama.block_count", uint32(7)); err != nil {
		t.Fatal(err)
	}
	extra := []byte{1, 2, 3, 4}
	if err := w.AddTensor("extra", ops.F32, []uint64{1}, func(o io.Writer) error { _, err := o.Write(extra); return err }); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "copy.gguf")
	if err := w.WriteFile(path, nil); err != nil {
		t.Fatal(err)
	}
	got, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if got.Magic != src.Magic || len(got.KVs) != len(src.KVs) || len(got.Tensors) != len(src.Tensors)+1 {
		t.Fatalf("copy: magic %q, %d keys, %d tensors; source %q, %d, %d", got.Magic, len(got.KVs), len(got.Tensors), src.Magic, len(src.KVs), len(src.Tensors))
	}
	for i, kv := range src.KVs {
		want := kv.Value
		if kv.Key == "llama.block_count" {
			want, _ = toValue(uint32(7))
		}
		if got.KVs[i].Key != kv.Key || !reflect.DeepEqual(got.KVs[i].Value, want) {
			t.Errorf("key %d: %s = %v, want %s = %v", i, got.KVs[i].Key, got.KVs[i].Value, kv.Key, want)
		}
	}
	for i := range src.Tensors {
		a, b := &src.Tensors[i], &got.Tensors[i]
		if a.Name != b.Name || !bytes.Equal(src.Data(a), got.Data(b)) {
			t.Errorf("tensor %d: %s differs from %s", i, b.Name, a.Name)
		}
	}
	if last := &got.Tensors[len(got.Tensors)-1]; last.Name != "extra" || !bytes.Equal(got.Data(last), extra) {
		t.Errorf("the added tensor is %s", last.Name)
	}
}
