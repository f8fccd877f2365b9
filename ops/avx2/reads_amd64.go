//go:build amd64 && !purego

package avx2

// readRows reads the first lines 64-byte lines of each of the n rows
// w[rows[k]*stride:] as gatherQ4_0 does (four rows side by side, the rows
// dist ahead prefetched into L2, a line of each per line read) but does no
// arithmetic: the fastest this host delivers a gather's scattered reads,
// which BenchmarkGatherShare measures beside the kernel. It returns the OR
// of the bytes read, so that nothing is left out.
//
//go:noescape
func readRows(w *byte, stride int, rows *int32, n int, lines int, dist int) uint64
