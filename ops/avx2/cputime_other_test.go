//go:build !linux

package avx2

import "time"

func threadCPU() time.Duration { return 0 }
func lockThread()              {}
func unlockThread()            {}
