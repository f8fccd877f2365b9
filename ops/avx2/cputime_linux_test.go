package avx2

import (
	"os"
	"runtime"
	"syscall"
	"time"
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

// adviseHuge asks for transparent huge pages on a benchmark matrix when
// PINFER_BENCH_HUGEPAGES is set: it shows what TLB misses cost sparse rows
// (mmapped model files get 4 KB pages, so the default figures are the real ones).
func adviseHuge(b []byte) {
	if os.Getenv("PINFER_BENCH_HUGEPAGES") == "" || len(b) < 2<<20 {
		return
	}
	_ = syscall.Madvise(b[:len(b)&^(2<<20-1)], 14 /* MADV_HUGEPAGE */)
}
