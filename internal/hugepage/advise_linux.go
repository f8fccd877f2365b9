package hugepage

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Advise asks for huge pages over the whole 2 MB pages inside b. It is
// advice: where the kernel has none to give, b keeps 4 KB pages.
func Advise(b []byte) {
	if len(b) == 0 {
		return
	}
	off := int(-uintptr(unsafe.Pointer(&b[0])) & (Size - 1))
	if off < len(b) {
		_ = unix.Madvise(b[off:], unix.MADV_HUGEPAGE)
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
