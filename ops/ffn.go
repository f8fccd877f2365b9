package ops

import "sync"

// The FFN over chosen neurons, for one token (decode) or many (prefill).
// With several tokens the neurons chosen for any of them (the union) are
// computed for all of them, tile by tile, so that each weight row is read
// from memory once per batch rather than once per token. A neuron computed
// for a token that did not choose it only makes that token's result closer
// to the dense one.

// ffnTile is the number of neurons whose rows stay in cache while every token
// of a batch uses them.
const ffnTile = 64

// FFNBatch adds the FFN output of T tokens (rows of x) to out (T rows of
// down.Cols). actives[t] lists token t's neurons in ascending order; a nil
// actives, or a nil entry, means all neurons.
func FFNBatch(pool *Pool, f *FFN, down *Matrix, x []float32, T int, actives [][]int32, out []float32) {
	if Device != nil {
		// The device takes its hot neurons now and the CPU the cold ones
		// meanwhile; the partial sums meet in out.
		if cold, wait, ok := Device.FFNStart(f, down, x, T, actives); ok {
			defer wait(out)
			if cold == nil {
				return
			}
			actives = cold
		}
	}
	d, nff := f.Gate.Cols, f.Gate.Rows
	ids := union(actives, T, nff)
	n := nff
	if ids != nil {
		n = len(ids)
	}
	fast := fastType(f.Gate.Type) && (f.Up == nil || f.Up.Type == f.Gate.Type) && fastType(down.Type)
	var xq []byte
	if fast {
		var done func()
		xq, done = quantizeX(f.Gate.Type, x, d, T)
		defer done()
	}
	qb := d / 32 * 34
	var mu sync.Mutex
	var parts []*ffnScratch
	pool.Run(n, func(lo, hi int) {
		s := ffnBufs.Get().(*ffnScratch)
		s.acc = growF(s.acc, T*down.Cols)
		clear(s.acc)
		for t0 := lo; t0 < hi; t0 += ffnTile {
			t1 := min(hi, t0+ffnTile)
			s.ids = s.ids[:0]
			for k := t0; k < t1; k++ {
				if ids != nil {
					s.ids = append(s.ids, ids[k])
				} else {
					s.ids = append(s.ids, int32(k))
				}
			}
			k := len(s.ids)
			s.g, s.u = growF(s.g, k), growF(s.u, k)
			for t := 0; t < T; t++ {
				xt := x[t*d : (t+1)*d]
				var xqt []byte
				if xq != nil {
					xqt = xq[t*qb : (t+1)*qb]
				}
				gatherAny(fast, f.Gate, s.g, s.ids, xt, xqt)
				if f.Up != nil {
					gatherAny(fast, f.Up, s.u, s.ids, xt, xqt)
				}
				for j, id := range s.ids {
					g, u := s.g[j], float32(1)
					if f.GateBias != nil {
						g += f.GateBias[id]
					}
					if f.Up != nil {
						u = s.u[j]
					}
					s.g[j] = FFNActivation(f.Act, f.Threshold, g, u)
				}
				axpyAny(fast, down, s.acc[t*down.Cols:(t+1)*down.Cols], s.ids, s.g)
			}
		}
		mu.Lock()
		parts = append(parts, s)
		mu.Unlock()
	})
	// Each worker summed into its own partial; add them up now.
	for _, s := range parts {
		Axpy(out[:T*down.Cols], 1, s.acc)
		ffnBufs.Put(s)
	}
}

// FFNRow is FFNBatch for one token.
func FFNRow(pool *Pool, f *FFN, down *Matrix, x []float32, active []int32, out []float32) {
	var actives [][]int32
	if active != nil {
		actives = [][]int32{active}
	}
	FFNBatch(pool, f, down, x, 1, actives, out)
}

// union merges sorted id lists; nil if any is nil (all neurons).
func union(actives [][]int32, T, n int) []int32 {
	if actives == nil {
		return nil
	}
	if T == 1 {
		return actives[0]
	}
	seen := make([]bool, n)
	for _, a := range actives[:T] {
		if a == nil {
			return nil
		}
		for _, i := range a {
			seen[i] = true
		}
	}
	var ids []int32
	for i, s := range seen {
		if s {
			ids = append(ids, int32(i))
		}
	}
	return ids
}

// ffnScratch is one worker's buffers.
type ffnScratch struct {
	ids       []int32
	g, u, acc []float32
}

var ffnBufs = sync.Pool{New: func() any { return new(ffnScratch) }}

func growF(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// gatherAny sets out[k] = row(ids[k]) · x, on the vector kernels when fast.
func gatherAny(fast bool, m *Matrix, out []float32, ids []int32, x []float32, xq []byte) {
	if fast {
		gather(m.Type, out, m.Data, m.Cols, ids, x, xq)
		return
	}
	for k, i := range ids {
		out[k] = m.DotRow(int(i), x)
	}
}

// axpyAny adds Σ coef[k]·row(ids[k]) to y.
func axpyAny(fast bool, m *Matrix, y []float32, ids []int32, coef []float32) {
	if fast {
		axpyRows(m.Type, y, m.Data, m.Cols, ids, coef)
		return
	}
	for k, i := range ids {
		if coef[k] != 0 {
			m.AxpyRow(int(i), coef[k], y)
		}
	}
}
