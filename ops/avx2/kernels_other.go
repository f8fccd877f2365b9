//go:build !amd64 || purego

package avx2

// Without assembly Available stays false and these are never called.

func noAsm() { panic("avx2: assembly kernel called without assembly") }

func dot(a, b *float32, n int) float32 { noAsm(); return 0 }
func sum(a *float32, n int) float32    { noAsm(); return 0 }

func gatherF32(out *float32, w *byte, stride int, rows *int32, n int, x *float32, cols int) { noAsm() }
func gatherF16(out *float32, w *byte, stride int, rows *int32, n int, x *float32, cols int) { noAsm() }
func axpyF32(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, cols int)  { noAsm() }
func axpyF16(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, cols int)  { noAsm() }
func gatherQ8_0(out *float32, w *byte, stride int, rows *int32, n int, xq *byte, nblk int)  { noAsm() }
func gatherQ4_0(out *float32, w *byte, stride int, rows *int32, n int, xq *byte, nblk int, xs *byte) {
	noAsm()
}
func axpyQ8_0(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int) { noAsm() }
func axpyQ4_0(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int) { noAsm() }
