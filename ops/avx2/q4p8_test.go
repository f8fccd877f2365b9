package avx2

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/pinfer/pinfer/ops/half"
	"github.com/stretchr/testify/require"
)

// TestGatherQ4x8: the packed mat-vec, on every path, against the float64
// reference of the unpacked rows.
func TestGatherQ4x8(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	// One to nine groups of eight rows: the four quarters read side by
	// side (gatherQ4p8r4), then what they leave as two halves
	// (gatherQ4p8x2) and an odd group alone.
	for _, cols := range []int{32, 96, 4096} {
		for _, nrows := range []int{8, 16, 24, 32, 40, 48, 56, 72} {
			w := randMatrix(r, kQ4, nrows, cols, 0)
			x := randVec(r, cols)
			xq := make([]byte, cols/32*34)
			QuantizeQ8(xq, x)
			p := PackQ4x8(w, cols)
			t.Run(fmt.Sprintf("cols%d/rows%d", cols, nrows), func(t *testing.T) {
				forPaths(t, func(t *testing.T) {
					out := make([]float32, nrows)
					GatherQ4x8(out, p, cols, xq)
					checkGatherRef(t, kQ4, out, w, cols, nil, refQ8(xq))
				})
			})
		}
	}
}

// TestGatherQ4x8T: the packed mat-mat over T tokens (groups of four and a
// rest, matrices of one tile and of several), every path against the
// float64 reference of each token; the outputs' gaps between rows and ldo
// stay as they were.
func TestGatherQ4x8T(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 25))
	for _, cols := range []int{32, 96, 4096} {
		for _, nrows := range []int{8, 24, 128} {
			w := randMatrix(r, kQ4, nrows, cols, 0)
			p := PackQ4x8(w, cols)
			for _, T := range []int{1, 3, 4, 5, 9} {
				x := randVec(r, T*cols)
				xq := make([]byte, T*cols/32*34)
				for k := range T {
					QuantizeQ8(xq[k*cols/32*34:][:cols/32*34], x[k*cols:][:cols])
				}
				t.Run(fmt.Sprintf("cols%d/rows%d/T%d", cols, nrows, T), func(t *testing.T) {
					forPaths(t, func(t *testing.T) {
						ldo := nrows + 3
						out := make([]float32, T*ldo)
						for i := range out {
							out[i] = 7
						}
						check := func(out []float32, k0 int) {
							for k := range len(out) / ldo {
								xk := xq[(k0+k)*cols/32*34:][:cols/32*34]
								checkGatherRef(t, kQ4, out[k*ldo:][:nrows], w, cols, nil, refQ8(xk))
								for _, v := range out[k*ldo+nrows : (k+1)*ldo] {
									require.Equal(t, float32(7), v, "token %d wrote past its rows", k)
								}
							}
						}
						fresh := func(n int) []float32 {
							out := make([]float32, n*ldo)
							for i := range out {
								out[i] = 7
							}
							return out
						}
						GatherQ4x8T(out, ldo, p, cols, xq, T)
						check(out, 0)
						// Through Acts: its own tables, PrepPacked's, and
						// a view of the last tokens.
						var a Acts
						a.Set(x, cols, T)
						require.Equal(t, xq, a.Q[:len(xq)])
						out = fresh(T)
						GatherQ4x8Acts(out, ldo, p, &a)
						check(out, 0)
						a.PrepPacked()
						out = fresh(T)
						GatherQ4x8Acts(out, ldo, p, &a)
						check(out, 0)
						if T > 1 {
							v := a.Tokens(1, T-1)
							out = fresh(T - 1)
							GatherQ4x8Acts(out, ldo, p, &v)
							check(out, 1)
						}
					})
				})
			}
		}
	}
}

