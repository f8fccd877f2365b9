package ops

import (
	"sync"

	"github.com/pinfer/pinfer/ops/avx2"
)

// Repacked q4_0 matrices. On AVX2 without AVX-512 the row kernels spend ~9
// operations a row and block, a third of them on scales; with eight rows
// interleaved (avx2.PackQ4x8) one broadcast of x serves all eight and a
// block's scales are one conversion, and a prompt's four tokens share each
// unpacked part. A matrix that the mat-mul reads whole (attention's q, k,
// v, o, the output) is packed once at load; its packed copy then serves
// every row of its whole groups of eight, so that the rows' own bytes are
// not read again and can leave memory. llama.cpp repacks q4_0 at load
// likewise; --no-repack turns it off here too.

// Repack lets Pack pack.
var Repack = true

// Pack copies m's whole groups of eight rows into the packed layout where
// that pays (q4_0 on AVX2 without AVX-512, the fast kernels on, Repack
// set) and returns the bytes of m.Data that only the packed copy is read
// for from now on; nil if it did not pack. Call it before m is shared.
func (m *Matrix) Pack() []byte {
	if !Repack || !Fast || !avx2.PackPays() {
		return nil
	}
	return m.pack()
}

// pack is Pack wherever the packed kernels run (the tests' way in).
func (m *Matrix) pack() []byte {
	if m.Type != Q4_0 || m.Rows < 8 || m.p8 != nil {
		return nil
	}
	rows := m.Data[:m.Rows/8*8*m.rowBytes()]
	m.p8 = avx2.PackQ4x8(rows, m.Cols)
	return rows
}

// PackAll packs ms on up to threads goroutines (Pack) and hands each
// packed matrix's freed rows to release, if not nil.
func PackAll(ms []*Matrix, threads int, release func([]byte)) {
	var wg sync.WaitGroup
	next := make(chan *Matrix)
	for range max(1, threads) {
		wg.Go(func() {
			for m := range next {
				if rows := m.Pack(); rows != nil && release != nil {
					release(rows)
				}
			}
		})
	}
	for _, m := range ms {
		next <- m
	}
	close(next)
	wg.Wait()
}

// packedRows computes rows r0..r1 of part pt that its packed copy holds,
// for the tokens of j.a, and returns the first row it left to the row
// kernels. Whole groups go to the packed kernel in one call; a group that
// the range cuts is computed whole into scratch and the wanted rows copied.
func (j *matJob) packedRows(pt matPart, r0, r1 int) int {
	m := pt.m
	gb := len(m.p8) / (m.Rows / 8)
	end := min(r1, m.Rows/8*8)
	if r0 >= end {
		return r0
	}
	g0, g1 := (r0+7)/8, end/8
	if g1 > g0 {
		avx2.GatherQ4x8Acts(pt.out[8*g0:], m.Rows, m.p8[g0*gb:g1*gb], j.a)
	}
	cut := func(g int) {
		lo, hi := max(r0, 8*g), min(end, 8*g+8)
		s := packScratch.Get().(*[]float32)
		*s = growF(*s, 8*j.T)
		avx2.GatherQ4x8Acts(*s, 8, m.p8[g*gb:(g+1)*gb], j.a)
		for t := range j.T {
			copy(pt.out[t*m.Rows+lo:t*m.Rows+hi], (*s)[8*t+lo-8*g:8*t+hi-8*g])
		}
		packScratch.Put(s)
	}
	if r0%8 != 0 {
		cut(r0 / 8)
	}
	if end%8 != 0 && (r0%8 == 0 || end/8 != r0/8) {
		cut(end / 8)
	}
	return end
}

var packScratch = sync.Pool{New: func() any { return new([]float32) }}
