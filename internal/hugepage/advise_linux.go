package hugepage

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// advise madvises the whole 2 MB pages inside b to be huge, or not.
func advise(b []byte, huge bool) {
	if len(b) == 0 {
		return
	}
	advice := unix.MADV_NOHUGEPAGE
	if huge {
		advice = unix.MADV_HUGEPAGE
	}
	off := int(-uintptr(unsafe.Pointer(&b[0])) & (Size - 1))
	if off < len(b) {
		_ = unix.Madvise(b[off:], advice)
	}
}

// Share returns the part of b's resident bytes that are mapped in 2 MB
// pages, b being a whole mapping (as gguf makes); ok is false when the
// kernel does not say.
func Share(b []byte) (frac float64, ok bool) {
	if len(b) == 0 {
		return 0, false
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	huge, rss, ok := parseSmaps(f, uintptr(unsafe.Pointer(&b[0])))
	if !ok || rss == 0 {
		return 0, false
	}
	return float64(huge) / float64(rss), true
}

// Uncache drops a written (and synced) file from the page cache. The page
// cache keeps the small folios a write made; once the file is read again
// through a map that Advise covers, ext4 and xfs cache it in 2 MB folios.
func Uncache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// Alloc maps n zeroed values of anonymous memory at a 2 MB boundary, in
// huge pages if huge (where the kernel has them) or held to 4 KB pages if
// not. A buffer carved from the Go heap gets huge pages only where its 2 MB
// ranges were never touched before: a benchmark's stream buffer made after
// half a gigabyte of matrices came back in 4 KB pages and read 25% slower.
// free unmaps it; T must hold no Go pointers.
func Alloc[T any](n int, huge bool) (b []T, free func(), err error) {
	var z T
	size := n * int(unsafe.Sizeof(z))
	if size <= 0 {
		return nil, func() {}, nil
	}
	p, mapped, err := Reserve(size, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return nil, nil, err
	}
	b = unsafe.Slice((*T)(p), n)
	advise(bytesOf(b), huge)
	return b, func() { _ = unix.MunmapPtr(p, mapped) }, nil
}

// Reserve maps n bytes (mapped: n rounded up to a page) of private
// anonymous memory with protection prot, starting on a 2 MB boundary so
// that every whole 2 MB of it can be one huge page. gguf puts a file's map
// over such a reservation.
func Reserve(n int, prot int) (p unsafe.Pointer, mapped uintptr, err error) {
	page := uintptr(os.Getpagesize())
	mapped = (uintptr(n) + page - 1) &^ (page - 1)
	span := mapped + Size
	res, err := unix.MmapPtr(-1, 0, nil, span, prot, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, 0, err
	}
	head := -uintptr(res) & (Size - 1)
	if head > 0 {
		_ = unix.MunmapPtr(res, head)
	}
	p = unsafe.Add(res, head)
	if tail := span - head - mapped; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(p, mapped), tail)
	}
	return p, mapped, nil
}

// Drop gives back the whole 2 MB pages inside b (MADV_DONTNEED), only for
// a shared file map, which reads them back from the page cache: private
// memory would read back as zeros. Whole 2 MB pages only: dropping part of
// one splits its mapping, and the rest, a neighbour's, would come back in
// 4 KB pages, each a fault and a TLB entry.
func Drop(b []byte) {
	if len(b) == 0 {
		return
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	lo, hi := (p+Size-1)&^(Size-1), (p+uintptr(len(b)))&^(Size-1)
	if hi > lo {
		_ = unix.Madvise(b[lo-p:hi-p], unix.MADV_DONTNEED)
	}
}

// Populate has the kernel fault in b's pages for writing in one call
// (MADV_POPULATE_WRITE, Linux 5.14), not one fault a page; where it cannot,
// the first writes fault them in as usual.
func Populate(b []byte) {
	if len(b) > 0 {
		_ = unix.Madvise(b, unix.MADV_POPULATE_WRITE)
	}
}