// BenchmarkGatherQ4x8 holds the packed mat-vec beside the row kernel
// (GatherQ4_0 over the same rows), hot (160 rows, 369 KB, in L2) and over all rows of
// the benchmark's 11008x4096 matrices.
func BenchmarkGatherQ4x8(b *testing.B) {
	r := rand.New(rand.NewPCG(23, 23))
	x := randVec(r, benchCols)
	xq := make([]byte, benchCols/32*34)
	QuantizeQ8(xq, x)
	hot := randMatrix(r, kQ4, 160, benchCols, 0)
	hotP := PackQ4x8(hot, benchCols)
	m := benchMatrix(kQ4)
	_, packed := packLayers(m, 8, PackQ4x8)
	out := make([]float32, benchRows)
	runQ4Cases(b, []q4Case{
		{"hot/rows", 160, func(i int) { GatherQ4_0(out[:160], hot, benchCols, nil, xq) }},
		{"hot/packed", 160, func(i int) { GatherQ4x8(out[:160], hotP, benchCols, xq) }},
		{"all/rows", benchRows, func(i int) { GatherQ4_0(out, m.layers[i%len(m.layers)], benchCols, nil, xq) }},
		{"all/packed", benchRows / 8 * 8, func(i int) {
			GatherQ4x8(out[:benchRows/8*8], packed[i%len(packed)], benchCols, xq)
		}},
	})
}

// BenchmarkGatherQ4x8Streams measures, on two threads as decode runs a
// mat-vec (each thread half the groups of a packed 11008x4096 matrix, a
// new matrix each time), the one-token kernel reading each half as one run
// (gatherQ4p8), as its two halves side by side (gatherQ4p8x2) and as its
// four quarters (what GatherQ4x8 runs), then a two-thread stream over as
// many bytes (the faster of Sum and SumRuns), in one loop: each as a share
// of that stream.
func BenchmarkGatherQ4x8Streams(b *testing.B) {
	if !Available {
		b.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(27, 27))
	x := randVec(r, benchCols)
	xq := make([]byte, benchCols/32*34)
	QuantizeQ8(xq, x)
	nblk := benchCols / 32
	tab := make([]byte, p8TabBytes*nblk)
	p8Table(tab, xq, nblk)
	m := benchMatrix(kQ4)
	nr, packed := packLayers(m, 8, PackQ4x8)
	a, free := streamBuf(benchHuge)
	defer free()
	gb, half := nblk*p8Bytes, nr/16 // a thread's groups
	outs := [2][]float32{make([]float32, 8*half), make([]float32, 8*half)}
	kernels := []struct {
		name string
		run  func(out []float32, p []byte)
	}{
		{"one-run", func(out []float32, p []byte) { gatherQ4p8(&out[0], &p[0], half, &xq[0], nblk, &tab[0]) }},
		{"two-runs", func(out []float32, p []byte) {
			h := half / 2
			gatherQ4p8x2(&out[0], &p[0], h, &xq[0], nblk, &tab[0], h*gb, 4*8*h)
			if half%2 == 1 {
				gatherQ4p8(&out[8*(half-1)], &p[(half-1)*gb], 1, &xq[0], nblk, &tab[0])
			}
		}},
		{"four-runs", func(out []float32, p []byte) { gatherQ4x8Tiles(out, 8*half, p, nblk, xq, 1, tab) }},
	}
	t := make([]time.Duration, len(kernels))
	st := streams{a: a}
	i := 0
	for b.Loop() {
		for k, kern := range kernels {
			p := packed[(i+k)%len(packed)]
			t[k] += onTwo(func(th int) { kern.run(outs[th], p[th*half*gb:][:half*gb]) })
		}
		st.read(half*gb/4, 2) // a thread's floats
		i += len(kernels)
	}
	bytes := float64(2*half*gb) * float64(b.N)
	stream := st.time()
	b.ReportMetric(bytes/stream.Seconds()/1e6, "stream-MB/s")
	for k, kern := range kernels {
		b.ReportMetric(bytes/t[k].Seconds()/1e6, kern.name+"-MB/s")
		b.ReportMetric(100*stream.Seconds()/t[k].Seconds(), kern.name+"%stream")
	}
}

// onTwo runs f(0) and f(1) on two locked threads and returns when both
// are done, with the time they took.
func onTwo(f func(th int)) time.Duration {
	var wg sync.WaitGroup
	start := time.Now()
	for th := range 2 {
		wg.Go(func() {
			lockThread()
			defer unlockThread()
			f(th)
		})
	}
	wg.Wait()
	return time.Since(start)
}

