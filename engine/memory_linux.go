package engine

import "golang.org/x/sys/unix"

// memoryBytes is the machine's memory and swap, or 0 if unknown.
func memoryBytes() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return (int64(si.Totalram) + int64(si.Totalswap)) * int64(si.Unit)
}
