package outpath

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "model.gguf")
	require.NoError(t, os.WriteFile(in, []byte("weights"), 0o644))
	link := filepath.Join(dir, "link.gguf")
	require.NoError(t, os.Symlink(in, link))

	require.NoError(t, Check(filepath.Join(dir, "new.gguf"), Input{Name: "-m", Path: in}))
	require.NoError(t, Check(filepath.Join(dir, "new.gguf"), Input{Name: "-m", Path: ""}))

	for _, c := range []struct{ out, want string }{
		{in, "is the input -m " + in},
		{filepath.Join(dir, ".", "model.gguf"), "is the input -m"},
		{link, "is the input -m"}, // the same file through a link
		{dir, "is a directory"},
		{filepath.Join(dir, "missing", "x.gguf"), "cannot write in " + filepath.Join(dir, "missing")},
	} {
		err := Check(c.out, Input{Name: "-m", Path: in})
		require.ErrorContains(t, err, c.want, c.out)
		require.NotContains(t, err.Error(), "\n")
	}
	b, err := os.ReadFile(in)
	require.NoError(t, err)
	require.Equal(t, "weights", string(b))
	// The probe leaves nothing behind.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2)

	if os.Getuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		require.NoError(t, os.Mkdir(ro, 0o500))
		require.ErrorContains(t, Check(filepath.Join(ro, "x"), Input{Name: "-m", Path: in}), "cannot write in")
	}
}

// Replace puts the whole file in place or, when writing fails, leaves the
// old one and no temporary file behind.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.bin")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	boom := errors.New("boom")
	require.ErrorIs(t, Replace(path, func(w io.Writer) error {
		_, _ = w.Write([]byte("half"))
		return boom
	}), boom)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "old", string(b))
	require.NoError(t, Replace(path, func(w io.Writer) error {
		_, err := w.Write([]byte("new"))
		return err
	}))
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "new", string(b))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}
