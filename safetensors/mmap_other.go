//go:build !unix

package safetensors

import "os"

// mapFile reads the file into memory where mmap is not available.
func mapFile(path string) ([]byte, func() error, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, openErr(path, err)
	}
	return buf, func() error { return nil }, nil
}
