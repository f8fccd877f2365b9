package ops

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/pinfer/pinfer/ops/avx2"
)

// The row-wise neural-network kernels. Activations are f32 rows of one token
// each; these functions are the reference meaning of the ops that use them.

// RMSNorm writes x / rms(x) * w. Accumulates in float64 so that long rows do
// not drift from PyTorch's fp32 result.
func RMSNorm(out, x, w []float32, eps float32) {
	if Fast {
		// The same sums and products in vector registers: a decode step
		// runs some sixty of these alone on its caller.
		scale := float32(1 / math.Sqrt(avx2.SumSq64(x)/float64(len(x))+float64(eps)))
		avx2.ScaleMul(out[:len(x)], x, w, scale)
		return
	}
	// Four sums, so that each add need not wait for the one before.
	var s0, s1, s2, s3 float64
	n4 := len(x) &^ 3
	for i := 0; i < n4; i += 4 {
		v := x[i : i+4 : i+4]
		s0 += float64(v[0]) * float64(v[0])
		s1 += float64(v[1]) * float64(v[1])
		s2 += float64(v[2]) * float64(v[2])
		s3 += float64(v[3]) * float64(v[3])
	}
	for _, v := range x[n4:] {
		s0 += float64(v) * float64(v)
	}
	ss := (s0 + s1) + (s2 + s3)
	scale := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	for i, v := range x {
		out[i] = v * scale * w[i]
	}
}

// LayerNorm writes (x - mean) / std * w + b; b may be nil.
func LayerNorm(out, x, w, b []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := sum / float64(len(x))
	var ss float64
	for _, v := range x {
		d := float64(v) - mean
		ss += d * d
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	for i, v := range x {
		y := float32((float64(v) - mean) * inv)
		y *= w[i]
		if b != nil {
			y += b[i]
		}
		out[i] = y
	}
}

// RoPE rotates the first nRot dims of each head of one token at position pos.
// neox pairs dim i with i+nRot/2 (GPT-NeoX, Falcon); otherwise dims 2i and
// 2i+1 (Meta's LLaMA layout, which llama.cpp's GGUF keeps).
func RoPE(x []float32, nHead, headDim, nRot, pos int, theta float64, neox bool) {
	half := nRot / 2
	var cs, sn [ropeMax]float32
	c, s := ropeAngles(cs[:min(half, ropeMax)], sn[:min(half, ropeMax)], theta, nRot, pos)
	for h := 0; h < nHead; h++ {
		v := x[h*headDim : h*headDim+nRot]
		if neox {
			avx2.RotateHalves(v[:half], v[half:], c, s)
		} else {
			avx2.RotatePairs(v, c, s)
		}
	}
}

// ropeMax is the widest rotation whose angles a call makes on its stack
// past the kept positions (heads of up to 256).
const ropeMax = 128

// ropeKeep is how many cosines (and as many sines) are kept per theta and
// nRot: every layer's q and k at a position use the same angles, and a
// prompt's tokens take turns on the pool's threads, so the one position
// kept before was made again at almost every call of a prefill. 2M is
// 32768 positions of a 128-wide head in 16 MB; later positions make theirs
// at each call.
const ropeKeep = 1 << 21

// ropeKept is the angles of positions [0, n) for one theta and nRot, each
// position's nRot/2 cosines and sines at pos*nRot/2. Readers load n, then
// the slices: a growth stores the copied slices before the larger n, and
// positions below n are never written again.
type ropeKept struct {
	mu       sync.Mutex
	n        atomic.Int64
	cos, sin atomic.Pointer[[]float32]
}

var ropeCache sync.Map // ropeKey -> *ropeKept

// ropeAngles returns the cosines and sines of position pos's angles: the
// kept ones, or past those made into c and s (or new slices, if nRot/2 is
// longer).
func ropeAngles(c, s []float32, theta float64, nRot, pos int) ([]float32, []float32) {
	half := nRot / 2
	if pos >= ropeKeep/max(half, 1) || pos < 0 {
		if half > len(c) {
			c, s = make([]float32, half), make([]float32, half)
		}
		ropeFill(c[:half], s[:half], ropeFreqs(theta, nRot), pos)
		return c[:half], s[:half]
	}
	key := ropeKey{theta, nRot}
	v, ok := ropeCache.Load(key)
	if !ok {
		v, _ = ropeCache.LoadOrStore(key, new(ropeKept))
	}
	k := v.(*ropeKept)
	if int64(pos) >= k.n.Load() {
		k.grow(theta, nRot, pos)
	}
	return (*k.cos.Load())[pos*half:][:half], (*k.sin.Load())[pos*half:][:half]
}

// grow makes the angles of the positions up to pos, and a stretch beyond
// it (as many again as are kept, at least 256) so that decode, a position
// a step, makes them and allocates only now and then.
func (k *ropeKept) grow(theta float64, nRot, pos int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := int(k.n.Load())
	if pos < n {
		return
	}
	half := nRot / 2
	want := min(ropeKeep/max(half, 1), max(pos+1, 2*n, 256))
	var cos, sin []float32
	if p := k.cos.Load(); p != nil {
		cos, sin = *p, *k.sin.Load()
	}
	if cap(cos) < want*half {
		cos = append(make([]float32, 0, want*half), cos[:n*half]...)
		sin = append(make([]float32, 0, want*half), sin[:n*half]...)
	}
	cos, sin = cos[:want*half], sin[:want*half]
	f := ropeFreqs(theta, nRot)
	for p := n; p < want; p++ {
		ropeFill(cos[p*half:][:half], sin[p*half:][:half], f, p)
	}
	k.cos.Store(&cos)
	k.sin.Store(&sin)
	k.n.Store(int64(want))
}

// ropeFill sets c and s to the cosines and sines of position pos's angles.
func ropeFill(c, s, freqs []float32, pos int) {
	for i, f := range freqs {
		angle := float64(float32(pos) * f)
		c[i], s[i] = float32(math.Cos(angle)), float32(math.Sin(angle))
	}
}

// ropeFreqs returns RoPE's inverse frequencies for theta and nRot, made
// once: every layer's q and k at every position use the same ones.
func ropeFreqs(theta float64, nRot int) []float32 {
	key := ropeKey{theta, nRot}
	if f, ok := ropeTables.Load(key); ok {
		return f.([]float32)
	}
	f := make([]float32, nRot/2)
	for i := range f {
		// PyTorch computes the inverse frequency in f32; matching it keeps
		// long positions within tolerance of the reference.
		f[i] = float32(1 / math.Pow(theta, float64(2*i)/float64(nRot)))
	}
	ropeTables.Store(key, f)
	return f
}

type ropeKey struct {
	theta float64
	nRot  int
}

var ropeTables sync.Map

// Softmax normalises x in place, stable against large values.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	inv := 1 / avx2.ExpSum(x, m)
	for i := range x {
		x[i] *= inv
	}
}

