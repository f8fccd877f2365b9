package ops

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinfer/pinfer/ops/avx2"
)

// PackAll's budget of 0 leaves the packing to the background: mat-muls meanwhile
// read whichever layout each matrix has, and give the portable op's result
// either way; Close stops it midway and hands the matrices back to their
// rows, which have not changed.
func TestPackAllInBackground(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	pool := NewPool(2)
	defer pool.Close()
	const rows, cols, T = 61, 512, 5
	var ms []*Matrix
	var ps []Pack
	for range 24 {
		ms = append(ms, randomMatrix(rng, Q4_0, rows, cols))
		ps = append(ps, Pack{M: ms[len(ms)-1]})
	}
	x := randomVec(rng, T*cols)
	want := make([][]float32, len(ms))
	for k, m := range ms {
		want[k] = make([]float32, T*rows)
		MatMul(pool, want[k], m, x, T)
	}
	check := func() {
		for k, m := range ms {
			got := make([]float32, T*rows)
			MatMul(pool, got, m, x, T)
			for i := range got {
				tol := tolerance(Q4_0, absTerms(m, i%rows, x[i/rows*cols:][:cols]))
				require.InDelta(t, want[k][i], got[i], tol, "matrix %d output %d", k, i)
			}
		}
	}
	withFast("avx2", func() {
		var released atomic.Int64
		p, err := PackAll(ps, 2, 0, func(b []byte) { released.Add(int64(len(b))) })
		require.NoError(t, err)
		if p == nil {
			require.False(t, avx2.PackPays(), "nothing packed on a CPU where it pays")
			return
		}
		check()
		p.Wait()
		for k, m := range ms {
			require.NotNil(t, m.packed(false), "matrix %d", k)
		}
		require.Equal(t, int64(len(ms)*ms[0].packBytes(false)), released.Load())
		check()
		p.Close()
		for _, m := range ms {
			require.Nil(t, m.packed(false))
		}
		check()
		// Stopped midway.
		p, err = PackAll(ps, 1, 0, nil)
		require.NoError(t, err)
		p.Close()
		check()
	})
}

// A dense FFN packed in the background (as engine.PackDense does): decode
// steps meanwhile read whichever copy each of gate, up and down has, the
// rows or the packed one, and give the portable op's result either way.
func TestDenseFFNPackedInBackground(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	pool := NewPool(2)
	defer pool.Close()
	const d, nff, layers = 256, 512, 6
	type layer struct {
		f    *FFN
		down *Matrix
	}
	var ls []layer
	var ps []Pack
	for range layers {
		l := layer{&FFN{Gate: randomMatrix(rng, Q4_0, nff, d), Up: randomMatrix(rng, Q4_0, nff, d), Act: "relu"}, randomMatrix(rng, Q4_0, nff, d)}
		ls = append(ls, l)
		ps = append(ps, Pack{M: l.f.Gate}, Pack{M: l.f.Up}, Pack{M: l.down, Axpy: true})
	}
	x := randomVec(rng, d)
	want := make([][]float32, layers)
	for k, l := range ls {
		want[k] = make([]float32, d)
		FFNRow(pool, l.f, l.down, x, nil, want[k])
	}
	withFast("avx2", func() {
		p, err := PackAll(ps, 1, 0, nil)
		require.NoError(t, err)
		if p == nil {
			require.False(t, avx2.PackPays(), "nothing packed on a CPU where it pays")
			return
		}
		defer p.Close()
		for round := 0; round < 3; round++ {
			if round == 2 {
				p.Wait()
				for _, k := range ps {
					require.NotNil(t, k.M.packed(k.Axpy))
				}
			}
			for k, l := range ls {
				got := make([]float32, d)
				FFNRow(pool, l.f, l.down, x, nil, got)
				var scale float64
				for _, v := range want[k] {
					scale = max(scale, math.Abs(float64(v)))
				}
				for i := range got {
					require.InDelta(t, want[k][i], got[i], tolerance(Q4_0, scale*4)+1e-4, "round %d layer %d out %d", round, k, i)
				}
			}
		}
	})
}
