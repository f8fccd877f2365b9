package gguf

import (
	"os"
	"unsafe"

	"github.com/pinfer/pinfer/internal/hugepage"
	"golang.org/x/sys/unix"
)

// mapFd maps size bytes of fd read-only at a 2 MB boundary with huge pages
// advised: where the page cache holds the file in 2 MB folios (ext4 and xfs
// make them when a file is read through such a map), one fault maps 2 MB
// and the weights' reads seldom miss the TLB (ops/avx2/NOTES.md).
func mapFd(fd, size int) ([]byte, func() error, error) {
	// Reserve address space with room for a 2 MB boundary, put the file
	// there (its map ends on a page), and give the rest of the reservation
	// back.
	page := uintptr(os.Getpagesize())
	mapped := (uintptr(size) + page - 1) &^ (page - 1)
	span := mapped + hugepage.Size
	res, err := unix.MmapPtr(-1, 0, nil, span, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, err
	}
	head := -uintptr(res) & (hugepage.Size - 1)
	p, err := unix.MmapPtr(fd, 0, unsafe.Add(res, head), uintptr(size), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_FIXED)
	if err != nil {
		_ = unix.MunmapPtr(res, span)
		return nil, nil, err
	}
	if head > 0 {
		_ = unix.MunmapPtr(res, head)
	}
	if tail := span - head - mapped; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(p, mapped), tail)
	}
	data := unsafe.Slice((*byte)(p), size)
	hugepage.Advise(data)
	return data, func() error { return unix.MunmapPtr(p, mapped) }, nil
}
