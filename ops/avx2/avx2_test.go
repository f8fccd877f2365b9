package avx2

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/ops/half"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	denseCols = []int{1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 4096 + 3}
	quantCols = []int{32, 64, 96, 128, 160, 256, 4096, 4096 + 32, 4096 + 64, 4096 + 96}
)

// paths are the kernel sets this CPU can run: the portable Go, AVX2 and
// AVX-512. Every reference test runs on each.
func paths() []string {
	p := []string{"go"}
	if hasAVX2 {
		p = append(p, "avx2")
	}
	if has512Init {
		// avx512-4x4: the prefill without the sixteen-row kernel, so that
		// gatherQ4v4 stays checked at every token count.
		p = append(p, "avx512", "avx512-4x4")
	}
	return p
}

// What init detected; TestMain records it before any test toggles it.
var hasAVX2, has512Init bool

// onPath selects a kernel set for the duration of f.
func onPath(p string, f func()) {
	Available, AVX512 = p != "go" && hasAVX2, strings.HasPrefix(p, "avx512")
	r16Off = p == "avx512-4x4"
	defer func() { Available, AVX512, r16Off = hasAVX2, has512Init, false }()
	f()
}

// forPaths runs f as a subtest per path.
func forPaths(t *testing.T, f func(t *testing.T)) {
	for _, p := range paths() {
		t.Run(p, func(t *testing.T) { onPath(p, func() { f(t) }) })
	}
}

func colsFor(k kind) []int {
	if k == kF32 || k == kF16 {
		return denseCols
	}
	return quantCols
}

// relTol is the tolerance relative to Σ|terms| that summation order allows.
func relTol(k kind) float64 {
	if k == kQ8 || k == kQ4 {
		return 1e-4
	}
	return 1e-5
}

func TestMain(m *testing.M) {
	hasAVX2, has512Init = Available, AVX512
	fmt.Printf("avx2.Available = %v, AVX512 = %v\n", Available, AVX512)
	os.Exit(m.Run())
}

// gather runs the kernel of kind k; x is used as is for f32/f16 and
// quantized with QuantizeQ8 for the others. It returns the activations the
// reference must use.
func gather(k kind, out []float32, w []byte, cols int, rows []int32, x []float32) []float64 {
	if k == kQ8 || k == kQ4 {
		xq := make([]byte, cols/32*34+2)[2:] // unaligned
		QuantizeQ8(xq, x)
		gatherKind(k, out, w, cols, rows, x, xq)
		return refQ8(xq)
	}
	gatherKind(k, out, w, cols, rows, x, nil)
	xr := make([]float64, len(x))
	for i, v := range x {
		xr[i] = float64(v)
	}
	return xr
}

// gatherKind runs k's gather: f32 and f16 read x, q8_0 and q4_0 read xq.
func gatherKind(k kind, out []float32, w []byte, cols int, rows []int32, x []float32, xq []byte) {
	switch k {
	case kF32:
		GatherF32(out, w, cols, rows, x)
	case kF16:
		GatherF16(out, w, cols, rows, x)
	case kQ8:
		GatherQ8_0(out, w, cols, rows, xq)
	case kQ4:
		GatherQ4_0(out, w, cols, rows, xq)
	}
}

func axpy(k kind, y []float32, w []byte, cols int, rows []int32, coef []float32) {
	switch k {
	case kF32:
		AxpyF32(y, w, cols, rows, coef)
	case kF16:
		AxpyF16(y, w, cols, rows, coef)
	case kQ8:
		AxpyQ8_0(y, w, cols, rows, coef)
	case kQ4:
		AxpyQ4_0(y, w, cols, rows, coef)
	}
}

// checkGather compares out with the float64 reference; ok is false when the
// reference is not finite (fuzzed data), where only not crashing matters.
func checkGatherRef(t *testing.T, k kind, out []float32, w []byte, cols int, rows []int32, xr []float64) {
	t.Helper()
	ids := rows
	if ids == nil {
		for i := range out {
			ids = append(ids, int32(i))
		}
	}
	rb := k.rowBytes(cols)
	for i, r := range ids {
		row := refRow(k, w[int(r)*rb:][:rb], cols)
		var s, mag float64
		for j, v := range row {
			s += v * xr[j]
			mag += math.Abs(v * xr[j])
		}
		if math.IsNaN(s) || math.IsInf(s, 0) || mag > 1e30 {
			continue
		}
		tol := relTol(k)*mag + 1e-30
		// Written as !(<=) so that a NaN result fails too.
		if !(math.Abs(float64(out[i])-s) <= tol) {
			t.Fatalf("%v cols=%d row %d (id %d): got %g, want %g (tol %g)", k, cols, i, r, out[i], s, tol)
		}
	}
}

