package ops

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// ropeRef rotates x as RoPE's definition says, in float64.
func ropeRef(x []float32, nHead, headDim, nRot, pos int, theta float64, neox bool) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	for h := 0; h < nHead; h++ {
		for i := 0; i < nRot/2; i++ {
			a, b := h*headDim+2*i, h*headDim+2*i+1
			if neox {
				a, b = h*headDim+i, h*headDim+i+nRot/2
			}
			angle := float64(pos) * math.Pow(theta, -float64(2*i)/float64(nRot))
			x0, x1 := out[a], out[b]
			out[a] = x0*math.Cos(angle) - x1*math.Sin(angle)
			out[b] = x0*math.Sin(angle) + x1*math.Cos(angle)
		}
	}
	return out
}

// RoPE against its float64 definition, with positions and bases taking
// turns (the angles of the last position are kept between calls), partial
// rotation, both layouts, and heads wider than the kept angles.
func TestRoPE(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	type shape struct{ nHead, headDim, nRot int }
	for _, sh := range []shape{{4, 64, 64}, {2, 128, 32}, {3, 512, 512}, {1, 6, 4}} {
		for _, neox := range []bool{false, true} {
			for _, pos := range []int{0, 5, 5, 4097, 5, 4097, 31999} {
				for _, theta := range []float64{10000, 500000, 10000} {
					x := make([]float32, sh.nHead*sh.headDim)
					for i := range x {
						x[i] = float32(r.NormFloat64())
					}
					want := ropeRef(x, sh.nHead, sh.headDim, sh.nRot, pos, theta, neox)
					RoPE(x, sh.nHead, sh.headDim, sh.nRot, pos, theta, neox)
					for i, w := range want {
						// The angle is pos·f rounded to float32 first, as PyTorch
						// computes it: at position p that is off by up to p·2^-24.
						if d := math.Abs(float64(x[i]) - w); d > 2e-6+float64(pos)*1.2e-7*math.Abs(w)+float64(pos)*1.2e-7 {
							t.Fatalf("%+v neox=%v pos=%d theta=%g: x[%d] = %g, want %g", sh, neox, pos, theta, i, x[i], w)
						}
					}
				}
			}
		}
	}
}

// Concurrent calls at different positions each get their own angles.
func TestRoPEConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 200 {
				pos := g*1000 + k%7
				x := make([]float32, 128)
				for i := range x {
					x[i] = float32(i%5) - 2
				}
				want := ropeRef(x, 1, 128, 128, pos, 10000, false)
				RoPE(x, 1, 128, 128, pos, 10000, false)
				for i, w := range want {
					if math.Abs(float64(x[i])-w) > 2e-6+float64(pos)*2.4e-7*(1+math.Abs(w)) {
						t.Errorf("pos %d: x[%d] = %g, want %g", pos, i, x[i], w)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
