// Package hugepage asks the kernel for transparent huge pages (2 MB) under
// weight memory. Rows read at random miss the TLB once per 4 KB page, and in
// a virtual machine each miss walks two page tables: on the 2-core VM of
// ops/avx2/NOTES.md huge pages made a single-thread streaming read 18% and a
// 10% q4_0 row gather 40% faster.
package hugepage

import "unsafe"

// Size is the huge page size that Advise aims for.
const Size = 2 << 20

// Advise asks for huge pages over the whole 2 MB pages inside b. It is
// advice: where the kernel has none to give, b keeps 4 KB pages.
func Advise[T any](b []T) { advise(bytesOf(b), true) }

// Refuse keeps b in 4 KB pages, for a benchmark that shows what TLB misses
// cost.
func Refuse[T any](b []T) { advise(bytesOf(b), false) }

func bytesOf[T any](b []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), len(b)*int(unsafe.Sizeof(z)))
}