func TestGather(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range []kind{kF32, kF16, kQ8, kQ4} {
		for _, cols := range colsFor(k) {
			const nrows = 37
			off := 1 + r.IntN(3)
			w := randMatrix(r, k, nrows, cols, off)
			x := randVec(r, cols)
			for name, rows := range rowSets(r, nrows) {
				t.Run(fmt.Sprintf("%v/cols%d/%s", k, cols, name), func(t *testing.T) {
					n := len(rows)
					if rows == nil {
						n = nrows
					}
					out := make([]float32, n+1)[1:]
					for i := range out {
						out[i] = float32(math.NaN()) // must be overwritten
					}
					forPaths(t, func(t *testing.T) {
						for i := range out {
							out[i] = float32(math.NaN())
						}
						xr := gather(k, out, w, cols, rows, x)
						checkGatherRef(t, k, out, w, cols, rows, xr)
					})
				})
			}
		}
	}
}

func checkAxpyRef(t *testing.T, k kind, got, y0 []float32, w []byte, cols int, rows []int32, coef []float32) {
	t.Helper()
	ids := rows
	if ids == nil {
		for i := range coef {
			ids = append(ids, int32(i))
		}
	}
	rb := k.rowBytes(cols)
	want := make([]float64, cols)
	mag := make([]float64, cols)
	for j, v := range y0 {
		want[j], mag[j] = float64(v), math.Abs(float64(v))
	}
	for i, r := range ids {
		rw := w[int(r)*rb:][:rb]
		for j, v := range refRow(k, rw, cols) {
			want[j] += float64(coef[i]) * v
			mag[j] += math.Abs(float64(coef[i]) * v)
			if k == kQ4 {
				// The kernel adds q·s and the -8·s offset of a block
				// separately, so its rounding scales with 8|s| too.
				mag[j] += 8 * math.Abs(float64(coef[i])*refHalf(le16(rw[18*(j/32):])))
			}
		}
	}
	if k == kQ4 && Available {
		for j, a := range i8Allowance(w, cols, ids, coef) {
			mag[j] += a / relTol(k)
		}
	}
	for j := range want {
		if math.IsNaN(want[j]) || math.IsInf(want[j], 0) || mag[j] > 1e30 {
			continue
		}
		tol := relTol(k)*mag[j] + 1e-30
		// Written as !(<=) so that a NaN result fails too.
		if !(math.Abs(float64(got[j])-want[j]) <= tol) {
			t.Fatalf("%v cols=%d y[%d]: got %g, want %g (tol %g)", k, cols, j, got[j], want[j], tol)
		}
	}
}

func TestAxpy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range []kind{kF32, kF16, kQ8, kQ4} {
		for _, cols := range colsFor(k) {
			const nrows = 37
			w := randMatrix(r, k, nrows, cols, 1+r.IntN(3))
			for name, rows := range rowSets(r, nrows) {
				t.Run(fmt.Sprintf("%v/cols%d/%s", k, cols, name), func(t *testing.T) {
					n := len(rows)
					if rows == nil {
						n = nrows
					}
					coef := randVec(r, n)
					y0 := randVec(r, cols)
					forPaths(t, func(t *testing.T) {
						y := append(make([]float32, 0, cols), y0...)
						axpy(k, y, w, cols, rows, coef)
						checkAxpyRef(t, k, y, y0, w, cols, rows, coef)
					})
				})
			}
		}
	}
}

func TestDotAndSum(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 4099, 4160} {
		a, b := randVec(r, n), randVec(r, n)
		var want, mag, sum, smag float64
		for i := range a {
			want += float64(a[i]) * float64(b[i])
			mag += math.Abs(float64(a[i]) * float64(b[i]))
			sum += float64(a[i])
			smag += math.Abs(float64(a[i]))
		}
		assert.InDelta(t, want, Dot(a, b), 1e-5*mag+1e-30, "Dot n=%d", n)
		assert.InDelta(t, sum, Sum(a), 1e-5*smag+1e-30, "Sum n=%d", n)
		assert.InDelta(t, sum, SumRuns(a), 1e-5*smag+1e-30, "SumRuns n=%d", n)
	}
}

func TestQuantizeQ8(t *testing.T) { forPaths(t, testQuantizeQ8) }

// The paths must round alike, ties and zero blocks included: the kernels
// of one model may run on either.
func TestQuantizeQ8Paths(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	x := randVec(r, 32*400)
	for b := 0; b < 400; b++ {
		blk := x[32*b : 32*b+32]
		switch b % 4 {
		case 1: // exact halves of the step: ties
			for j := range blk {
				blk[j] = float32(r.IntN(255)-127) / 2 * 0.02
			}
			blk[0] = 2.54
		case 2:
			clear(blk)
		case 3:
			for j := range blk {
				blk[j] *= 1e-30
			}
		}
	}
	var want []byte
	for _, p := range paths() {
		onPath(p, func() {
			q := make([]byte, len(x)/32*34)
			QuantizeQ8(q, x)
			if want == nil {
				want = q
				return
			}
			for i := range q {
				if q[i] != want[i] {
					t.Fatalf("%s: byte %d (block %d) is %#x, the %s path's %#x", p, i, i/34, q[i], paths()[0], want[i])
				}
			}
		})
	}
}

