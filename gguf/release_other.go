//go:build !linux

package gguf

// Release is a hint that only Linux's map takes (mmap_linux.go).
func (f *File) Release(b []byte) {}
