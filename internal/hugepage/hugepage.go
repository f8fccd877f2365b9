// Package hugepage asks the kernel for transparent huge pages (2 MB) under
// weight memory. Rows read at random miss the TLB once per 4 KB page, and in
// a virtual machine each miss walks two page tables: on the 2-core VM of
// ops/avx2/NOTES.md huge pages made a single-thread streaming read 18% and a
// 10% q4_0 row gather 40% faster.
package hugepage

// Size is the huge page size that Advise aims for.
const Size = 2 << 20
