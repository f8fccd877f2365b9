//go:build !amd64 || purego

package avx2

// Without assembly Available stays false and these are never called.

func noAsm() { panic("avx2: assembly kernel called without assembly") }

func dot(a, b *float32, n int) float32 { noAsm(); return 0 }
func sum(a *float32, n int) float32    { noAsm(); return 0 }

func sumSq64(x *float32, n int) float64                               { noAsm(); return 0 }
func scaleMul(out, x, w *float32, s float32, n int)                   { noAsm() }
func ropePairs(v, c, s *float32, n int)                               { noAsm() }
func ropeHalves(lo, hi, c, s *float32, n int)                         { noAsm() }
func above(dst *int32, x *float32, n int, cut float32, first int) int { noAsm(); return 0 }

func gatherF32(out *float32, w *byte, stride int, rows *int32, n int, x *float32, cols int) { noAsm() }
func gatherF16(out *float32, w *byte, stride int, rows *int32, n int, x *float32, cols int) { noAsm() }
func axpyF32(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, cols int)  { noAsm() }
func axpyF16(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, cols int)  { noAsm() }
func gatherQ8_0(out *float32, w *byte, stride int, rows *int32, n int, xq *byte, nblk int, mid int) {
	noAsm()
}
func gatherQ4_0(out *float32, w *byte, stride int, rows *int32, n int, xq *byte, nblk int, xs *byte) {
	noAsm()
}
func axpyQ4i16a(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int, rec *byte) {
	noAsm()
}
func gatherQ4p8(out *float32, p *byte, ngroups int, xq *byte, nblk int, tab *byte) { noAsm() }
func gatherQ4p8x2(out *float32, p *byte, ngroups int, xq *byte, nblk int, tab *byte, poff int, ooff int) {
	noAsm()
}
func gatherQ4p8r4(out *float32, p *byte, ngroups int, xq *byte, nblk int, tab *byte, poff int, ooff int, ahead int) {
	noAsm()
}
func gatherQ4p8x4(out *float32, ldo int, p *byte, ngroups int, xq *byte, nblk int, tab *byte) {
	noAsm()
}
func gatherQ4p8z4(out *float32, ldo int, p *byte, npairs int, xq *byte, nblk int, tab *byte) {
	noAsm()
}
func axpyQ4a16(y *float32, p *byte, coef *float32, ngroups int, m int, runs int)  { noAsm() }
func axpyQ4a16z(y *float32, p *byte, coef *float32, ngroups int, m int, runs int) { noAsm() }
func sumRuns(a *float32, n int, q int) float32                                    { noAsm(); return 0 }
func quantQ8a(dst *byte, x *float32, nblk int)                                    { noAsm() }
func p8Tab(tab *byte, xq *byte, nblk int)                                         { noAsm() }
func prepQ4x2(xs *byte, xq *byte, nblk int)                                       { noAsm() }
func gatherQ4x4(out *float32, ldo int, w *byte, stride int, rows *int32, n int, xs *byte, xsb int, nblk int) {
	noAsm()
}
func axpyQ8_0(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int) { noAsm() }
func axpyQ4_0(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int) { noAsm() }

func has512() bool { return false }

func expSum(x *float32, n int, m float32) float32 { noAsm(); return 0 }

func f32ToF16(dst *uint16, src *float32, n int) { noAsm() }

func prepQ4x(xs *byte, xq *byte, nblk int) { noAsm() }
func gatherQ4v(out *float32, w *byte, stride int, rows *int32, n int, xs *byte, ngrp int, m1, m2 uint64, mid int) {
	noAsm()
}
func gatherQ4v4(out *float32, ldo int, w *byte, stride int, rows *int32, n int, xs *byte, xstride int, ngrp int) {
	noAsm()
}
func axpyQ4v(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int) { noAsm() }
func axpyQ4i8(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int, rec *byte) {
	noAsm()
}
func axpyQ4i16(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int, rec *byte) {
	noAsm()
}
func gatherQ8f(out *float32, w *byte, stride int, rows *int32, n int, x *float32, nblk int) { noAsm() }
func repackQ4r16(pk *byte, w *byte, offs *int32, nblk int)                                  { noAsm() }
func dotQ4r16(out *float32, ldo int, pk *byte, xs *uintptr, ngrp int, mask uint16, nt int, tot int) {
	noAsm()
}
func quantQ8v(dst *byte, x *float32, nblk int) { noAsm() }
func prepQ8x(xs *byte, xq *byte, nblk int)     { noAsm() }
func gatherQ8v(out *float32, w *byte, stride int, rows *int32, n int, xs *byte, npair int, m1, m2 uint64, mid int) {
	noAsm()
}
func gatherQ8f2(out *float32, w *byte, stride int, rows *int32, n int, x *float32, nblk int) {
	noAsm()
}
func dotRowsF32x4(out *float32, ldo int, w *byte, stride int, n int, x *float32, ldx int, body int, tail uint64) {
	noAsm()
}
func axpyRowsF32x4(y *float32, ldy int, w *byte, stride int, n int, coef *float32, ldc int, masks uint64) {
	noAsm()
}
func dotRowsF16x4(out *float32, ldo int, w *byte, stride int, n int, x *float32, ldx int, body int, tail uint64) {
	noAsm()
}
func axpyRowsF16x4(y *float32, ldy int, w *byte, stride int, n int, coef *float32, ldc int, masks uint64) {
	noAsm()
}
