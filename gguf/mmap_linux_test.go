package gguf

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/pinfer/pinfer/internal/hugepage"
	"github.com/stretchr/testify/require"
)

// The map must hold the file's bytes and start on a 2 MB boundary: a file
// offset and its address must agree modulo 2 MB for the kernel to map the
// page cache's 2 MB folios whole.
func TestMapFileOnHugeBoundary(t *testing.T) {
	want, path := randomFile(t, 1)
	for range 3 {
		data, unmap, err := mapFile(path)
		require.NoError(t, err)
		require.Equal(t, want, data)
		start := uintptr(unsafe.Pointer(&data[0]))
		require.Zero(t, start%hugepage.Size)
		frac, ok := hugepage.Share(data) // read above, so resident
		require.True(t, ok)
		require.True(t, frac >= 0 && frac <= 1, "%v", frac)
		require.NoError(t, unmap())
		// Nothing of the reservation (PROT_NONE) is left on either side of
		// it: an odd-sized file ends inside a page, past which the rest
		// must be unmapped too.
		end := start + (uintptr(len(want))+4095)&^4095
		maps, err := os.ReadFile("/proc/self/maps")
		require.NoError(t, err)
		for _, line := range strings.Split(strings.TrimSpace(string(maps)), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[1] != "---p" {
				continue
			}
			a, b, _ := strings.Cut(f[0], "-")
			from, err1 := strconv.ParseUint(a, 16, 64)
			to, err2 := strconv.ParseUint(b, 16, 64)
			require.NoError(t, errors.Join(err1, err2))
			for _, at := range []uintptr{start - 1, end} {
				require.False(t, uintptr(from) <= at && at < uintptr(to), "the reservation is still mapped: %s", line)
			}
		}
	}
}

// Release drops whole 2 MB pages of the map, which read back as the file;
// bytes outside the map (the Go heap's, which MADV_DONTNEED would zero)
// are left alone.
func TestReleaseKeepsData(t *testing.T) {
	want, path := randomFile(t, 3)
	data, unmap, err := mapFile(path)
	require.NoError(t, err)
	f := &File{data: data, unmap: unmap}
	defer f.Close()
	require.Equal(t, want, data)
	f.Release(data[100 : len(data)-100])
	require.Equal(t, want, data)
	heap := append([]byte(nil), want...)
	f.Release(heap)
	require.Equal(t, want, heap)
}

// randomFile writes three 2 MB pages and a bit of random bytes.
func randomFile(t *testing.T, seed uint64) (data []byte, path string) {
	data = make([]byte, 3*hugepage.Size+77)
	r := rand.New(rand.NewPCG(seed, seed+1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	path = filepath.Join(t.TempDir(), "w.bin")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return data, path
}
