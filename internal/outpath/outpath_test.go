package outpath

import (
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
