package avx2

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/pinfer/pinfer/internal/hugepage"
)

// Benchmarks on ReluLLaMA-7B's FFN shape, 11008 rows of 4096, in the style of
// llm.c's dev/cuda: the portable Go path ("naive") next to the assembly.
// Each iteration reads another random row set from the next of several copies
// of the matrix (512 MB or more in all, 16x the 32 MB L3), as decode reads one
// layer after another, so the figures are memory bandwidth, not cache
// bandwidth. BenchmarkGatherHot reads an L2-resident matrix: the compute
// ceiling of each kernel.
// SetBytes counts the row bytes actually read.

const (
	benchRows = 11008
	benchCols = 4096
	benchSpan = 512 << 20
	benchSets = 16
)

var benchPcts = []int{10, 20, 50, 100}

type benchMat struct {
	k      kind
	layers [][]byte
	free   func()
}

var benchCache *benchMat

// benchHuge: the benchmarks' buffers get huge pages, as the weights do,
// unless PINFER_BENCH_SMALLPAGES is set (BenchmarkPages has both in one run).
var benchHuge = os.Getenv("PINFER_BENCH_SMALLPAGES") == ""

// benchMatrix builds (once per kind, one kind kept at a time) enough layers
// of random weights to span benchSpan bytes.
func benchMatrix(k kind) *benchMat {
	if benchCache != nil && benchCache.k == k {
		return benchCache
	}
	if benchCache != nil {
		benchCache.free()
	}
	layers, free := benchLayers(k, benchHuge)
	benchCache = &benchMat{k: k, layers: layers, free: free}
	return benchCache
}

// benchLayers returns the layers and the func that frees them.
func benchLayers(k kind, huge bool) ([][]byte, func()) {
	rb := k.rowBytes(benchCols)
	size := rb * benchRows
	n := (benchSpan + size - 1) / size
	all, free := benchAlloc[byte](n*size, huge)
	var layers [][]byte
	r := rand.New(rand.NewPCG(11, uint64(k)))
	for l := range n {
		w := all[l*size : (l+1)*size : (l+1)*size]
		for i := 0; i+8 <= len(w); i += 8 {
			binary.LittleEndian.PutUint64(w[i:], r.Uint64())
		}
		// Keep values ordinary: no NaN, Inf or subnormals in the timing.
		switch k {
		case kF32:
			for i := 0; i < len(w); i += 4 {
				binary.LittleEndian.PutUint32(w[i:], math.Float32bits(float32(int8(w[i]))/64))
			}
		case kF16:
			for i := 0; i < len(w); i += 2 {
				binary.LittleEndian.PutUint16(w[i:], binary.LittleEndian.Uint16(w[i:])&0x83ff|0x3000)
			}
		default:
			bs := 34
			if k == kQ4 {
				bs = 18
			}
			for i := 0; i < len(w); i += bs {
				binary.LittleEndian.PutUint16(w[i:], 0x2000|uint16(w[i])&0x3ff)
			}
		}
		layers = append(layers, w)
	}
	return layers, free
}

// benchRowSet returns benchSets sorted random sets of pct% of the rows.
func benchRowSet(pct int) [][]int32 {
	r := rand.New(rand.NewPCG(uint64(pct), 5))
	sets := make([][]int32, benchSets)
	for l := range sets {
		n := benchRows * pct / 100
		ids := make([]int32, n)
		for i, p := range r.Perm(benchRows)[:n] {
			ids[i] = int32(p)
		}
		slices.Sort(ids)
		sets[l] = ids
	}
	return sets
}

// withPath runs fn on every kernel set: the portable Go ("naive"), AVX2
// and AVX-512 (see paths).
func withPath(b *testing.B, bytes int64, fn func(b *testing.B)) {
	for _, p := range paths() {
		name := p
		if p == "go" {
			name = "naive"
		}
		b.Run(name, func(b *testing.B) {
			onPath(p, func() {
				b.SetBytes(bytes)
				lockThread()
				defer unlockThread()
				t0 := threadCPU()
				fn(b)
				if cpu := threadCPU() - t0; cpu > 0 {
					b.ReportMetric(float64(bytes)*float64(b.N)/cpu.Seconds()/1e6, "cpuMB/s")
				}
			})
		})
	}
}

