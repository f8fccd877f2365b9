//go:build unix && !linux

package gguf

import "golang.org/x/sys/unix"

// mapFd maps size bytes of fd read-only, where the kernel is asked for
// nothing more.
func mapFd(fd, size int) ([]byte, func() error, error) {
	data, err := unix.Mmap(fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