// packLayers packs the whole groups of g rows (nr rows) of each of m's
// layers with pack.
func packLayers(m *benchMat, g int, pack func(w []byte, cols int) []byte) (nr int, packed [][]byte) {
	nr = benchRows / g * g
	for _, l := range m.layers {
		packed = append(packed, pack(l[:nr*kQ4.rowBytes(benchCols)], benchCols))
	}
	return nr, packed
}

// q4Case is a benchmark case over n rows of q4_0 weights of benchCols
// columns; run gets the iteration's number.
type q4Case struct {
	name string
	n    int
	run  func(i int)
}

// runQ4Cases runs each case as a sub-benchmark, its bytes the rows'.
func runQ4Cases(b *testing.B, cases []q4Case) {
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(c.n * kQ4.rowBytes(benchCols)))
			i := 0
			for b.Loop() {
				c.run(i)
				i++
			}
		})
	}
}

// BenchmarkPrefillQ4x8: the packed mat-mat over 64 tokens beside the row
// prefill (GatherQ4_0Acts), each with its x prepared beforehand as a
// prompt's is once for all its matrices: hot (64 rows, in L2) and over all
// rows of the 11008x4096 matrices. MB/s counts the weights once per token.
func BenchmarkPrefillQ4x8(b *testing.B) {
	const T = 64
	r := rand.New(rand.NewPCG(26, 26))
	x := randVec(r, T*benchCols)
	var a Acts
	a.Set(x, benchCols, T)
	nblk := benchCols / 32
	tab := make([]byte, T*p8TabBytes*nblk)
	for t := range T {
		p8Table(tab[t*p8TabBytes*nblk:], a.Q[t*nblk*34:], nblk)
	}
	hot := randMatrix(r, kQ4, 64, benchCols, 0)
	hotP := PackQ4x8(hot, benchCols)
	m := benchMatrix(kQ4)
	nr, packed := packLayers(m, 8, PackQ4x8)
	out := make([]float32, T*benchRows)
	for _, c := range []struct {
		name string
		n    int
		run  func(i int)
	}{
		{"hot/rows", 64, func(i int) { GatherQ4_0Acts(out, 64, hot, nil, &a) }},
		{"hot/packed", 64, func(i int) { gatherQ4x8Tiles(out, 64, hotP, nblk, a.Q, T, tab) }},
		{"all/rows", nr, func(i int) { GatherQ4_0Acts(out, nr, m.layers[i%len(m.layers)][:nr*kQ4.rowBytes(benchCols)], nil, &a) }},
		{"all/packed", nr, func(i int) { gatherQ4x8Tiles(out, nr, packed[i%len(packed)], nblk, a.Q, T, tab) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			if !Available {
				b.Skip("no AVX2: the walk calls the assembly")
			}
			b.SetBytes(int64(T * c.n * kQ4.rowBytes(benchCols)))
			i := 0
			for b.Loop() {
				c.run(i)
				i++
			}
		})
	}
}

// BenchmarkPackQ4x8: repacking one 11008x4096 matrix, MB/s of rows in.
func BenchmarkPackQ4x8(b *testing.B) {
	m := benchMatrix(kQ4)
	w := m.layers[0][:benchRows/8*8*kQ4.rowBytes(benchCols)]
	b.SetBytes(int64(len(w)))
	for b.Loop() {
		PackQ4x8(w, benchCols)
	}
}

// fuzzGroups is fuzzShape's q4_0 rows cut to whole groups of g (n of them,
// possibly none), and a generator seeded by the shape.
func fuzzGroups(kb byte, c uint16, nr uint8, data []byte, g int) (cols int, w []byte, n int, r *rand.Rand) {
	_, cols, w, _, nrows := fuzzShape(kb|byte(kQ4), c, nr, nil, data)
	n = nrows / g * g
	return cols, w[:n*kQ4.rowBytes(cols)], n, rand.New(rand.NewPCG(uint64(c), uint64(nr)))
}