func BenchmarkGather(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	x := randVec(r, benchCols)
	xq := make([]byte, benchCols/32*34)
	QuantizeQ8(xq, x)
	out := make([]float32, benchRows)
	for _, k := range []kind{kF32, kF16, kQ8, kQ4} {
		for _, pct := range benchPcts {
			b.Run(fmt.Sprintf("%v/%dpct", k, pct), func(b *testing.B) {
				m := benchMatrix(k)
				sets := benchRowSet(pct)
				withPath(b, int64(len(sets[0])*k.rowBytes(benchCols)), func(b *testing.B) {
					i := 0
					for b.Loop() {
						l := i % len(m.layers)
						i++
						w, rows := m.layers[l], sets[i%benchSets]
						gatherKind(k, out[:len(rows)], w, benchCols, rows, x, xq)
					}
				})
			})
		}
	}
}

func BenchmarkAxpy(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	coef := randVec(r, benchRows)
	y := make([]float32, benchCols)
	for _, k := range []kind{kF32, kF16, kQ8, kQ4} {
		for _, pct := range benchPcts {
			b.Run(fmt.Sprintf("%v/%dpct", k, pct), func(b *testing.B) {
				m := benchMatrix(k)
				sets := benchRowSet(pct)
				withPath(b, int64(len(sets[0])*k.rowBytes(benchCols)), func(b *testing.B) {
					i := 0
					for b.Loop() {
						l := i % len(m.layers)
						i++
						w, rows := m.layers[l], sets[i%benchSets]
						axpy(k, y, w, benchCols, rows, coef[:len(rows)])
					}
				})
			})
		}
	}
}

// BenchmarkStream is the ceiling: a sequential read of 256 MB, as one run
// (Sum) and as four side by side (SumRuns).
func BenchmarkStream(b *testing.B) {
	a, free := streamBuf(benchHuge)
	defer free()
	var sink float32
	for _, f := range []struct {
		name string
		sum  func([]float32) float32
	}{{"one-run", Sum}, {"four-runs", SumRuns}} {
		b.Run(f.name, func(b *testing.B) {
			withPath(b, 256<<20, func(b *testing.B) {
				for b.Loop() {
					sink += f.sum(a)
				}
			})
		})
	}
	_ = sink
}

// streams times, over a benchmark's loop, the streaming read that its
// kernels are held against: Sum's one run and SumRuns' four side by side,
// each over the next stretch of a (wrapping at its end), so that a drift
// of the host's bandwidth meets the kernels and both reads alike.
type streams struct {
	a    []float32
	at   int
	t    [2]time.Duration // Sum's, SumRuns'
	sink [2]float32
}

// read streams n floats on each of threads threads (one, or two through
// onTwo), once with each sum.
func (s *streams) read(n, threads int) {
	for k, sum := range []func([]float32) float32{Sum, SumRuns} {
		if s.at+threads*n > len(s.a) {
			s.at = 0
		}
		base := s.at
		f := func(th int) { s.sink[th] += sum(s.a[base+th*n:][:n]) }
		if threads == 1 {
			start := time.Now()
			f(0)
			s.t[k] += time.Since(start)
		} else {
			s.t[k] += onTwo(f)
		}
		s.at += threads * n
	}
}

// time is the faster read's total: the stream.
func (s *streams) time() time.Duration { return min(s.t[0], s.t[1]) }

// benchAlloc maps a benchmark's buffer in huge pages, as gguf's map of a
// model file gets them, or in 4 KB pages, which show what TLB misses cost.
// Not from the Go heap: a heap buffer made after other benchmarks' data came
// back in 4 KB pages even when advised, and the stream read 25% slower.
func benchAlloc[T any](n int, huge bool) ([]T, func()) {
	b, free, err := hugepage.Alloc[T](n, huge)
	if err != nil {
		panic(err)
	}
	return b, free
}

func streamBuf(huge bool) ([]float32, func()) {
	a, free := benchAlloc[float32](256<<20/4, huge)
	for i := range a {
		a[i] = float32(i & 255)
	}
	return a, free
}

