//go:build unix

package safetensors

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the whole file read-only; pages are read lazily by the kernel,
// so opening a multi-gigabyte shard costs nothing until tensors are touched.
func mapFile(path string) ([]byte, func() error, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, nil, openErr(path, err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", path, err)
	}
	size := st.Size()
	if size == 0 {
		// mmap rejects empty mappings; parse reports the short file.
		return nil, func() error { return nil }, nil
	}
	if size != int64(int(size)) {
		return nil, nil, fmt.Errorf("%s: file of %d bytes is too large to map", path, size)
	}
	buf, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: mmap: %v", path, err)
	}
	return buf, func() error { return unix.Munmap(buf) }, nil
}
