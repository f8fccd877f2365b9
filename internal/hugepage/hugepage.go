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

// Slice returns n zeroed values from the Go heap (the collector frees
// them) that start on a 2 MB boundary, with the 2 MB pages covering them
// advised huge and faulted in now. Memory written a little at a time, as a
// KV cache gains a row per head and layer each decode step, otherwise takes
// a page fault and a TLB miss per 4 KB page as it fills: in a virtual
// machine the store of a 7B's k and v rows took 13-26 us a layer.
func Slice[T any](n int) []T {
	var z T
	per := Size / int(unsafe.Sizeof(z))
	whole := (n + per - 1) / per * per
	b := make([]T, whole+per)
	off := int(-uintptr(unsafe.Pointer(&b[0]))&(Size-1)) / int(unsafe.Sizeof(z))
	b = b[off : off+whole]
	Advise(b)
	for i := 0; i < whole; i += 4096 / int(unsafe.Sizeof(z)) {
		b[i] = z
	}
	return b[:n:n]
}