// BenchmarkPages holds huge pages against 4 KB pages in one run: calls
// alternate between a copy of the data in each, so the host's drift hits
// both alike. Streaming read and q4_0 gather, one thread, default kernels.
func BenchmarkPages(b *testing.B) {
	lockThread()
	defer unlockThread()
	ab := func(b *testing.B, bytes int64, call func(huge bool)) {
		var t [2]time.Duration
		for b.Loop() {
			for k, huge := range []bool{true, false} {
				t0 := time.Now()
				call(huge)
				t[k] += time.Since(t0)
			}
		}
		for k, name := range []string{"huge-MB/s", "4k-MB/s"} {
			b.ReportMetric(float64(bytes)*float64(b.N)/t[k].Seconds()/1e6, name)
		}
		b.ReportMetric(t[1].Seconds()/t[0].Seconds(), "huge/4k")
	}
	b.Run("stream", func(b *testing.B) {
		hugeBuf, free1 := streamBuf(true)
		smallBuf, free2 := streamBuf(false)
		defer free1()
		defer free2()
		bufs := [2][]float32{hugeBuf, smallBuf}
		var sink float32
		ab(b, 256<<20, func(huge bool) { sink += Sum(bufs[map[bool]int{true: 0, false: 1}[huge]]) })
		_ = sink
	})
	hugeLayers, free1 := benchLayers(kQ4, true)
	smallLayers, free2 := benchLayers(kQ4, false)
	defer free1()
	defer free2()
	layers := [2][][]byte{hugeLayers, smallLayers}
	r := rand.New(rand.NewPCG(2, 2))
	x := randVec(r, benchCols)
	xq := make([]byte, benchCols/32*34)
	QuantizeQ8(xq, x)
	out := make([]float32, benchRows)
	for _, pct := range []int{10, 20, 50} {
		sets := benchRowSet(pct)
		b.Run(fmt.Sprintf("q4_0/%dpct", pct), func(b *testing.B) {
			i := 0
			ab(b, int64(len(sets[0])*kQ4.rowBytes(benchCols)), func(huge bool) {
				k := map[bool]int{true: 0, false: 1}[huge]
				gatherKind(kQ4, out[:len(sets[0])], layers[k][i%len(layers[k])], benchCols, sets[i%benchSets], x, xq)
				if !huge {
					i++
				}
			})
		})
	}
}

// BenchmarkGatherHot: all rows of a 64x4096 matrix, which stays in L2.
func BenchmarkGatherHot(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	x := randVec(r, benchCols)
	xq := make([]byte, benchCols/32*34)
	QuantizeQ8(xq, x)
	out := make([]float32, 64)
	for _, k := range []kind{kF32, kF16, kQ8, kQ4} {
		w := randMatrix(r, k, 64, benchCols, 0)
		b.Run(k.String(), func(b *testing.B) {
			withPath(b, int64(len(w)), func(b *testing.B) {
				for b.Loop() {
					gatherKind(k, out, w, benchCols, nil, x, xq)
				}
			})
		})
	}
}

// BenchmarkStridedHot: one attention head's scores and values, 256
// positions of 128 values (128 KB in f32, from L2), as a prompt reads them:
// a row at a time, and four rows at a time, over an f32 and an f16 cache.
// Bytes count each row's read of the head in f32, so all figures compare.
func BenchmarkStridedHot(b *testing.B) {
	r := rand.New(rand.NewPCG(4, 4))
	n, hd := 256, 128
	k, v, q := randVec(r, n*hd), randVec(r, n*hd), randVec(r, hd)
	k16, v16 := make([]uint16, n*hd), make([]uint16, n*hd)
	EncodeF16(k16, k)
	EncodeF16(v16, v)
	s, out := randVec(r, n), make([]float32, hd)
	q4, s4, out4 := randVec(r, 4*hd), randVec(r, 4*n), make([]float32, 4*hd)
	for _, c := range []struct {
		name string
		rows int
		run  func()
	}{
		{"scores", 1, func() { GatherF32Strided(s, k, hd, hd, q) }},
		{"values", 1, func() { AxpyF32Strided(out, v, hd, s) }},
		{"scores4", 4, func() { GatherF32Strided4(s4, k, hd, hd, q4) }},
		{"values4", 4, func() { AxpyF32Strided4(out4, v, hd, s4) }},
		{"f16/scores", 1, func() { GatherF16Strided(s, k16, hd, hd, q) }},
		{"f16/values", 1, func() { AxpyF16Strided(out, v16, hd, s) }},
		{"f16/scores4", 4, func() { GatherF16Strided4(s4, k16, hd, hd, q4) }},
		{"f16/values4", 4, func() { AxpyF16Strided4(out4, v16, hd, s4) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			withPath(b, int64(c.rows*n*hd*4), func(b *testing.B) {
				for b.Loop() {
					c.run()
				}
			})
		})
	}
}

