package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// refAttention is causal grouped-query attention in float64 over every
// position's k and v (rows of kall, vall), each rounded as the cache keeps it.
func refAttention(q []float32, kall, vall [][]float32, pos, nh, nkv, window int, kv DType) []float64 {
	hd, vd := len(q)/nh, len(vall[0])/nkv
	round := func(x float32) float64 {
		if kv == F16 {
			return float64(F16ToF32(F32ToF16(x)))
		}
		return float64(x)
	}
	first := 0
	if window > 0 {
		first = max(0, pos-window+1)
	}
	out := make([]float64, nh*vd)
	for h := range nh {
		g := h / (nh / nkv)
		s := make([]float64, pos+1-first)
		m := math.Inf(-1)
		for i := range s {
			for d := range hd {
				s[i] += float64(q[h*hd+d]) * round(kall[first+i][g*hd+d])
			}
			s[i] /= math.Sqrt(float64(hd))
			m = max(m, s[i])
		}
		var z float64
		for i := range s {
			s[i] = math.Exp(s[i] - m)
			z += s[i]
		}
		for i := range s {
			for d := range vd {
				out[h*vd+d] += s[i] / z * round(vall[first+i][g*vd+d])
			}
		}
	}
	return out
}

// The attention op, token by token over a cache in f32 and in f16, on the
// portable path and every vector level, against refAttention.
func TestAttentionCache(t *testing.T) {
	op, _ := Lookup("attention")
	rng := rand.New(rand.NewPCG(4, 4))
	for _, kv := range []DType{F32, F16} {
		for _, c := range []struct{ nh, nkv, hd, window int }{{8, 8, 16, 0}, {8, 2, 20, 0}, {4, 4, 128, 5}} {
			levels := append([]string{"portable"}, fastLevels(t)...)
			for _, level := range levels {
				t.Run(fmt.Sprintf("%v/h%d-kv%d-d%d-w%d/%s", kv, c.nh, c.nkv, c.hd, c.window, level), func(t *testing.T) {
					const steps = 23
					qw, kw := c.nh*c.hd, c.nkv*c.hd
					var st any
					var kall, vall [][]float32
					for pos := range steps {
						q, k, v := randomVec(rng, qw), randomVec(rng, kw), randomVec(rng, kw)
						kall, vall = append(kall, k), append(vall, v)
						out := &Tensor{Rows: 1, Cols: qw, Data: make([]float32, qw)}
						ctx := &Ctx{In: []*Tensor{{Rows: 1, Cols: qw, Data: q}, {Rows: 1, Cols: kw, Data: k}, {Rows: 1, Cols: kw, Data: v}},
							Out: out, A: Attrs{"n_head": c.nh, "n_head_kv": c.nkv, "window": c.window, "scale": 0.0},
							Rows: []Row{{Pos: pos, NCtx: steps, KV: kv, State: &st}}, Pool: NewPool(2)}
						run := func() { require.NoError(t, op.Run(ctx)) }
						if level == "portable" {
							run()
						} else {
							withFast(level, run)
						}
						ctx.Pool.Close()
						want := refAttention(q, kall, vall, pos, c.nh, c.nkv, c.window, kv)
						for i, w := range want {
							// Values are convex combinations of N(0,1) entries.
							require.InDelta(t, w, float64(out.Data[i]), 2e-5, "pos %d out[%d]", pos, i)
						}
					}
				})
			}
		}
	}
}