// Above appends to dst the indices of x's values above cut, ascending: a
// predictor's choice of neurons from their scores.
func Above(dst []int32, x []float32, cut float32) []int32 { return avx2.Above(dst, x, cut) }

// ReLU, SiLU and GELU apply their activation in place.
func ReLU(x []float32) {
	for i, v := range x {
		if v < 0 {
			x[i] = 0
		}
	}
}

func SiLU(x []float32) {
	for i, v := range x {
		x[i] = v / (1 + float32(math.Exp(float64(-v))))
	}
}

// GELU is the tanh approximation that GGML and most GELU models use.
func GELU(x []float32) {
	const c = 0.7978845608028654 // sqrt(2/pi)
	for i, v := range x {
		f := float64(v)
		x[i] = float32(0.5 * f * (1 + math.Tanh(c*(f+0.044715*f*f*f))))
	}
}

// Dot is the f32 dot product of equal-length vectors: four running sums in
// plain Go, the vector kernel's sixteen when Fast.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	if Fast {
		return avx2.Dot(a, b)
	}
	var s0, s1, s2, s3 float32
	n := len(a)
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Axpy adds a*x to y: on the vector kernel when Fast (fused multiply-adds)
// or a is 1 (partial sums, biases: y + x exactly, fused or not).
func Axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	if Fast || a == 1 {
		avx2.AxpyF32Strided(y, x, len(y), []float32{a})
		return
	}
	for i := range y {
		y[i] += a * x[i]
	}
}
