//go:build !linux

package engine

// memoryBytes: unknown here, so CheckContext lets any context through.
func memoryBytes() int64 { return 0 }
