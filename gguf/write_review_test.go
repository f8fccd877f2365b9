package gguf

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

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