// BenchmarkStridedMem: the same, one row at a time, as a decode step at a
// long context reads its cache: each call another head of 512 positions
// from a 256 MB buffer, so from memory.
func BenchmarkStridedMem(b *testing.B) {
	r := rand.New(rand.NewPCG(4, 4))
	n, hd := 512, 128
	w, free := benchAlloc[float32](256<<20/4, true)
	defer free()
	for i := range w {
		w[i] = float32(i&255) / 256
	}
	w16 := unsafe.Slice((*uint16)(unsafe.Pointer(&w[0])), len(w)*2)
	for i := range w16 {
		w16[i] = uint16(0x3c00 + i&255)
	}
	q, s, out := randVec(r, hd), randVec(r, n), make([]float32, hd)
	head := func(i, elem int) int { return i % (len(w) * 4 / elem / (n * hd)) * n * hd }
	for _, c := range []struct {
		name string
		elem int
		run  func(at int)
	}{
		{"scores", 4, func(at int) { GatherF32Strided(s, w[at:at+n*hd], hd, hd, q) }},
		{"values", 4, func(at int) { AxpyF32Strided(out, w[at:at+n*hd], hd, s) }},
		{"f16/scores", 2, func(at int) { GatherF16Strided(s, w16[at:at+n*hd], hd, hd, q) }},
		{"f16/values", 2, func(at int) { AxpyF16Strided(out, w16[at:at+n*hd], hd, s) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			withPath(b, int64(n*hd*c.elem), func(b *testing.B) {
				i := 0
				for b.Loop() {
					c.run(head(i, c.elem))
					i++
				}
			})
		})
	}
}

// BenchmarkGatherQ8F32: q8_0 rows times f32 activations (no rounding of x).
func BenchmarkGatherQ8F32(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	x := randVec(r, benchCols)
	out := make([]float32, benchRows)
	for _, pct := range benchPcts {
		b.Run(fmt.Sprintf("%dpct", pct), func(b *testing.B) {
			m := benchMatrix(kQ8)
			sets := benchRowSet(pct)
			withPath(b, int64(len(sets[0])*kQ8.rowBytes(benchCols)), func(b *testing.B) {
				i := 0
				for b.Loop() {
					l := i % len(m.layers)
					i++
					rows := sets[i%benchSets]
					GatherQ8_0F32(out[:len(rows)], m.layers[l], benchCols, rows, x)
				}
			})
		})
	}
}

// BenchmarkPrefillQ4: all rows of the 11008x4096 q4_0 matrix times T tokens,
// the prefill mat-mat; MB/s counts weight bytes once per token, so it
// compares with BenchmarkGather/q4_0/100pct as per-token throughput.
func BenchmarkPrefillQ4(b *testing.B) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, T := range []int{1, 4, 16, 64} {
		x := randVec(r, T*benchCols)
		var a Acts
		out := make([]float32, T*benchRows)
		b.Run(fmt.Sprintf("T%d", T), func(b *testing.B) {
			m := benchMatrix(kQ4)
			withPath(b, int64(T*benchRows*kQ4.rowBytes(benchCols)), func(b *testing.B) {
				a.Set(x, benchCols, T)
				i := 0
				for b.Loop() {
					GatherQ4_0Acts(out, benchRows, m.layers[i%len(m.layers)], nil, &a)
					i++
				}
			})
		})
	}
}

