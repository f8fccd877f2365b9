//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package predictors

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the whole process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return time.Duration(time.Now().UnixNano()) // as if always busy
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
