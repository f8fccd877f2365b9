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
						runAt(t, level, op, ctx)
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

// A prompt's rows in one call, as prefill runs them (the f32 path takes
// them four at a time over the union of their spans), then a second
// sequence's rows and the first's next ones side by side in one call,
// whose groups of four do not share a cache: against refAttention.
func TestAttentionPrompt(t *testing.T) {
	op, _ := Lookup("attention")
	rng := rand.New(rand.NewPCG(5, 5))
	for _, kv := range []DType{F32, F16} {
		for _, c := range []struct{ nh, nkv, hd, window int }{{8, 8, 16, 0}, {8, 2, 20, 0}, {4, 4, 128, 5}, {2, 1, 64, 3}} {
			levels := append([]string{"portable"}, fastLevels(t)...)
			for _, level := range levels {
				t.Run(fmt.Sprintf("%v/h%d-kv%d-d%d-w%d/%s", kv, c.nh, c.nkv, c.hd, c.window, level), func(t *testing.T) {
					const nctx = 40
					qw, kw := c.nh*c.hd, c.nkv*c.hd
					var st [2]any
					var kall, vall [2][][]float32
					// Calls of rows: (sequence, count) runs.
					for _, call := range [][][2]int{{{0, 11}}, {{0, 6}}, {{1, 5}, {0, 7}}, {{0, 1}, {1, 3}}} {
						var rows []Row
						var q, k, v []float32
						var seqs []int
						for _, run := range call {
							for range run[1] {
								sq := run[0]
								kr, vr := randomVec(rng, kw), randomVec(rng, kw)
								rows = append(rows, Row{Pos: len(kall[sq]), NCtx: nctx, KV: kv, State: &st[sq]})
								kall[sq], vall[sq] = append(kall[sq], kr), append(vall[sq], vr)
								q, k, v = append(q, randomVec(rng, qw)...), append(k, kr...), append(v, vr...)
								seqs = append(seqs, sq)
							}
						}
						T := len(rows)
						out := &Tensor{Rows: T, Cols: qw, Data: make([]float32, T*qw)}
						ctx := &Ctx{In: []*Tensor{{Rows: T, Cols: qw, Data: q}, {Rows: T, Cols: kw, Data: k}, {Rows: T, Cols: kw, Data: v}},
							Out: out, A: Attrs{"n_head": c.nh, "n_head_kv": c.nkv, "window": c.window, "scale": 0.0},
							Rows: rows, Pool: NewPool(2)}
						runAt(t, level, op, ctx)
						for i, r := range rows {
							sq := seqs[i]
							want := refAttention(q[i*qw:(i+1)*qw], kall[sq], vall[sq], r.Pos, c.nh, c.nkv, c.window, kv)
							for e, w := range want {
								require.InDelta(t, w, float64(out.Data[i*qw+e]), 2e-5, "row %d (seq %d pos %d) out[%d]", i, sq, r.Pos, e)
							}
						}
					}
				})
			}
		}
	}
}

// runAt runs op on ctx at a vector level ("portable": none), then closes
// its pool.
func runAt(t *testing.T, level string, op *Op, ctx *Ctx) {
	t.Helper()
	run := func() { require.NoError(t, op.Run(ctx)) }
	if level == "portable" {
		run()
	} else {
		withFast(level, run)
	}
	ctx.Pool.Close()
}

// A plane's position-major copy (a device cache's layout) is the k and v
// rows as attention stored them, position after position, and SetPosMajor
// puts them back where store did.
func TestPlanePosMajor(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, kv := range []DType{F32, F16} {
		const nkv, kw, vw, n = 3, 12, 6, 5
		c := newKVCache(Row{NCtx: 7, KV: kv}, nkv, kw, vw)
		var ks, vs []float32
		for p := range n {
			k, v := make([]float32, kw), make([]float32, vw)
			for i := range k {
				k[i] = float32(r.IntN(64)-32) / 8 // exact in f16
			}
			for i := range v {
				v[i] = float32(r.IntN(64)-32) / 8
			}
			c.store(p, nkv, k, v)
			ks, vs = append(ks, k...), append(vs, v...)
		}
		d := newKVCache(Row{NCtx: n, KV: kv}, nkv, kw, vw)
		for j, want := range [][]float32{ks, vs} {
			got := make([]float32, len(want))
			c.Planes()[j].PosMajor(got, n)
			require.Equal(t, want, got, "%v plane %d", kv, j)
			d.Planes()[j].SetPosMajor(want, n)
			back := make([]float32, len(want))
			d.Planes()[j].PosMajor(back, n)
			require.Equal(t, want, back, "%v plane %d back", kv, j)
		}
	}
}
