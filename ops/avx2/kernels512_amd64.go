//go:build amd64 && !purego

package avx2

import "github.com/klauspost/cpuid/v2"

// Hand-written in kernels512_amd64.s.

//go:noescape
func prepQ4x(xs *byte, xq *byte, nblk int)

//go:noescape
func gatherQ4v(out *float32, w *byte, stride int, rows *int32, n int, xs *byte, ngrp int, m1, m2 uint64, mid int)

//go:noescape
func gatherQ4v4(out *float32, ldo int, w *byte, stride int, rows *int32, n int, xs *byte, xstride int, ngrp int)

//go:noescape
func axpyQ4v(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int)

//go:noescape
func gatherQ8f(out *float32, w *byte, stride int, rows *int32, n int, x *float32, nblk int)

// Hand-written in q4r16_amd64.s.

//go:noescape
func repackQ4r16(pk *byte, w *byte, offs *int32, nblk int)

// dotQ4r16's xs holds eight token addresses: a Go pointer held as uintptr
// only for the call, while the Acts that owns it is live; each token's
// block totals are tot bytes past its address (Acts.totAt).
//
//go:noescape
func dotQ4r16(out *float32, ldo int, pk *byte, xs *uintptr, ngrp int, mask uint16, nt int, tot int)

// In exp_amd64.s.
//
//go:noescape
func expSum(x *float32, n int, m float32) float32

func has512() bool {
	return cpuid.CPU.Supports(cpuid.AVX512F, cpuid.AVX512BW, cpuid.AVX512DQ, cpuid.AVX512VL, cpuid.AVX512VBMI, cpuid.AVX512VNNI, cpuid.GFNI)
}

//go:noescape
func quantQ8v(dst *byte, x *float32, nblk int)

//go:noescape
func prepQ8x(xs *byte, xq *byte, nblk int)

//go:noescape
func gatherQ8v(out *float32, w *byte, stride int, rows *int32, n int, xs *byte, npair int, m1, m2 uint64, mid int)

// In kernels_q8f_amd64.s.

//go:noescape
func f32ToF16(dst *uint16, src *float32, n int)

//go:noescape
func gatherQ8f2(out *float32, w *byte, stride int, rows *int32, n int, x *float32, nblk int)

//go:noescape
func axpyQ4i16(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int, rec *byte)

//go:noescape
func axpyQ4i8(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int, rec *byte)

// Hand-written in shortrows_amd64.s (one template, shortrows_amd64.h, for
// f32 and for f16 rows).

//go:noescape
func dotRowsF32x4(out *float32, ldo int, w *byte, stride int, n int, x *float32, ldx int, body int, tail uint64)

//go:noescape
func axpyRowsF32x4(y *float32, ldy int, w *byte, stride int, n int, coef *float32, ldc int, masks uint64)

//go:noescape
func dotRowsF16x4(out *float32, ldo int, w *byte, stride int, n int, x *float32, ldx int, body int, tail uint64)

//go:noescape
func axpyRowsF16x4(y *float32, ldy int, w *byte, stride int, n int, coef *float32, ldc int, masks uint64)

// In axpyi8_amd64.s (AVX2): the int8 q4_0 axpy for CPUs without AVX-512.

//go:noescape
func axpyQ4i16a(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int, rec *byte)

// In q4p8_amd64.s (AVX2): the mat-vec over rows packed eight at a time.

//go:noescape
func gatherQ4p8(out *float32, p *byte, ngroups int, xq *byte, nblk int, tab *byte)

//go:noescape
func gatherQ4p8x2(out *float32, p *byte, ngroups int, xq *byte, nblk int, tab *byte, poff int, ooff int)

//go:noescape
func gatherQ4p8r4(out *float32, p *byte, ngroups int, xq *byte, nblk int, tab *byte, poff int, ooff int, ahead int)

//go:noescape
func gatherQ4p8x4(out *float32, ldo int, p *byte, ngroups int, xq *byte, nblk int, tab *byte)

// In q4p8_amd64.s (AVX-512 and VNNI): gatherQ4p8x4 over two groups at once.

//go:noescape
func gatherQ4p8z4(out *float32, ldo int, p *byte, npairs int, xq *byte, nblk int, tab *byte)

// In q4a16_amd64.s (AVX2): the axpy over every row, packed for it.

//go:noescape
func axpyQ4a16(y *float32, p *byte, coef *float32, ngroups int, m int, runs int)

// In q4a16_amd64.s (AVX-512 and VNNI): axpyQ4a16's twin.

//go:noescape
func axpyQ4a16z(y *float32, p *byte, coef *float32, ngroups int, m int, runs int)

// In quant_amd64.s (AVX2 and F16C): quantQ8v's twin for CPUs without AVX-512.

//go:noescape
func quantQ8a(dst *byte, x *float32, nblk int)

//go:noescape
func p8Tab(tab *byte, xq *byte, nblk int)

// In elementwise_amd64.s (AVX2 and FMA, like the kernels of kernels_amd64.s).

//go:noescape
func sumSq64(x *float32, n int) float64

//go:noescape
func scaleMul(out, x, w *float32, s float32, n int)

//go:noescape
func ropePairs(v, c, s *float32, n int)

//go:noescape
func above(dst *int32, x *float32, n int, cut float32, first int) int

//go:noescape
func ropeHalves(lo, hi, c, s *float32, n int)

// In stream_amd64.s (AVX2): the four-run sum.

//go:noescape
func sumRuns(a *float32, n int, q int) float32
