package ops

import (
	"math"
	"sync"

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
	c, s := cs[:min(half, ropeMax)], sn[:min(half, ropeMax)]
	if half > ropeMax {
		c, s = make([]float32, half), make([]float32, half)
	}
	ropeAngles(c, s, theta, nRot, pos)
	for h := 0; h < nHead; h++ {
		v := x[h*headDim : h*headDim+nRot]
		if neox {
			lo, hi := v[:half], v[half:]
			for i, x0 := range lo {
				x1 := hi[i]
				lo[i] = x0*c[i] - x1*s[i]
				hi[i] = x0*s[i] + x1*c[i]
			}
			continue
		}
		for i := range c {
			x0, x1 := v[2*i], v[2*i+1]
			v[2*i] = x0*c[i] - x1*s[i]
			v[2*i+1] = x0*s[i] + x1*c[i]
		}
	}
}

// ropeMax is the most angles a position's cache holds (heads of up to 256).
const ropeMax = 128

// ropeLast keeps the last position's cosines and sines: every layer's q
// and k of a decode step share them, so they are made once a step rather
// than twice a layer (64 of each per call for a 128-wide head). Callers
// copy them out under the lock, which allocates nothing.
var ropeLast struct {
	sync.Mutex
	theta     float64
	nRot, pos int
	cos, sin  [ropeMax]float32
}

// ropeAngles sets c and s (nRot/2 each) to the cosines and sines of
// position pos's angles.
func ropeAngles(c, s []float32, theta float64, nRot, pos int) {
	fill := func(c, s []float32) {
		for i, f := range ropeFreqs(theta, nRot) {
			angle := float64(float32(pos) * f)
			c[i], s[i] = float32(math.Cos(angle)), float32(math.Sin(angle))
		}
	}
	if len(c) > ropeMax {
		fill(c, s)
		return
	}
	r := &ropeLast
	r.Lock()
	if r.theta != theta || r.nRot != nRot || r.pos != pos {
		fill(r.cos[:len(c)], r.sin[:len(c)])
		r.theta, r.nRot, r.pos = theta, nRot, pos
	}
	copy(c, r.cos[:len(c)])
	copy(s, r.sin[:len(c)])
	r.Unlock()
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