func testQuantizeQ8(t *testing.T) {
	// Hand-computed block: amax 2.54 gives d = 0.02 and q = x/0.02.
	x := make([]float32, 32)
	x[0], x[1], x[2], x[3], x[31] = 2.54, -1.27, 0.01, 0.03, -0.05
	q := make([]byte, 34)
	QuantizeQ8(q, x)
	assert.InDelta(t, 0.02, refHalf(le16(q)), 0.02/1024)
	// 0.01/0.02 = 0.5 rounds away from zero; -0.05/0.02 = -2.5 to -3.
	want := map[int]int8{0: 127, 1: -64, 2: 1, 3: 2, 31: -3}
	for j := 0; j < 32; j++ {
		assert.Equal(t, want[j], int8(q[2+j]), "q[%d]", j)
	}

	// Properties on random data: |q| <= 127, error within half a step.
	r := rand.New(rand.NewPCG(7, 8))
	x = randVec(r, 4096)
	x[100] = 0
	q = make([]byte, 4096/32*34)
	QuantizeQ8(q, x)
	for b := 0; b < 128; b++ {
		d := refHalf(le16(q[34*b:]))
		var amax float64
		for _, v := range x[32*b : 32*b+32] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		assert.InDelta(t, amax/127, d, amax/127/1000)
		for j := 0; j < 32; j++ {
			v := int8(q[34*b+2+j])
			assert.NotEqual(t, int8(-128), v)
			// q = round(x*127/amax); d is only its f16 rounding.
			exact := float64(x[32*b+j]) * 127 / amax
			assert.InDelta(t, exact, float64(v), 0.5+1e-4, "block %d elem %d", b, j)
		}
	}
	zero := make([]byte, 34)
	QuantizeQ8(zero, make([]float32, 32))
	assert.Equal(t, make([]byte, 34), zero)
}

func TestHalfRoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := refHalf(uint16(h))
		if math.IsNaN(f) {
			continue
		}
		require.Equal(t, uint16(h), half.Encode(float32(f)), "h=%#04x", h)
		require.Equal(t, f, float64(half.Decode(uint16(h))), "h=%#04x", h)
	}
	// Ties to even, underflow and overflow.
	assert.Equal(t, uint16(0x3c00), half.Encode(1+1.0/2048))
	assert.Equal(t, uint16(0x3c02), half.Encode(1+3.0/2048))
	assert.Equal(t, uint16(0x0000), half.Encode(math.Float32frombits(0x33000000))) // 2^-25
	assert.Equal(t, uint16(0x0001), half.Encode(math.Float32frombits(0x33000001)))
	assert.Equal(t, uint16(0x7c00), half.Encode(65520))
	assert.Equal(t, uint16(0x7bff), half.Encode(65519))
}

func TestMisusePanics(t *testing.T) {
	w := make([]byte, 4*32*34)
	x := make([]float32, 32)
	xq := make([]byte, 34)
	out := make([]float32, 2)
	cases := map[string]func(){
		"GatherF32: row id 4 out of range":  func() { GatherF32(out, w[:4*32*4], 32, []int32{0, 4}, x) },
		"GatherF32: row id -1 out of range": func() { GatherF32(out, w[:4*32*4], 32, []int32{0, -1}, x) },
		"GatherF16: x has length":           func() { GatherF16(out, w, 32, nil, x[:31]) },
		"GatherF32: 2 row ids for 1":        func() { GatherF32(out[:1], w, 32, []int32{0, 1}, x) },
		"GatherQ8_0: cols=33":               func() { GatherQ8_0(out, w, 33, nil, xq) },
		"GatherQ4_0: 2 rows wanted":         func() { GatherQ4_0(out, w[:18], 32, nil, xq) },
		"AxpyF32: y has length":             func() { AxpyF32(x[:3], w, 32, nil, out) },
		"AxpyQ4_0: row id 9":                func() { AxpyQ4_0(x, w[:4*18], 32, []int32{9}, out[:1]) },
		"Dot: len(a)=2":                     func() { Dot(out, x) },
		"QuantizeQ8: len(dst)":              func() { QuantizeQ8(xq[:3], x) },
	}
	for want, fn := range cases {
		func() {
			defer func() {
				msg := fmt.Sprint(recover())
				assert.Contains(t, msg, "avx2."+want)
			}()
			fn()
		}()
	}
}

// The assembly must stay VEX-encodable (AVX2 only): avo's allocator would
// otherwise reach for X16-X31 and the opmask registers of AVX-512.
func TestAsmRegisters(t *testing.T) {
	for _, f := range []string{"kernels_amd64.s", "kernels_q8f_amd64.s"} {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		bad := regexp.MustCompile(`\b([XYZ](1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[1-7])\b`).FindAll(src, 5)
		assert.Empty(t, bad, "AVX-512 registers in %s", f)
	}
}