// FuzzGatherQ4x8: the packed mat-vec on fuzzed q4_0 weights (eight or
// sixteen rows, 32 to 320 columns), every path against the reference.
func FuzzGatherQ4x8(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, kb byte, c uint16, nr uint8, sel, data []byte) {
		cols, w, n, r := fuzzGroups(kb, c, nr, data, 8)
		if n == 0 {
			return
		}
		xq := make([]byte, cols/32*34)
		QuantizeQ8(xq, randVec(r, cols))
		p := PackQ4x8(w, cols)
		forPaths(t, func(t *testing.T) {
			out := make([]float32, n)
			GatherQ4x8(out, p, cols, xq)
			checkGatherRef(t, kQ4, out, w, cols, nil, refQ8(xq))
			// The four-token kernel: the same x four times, and a fifth.
			x5 := bytes.Repeat(xq, 5)
			out5 := make([]float32, 5*n)
			GatherQ4x8T(out5, n, p, cols, x5, 5)
			for k := range 5 {
				checkGatherRef(t, kQ4, out5[k*n:][:n], w, cols, nil, refQ8(xq))
			}
		})
	})
}

// checkP8Table holds p8Table of q8_0 blocks xq to its definition on every
// path: per block 8Σq as int32, then d as f32, each eight times (a NaN d
// may come back as any NaN).
func checkP8Table(t *testing.T, xq []byte) {
	nblk := len(xq) / q8Block
	forPaths(t, func(t *testing.T) {
		tab := make([]byte, nblk*p8TabBytes+1)
		tab[len(tab)-1] = 0xa5
		p8Table(tab, xq, nblk)
		require.Equal(t, byte(0xa5), tab[len(tab)-1], "wrote past the table")
		le := binary.LittleEndian
		for b := range nblk {
			blk := xq[b*q8Block:][:q8Block]
			var sum int32
			for _, q := range blk[2:] {
				sum += int32(int8(q))
			}
			d := half.Decode(le.Uint16(blk))
			for l := range 8 {
				got := le.Uint32(tab[b*p8TabBytes+4*l:])
				require.Equal(t, uint32(8*sum), got, "block %d lane %d: 8Σq", b, l)
				gd := math.Float32frombits(le.Uint32(tab[b*p8TabBytes+32+4*l:]))
				if !(d != d && gd != gd) {
					require.Equal(t, math.Float32bits(d), math.Float32bits(gd), "block %d lane %d: d", b, l)
				}
			}
		}
	})
}

// TestP8Table: random blocks, the extreme quants (all -128, all 127) and
// the edge d (0, -0, the least subnormal, the largest, infinity).
func TestP8Table(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 28))
	for _, nblk := range []int{0, 1, 2, 7, 128} {
		xq := make([]byte, nblk*q8Block)
		for i := range xq {
			xq[i] = byte(r.Uint32())
		}
		checkP8Table(t, xq)
	}
	ds := []uint16{0, 0x8000, 0x0001, 0x7bff, 0xfbff, 0x7c00, 0x3c00}
	xq := make([]byte, 2*len(ds)*q8Block)
	for k, d := range ds {
		for h, q := range []byte{0x80, 0x7f} {
			blk := xq[(2*k+h)*q8Block:][:q8Block]
			binary.LittleEndian.PutUint16(blk, d)
			for i := 2; i < q8Block; i++ {
				blk[i] = q
			}
		}
	}
	checkP8Table(t, xq)
}

// FuzzP8Table: any bytes as q8_0 blocks.
func FuzzP8Table(f *testing.F) {
	f.Add(bytes.Repeat([]byte{0x80, 0x7f, 3}, 40))
	f.Fuzz(func(t *testing.T, xq []byte) {
		checkP8Table(t, xq[:len(xq)/q8Block*q8Block])
	})
}

// BenchmarkP8Table: one 4096-wide token's table, as each packed mat-vec of
// 7B decode makes before its threads start, on each path.
func BenchmarkP8Table(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	xq := make([]byte, benchCols/32*q8Block)
	QuantizeQ8(xq, randVec(r, benchCols))
	tab := make([]byte, benchCols/32*p8TabBytes)
	withPath(b, int64(len(xq)), func(b *testing.B) {
		for b.Loop() {
			p8Table(tab, xq, benchCols/32)
		}
	})
}
