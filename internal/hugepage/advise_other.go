//go:build !linux

package hugepage

// advise does nothing where transparent huge pages are not asked by madvise.
func advise([]byte, bool) {}

// Share says nothing where the kernel is not asked.
func Share([]byte) (float64, bool) { return 0, false }

// Uncache does nothing where the page cache is not advised.
func Uncache(string) error { return nil }

// Alloc is a plain Go allocation where pages are not advised.
func Alloc[T any](n int, _ bool) ([]T, func(), error) { return make([]T, n), func() {}, nil }

// Drop keeps the pages where they are not advised.
func Drop([]byte) {}

// Populate leaves the first writes to fault pages in.
func Populate([]byte) {}