// BenchmarkPrefillHot: the prefill kernel on a 64x4096 q4_0 matrix that
// stays in L2: its compute ceiling.
func BenchmarkPrefillHot(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 5))
	w := randMatrix(r, kQ4, 64, benchCols, 0)
	for _, T := range []int{1, 4, 16, 64} {
		x := randVec(r, T*benchCols)
		var a Acts
		out := make([]float32, T*64)
		b.Run(fmt.Sprintf("T%d", T), func(b *testing.B) {
			withPath(b, int64(T*len(w)), func(b *testing.B) {
				a.Set(x, benchCols, T)
				for b.Loop() {
					GatherQ4_0Acts(out, 64, w, nil, &a)
				}
			})
		})
	}
}

// BenchmarkAxpyHot: all rows of a 64x4096 matrix, which stays in L2.
func BenchmarkAxpyHot(b *testing.B) {
	r := rand.New(rand.NewPCG(6, 6))
	coef := randVec(r, 64)
	y := make([]float32, benchCols)
	for _, k := range []kind{kQ8, kQ4} {
		w := randMatrix(r, k, 64, benchCols, 0)
		b.Run(k.String(), func(b *testing.B) {
			withPath(b, int64(len(w)), func(b *testing.B) {
				for b.Loop() {
					axpy(k, y, w, benchCols, nil, coef)
				}
			})
		})
	}
}

// BenchmarkLatency chases pointers through benchSpan bytes, one random line
// per load, in huge and in 4 KB pages: the latency that a gather of short
// rows has to hide. By Little's law, one thread that reads random lines at
// R bytes/s keeps R·latency/64 of them in flight (ops/avx2/NOTES.md).
func BenchmarkLatency(b *testing.B) {
	lines := benchSpan / 64
	perm := rand.New(rand.NewPCG(5, 5)).Perm(lines)
	for _, huge := range []bool{true, false} {
		b.Run(map[bool]string{true: "huge", false: "4k"}[huge], func(b *testing.B) {
			buf, free := benchAlloc[byte](benchSpan, huge)
			defer free()
			for i := range lines {
				binary.LittleEndian.PutUint32(buf[64*perm[i]:], uint32(perm[(i+1)%lines]))
			}
			p := uint32(perm[0])
			const hops = 1024
			for b.Loop() {
				for range hops {
					p = binary.LittleEndian.Uint32(buf[64*int(p):])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*hops), "ns/load")
			b.ReportMetric(float64(p%1), "sink") // keeps the chase from being elided
		})
	}
}

// BenchmarkAxpyQ4Int8 sets the AVX-512 q4_0 axpy with int8 coefficients
// per sixteen rows (axpyQ4i16) beside the one per eight (axpyQ4i8) and the
// f32 one (axpyQ4v) they replaced, one after the other, on L2-resident rows
// (hot) and on 10% and 100% of rows from memory.
func BenchmarkAxpyQ4Int8(b *testing.B) {
	if !hasAVX2 {
		b.Skip("needs AVX2")
	}
	r := rand.New(rand.NewPCG(7, 7))
	coef := randVec(r, benchRows)
	y := make([]float32, benchCols)
	hot := randMatrix(r, kQ4, 64, benchCols, 0)
	m := benchMatrix(kQ4)
	for _, pct := range []int{0, 10, 100} {
		name, sets := "hot", [][]int32{nil}
		if pct > 0 {
			name, sets = fmt.Sprintf("%dpct", pct), benchRowSet(pct)
		}
		for _, kind := range []string{"int16", "int8", "f32"} {
			b.Run(name+"/"+kind, func(b *testing.B) {
				int8Axpy, int16Rows = kind != "f32", kind == "int16"
				defer func() { int8Axpy, int16Rows = true, true }()
				n := 64
				if pct > 0 {
					n = len(sets[0])
				}
				b.SetBytes(int64(n * kQ4.rowBytes(benchCols)))
				i := 0
				for b.Loop() {
					i++
					if pct == 0 {
						AxpyQ4_0(y, hot, benchCols, nil, coef[:64])
						continue
					}
					rows := sets[i%benchSets]
					AxpyQ4_0(y, m.layers[i%len(m.layers)], benchCols, rows, coef[:len(rows)])
				}
			})
		}
	}
}
