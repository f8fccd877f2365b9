package hugepage

import (
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
