package avx2

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/pinfer/pinfer/internal/hugepage"
)

// threadCPU returns the CPU time of the calling thread. Benchmarks report
// bytes per CPU second besides bytes per wall second: on a shared machine the
// former is what the kernel achieves while it actually runs.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func lockThread()   { runtime.LockOSThread() }
func unlockThread() { runtime.UnlockOSThread() }

// setPages gives a benchmark buffer huge pages, as gguf's map of a model
// file gets them, or holds it to 4 KB pages, which show what TLB misses cost.
func setPages(b []byte, huge bool) {
	if huge {
		hugepage.Advise(b)
		return
	}
	if off := int(-uintptr(unsafe.Pointer(&b[0])) & 4095); off < len(b) {
		_ = syscall.Madvise(b[off:], 15 /* MADV_NOHUGEPAGE */)
	}
}
