package avx2

import (
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
