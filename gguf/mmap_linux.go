package gguf

import (
	"unsafe"

	"github.com/pinfer/pinfer/internal/hugepage"
	"golang.org/x/sys/unix"
)

// mapFd maps size bytes of fd read-only at a 2 MB boundary with huge pages
// advised: where the page cache holds the file in 2 MB folios (ext4 and xfs
// make them when a file is read through such a map), one fault maps 2 MB
// and the weights' reads seldom miss the TLB (ops/avx2/NOTES.md).
func mapFd(fd, size int) ([]byte, func() error, error) {
	// Reserve address space at a 2 MB boundary and put the file there.
	res, mapped, err := hugepage.Reserve(size, unix.PROT_NONE)
	if err != nil {
		return nil, nil, err
	}
	p, err := unix.MmapPtr(fd, 0, res, uintptr(size), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_FIXED)
	if err != nil {
		_ = unix.MunmapPtr(res, mapped)
		return nil, nil, err
	}
	data := unsafe.Slice((*byte)(p), size)
	hugepage.Advise(data)
	return data, func() error { return unix.MunmapPtr(p, mapped) }, nil
}

// Release tells the kernel that b, part of the map (a tensor's data or a
// piece of it), will not be read for a while (hugepage.Drop): the page
// cache keeps its pages, and a later read maps them again. The map is
// read-only and shared, so nothing is lost; anything else is left alone.
func (f *File) Release(b []byte) {
	if len(b) == 0 || len(f.data) == 0 || f.unmap == nil {
		return
	}
	base, p := uintptr(unsafe.Pointer(&f.data[0])), uintptr(unsafe.Pointer(&b[0]))
	if p < base || p+uintptr(len(b)) > base+uintptr(len(f.data)) {
		return
	}
	hugepage.Drop(b)
}
