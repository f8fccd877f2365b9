package gguf

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/pinfer/pinfer/internal/hugepage"
	"github.com/stretchr/testify/require"
)

// The map must hold the file's bytes and start on a 2 MB boundary: a file
// offset and its address must agree modulo 2 MB for the kernel to map the
// page cache's 2 MB folios whole.
func TestMapFileOnHugeBoundary(t *testing.T) {
	want := make([]byte, 3*hugepage.Size+77)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(r.Uint32())
	}
	path := filepath.Join(t.TempDir(), "w.bin")
	require.NoError(t, os.WriteFile(path, want, 0o644))
	for range 3 { // the reservation around each map is given back
		data, unmap, err := mapFile(path)
		require.NoError(t, err)
		require.Equal(t, want, data)
		require.Zero(t, uintptr(unsafe.Pointer(&data[0]))%hugepage.Size)
		frac, ok := hugepage.Share(data) // read above, so resident
		require.True(t, ok)
		require.True(t, frac >= 0 && frac <= 1, "%v", frac)
		require.NoError(t, unmap())
	}
}
