//go:build unix

package gguf

import (
	"fmt"
	"os"
)

// mapFile maps the file read-only so tensor data is paged in on demand
// instead of being copied into the Go heap.
func mapFile(path string) ([]byte, func() error, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.IsDir() {
		return nil, nil, fmt.Errorf("%s: is a directory, not a GGUF file (pinfer convert DIR -o FILE.gguf makes one of a Hugging Face checkpoint)", path)
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	}
	size := st.Size()
	if size == 0 {
		// mmap rejects empty lengths; an empty file still has to fail as truncated.
		return nil, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("%s: file too large to map (%d bytes)", path, size)
	}
	data, unmap, err := mapFd(int(fh.Fd()), int(size))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	return data, unmap, nil
}
