//go:build !linux

package hugepage

// Advise does nothing where transparent huge pages are not asked by madvise.
func Advise([]byte) {}
