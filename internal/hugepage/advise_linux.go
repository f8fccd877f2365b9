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
