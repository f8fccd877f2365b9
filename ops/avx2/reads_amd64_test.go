//go:build amd64 && !purego

package avx2

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestReadRows: readRows reads the chosen rows' lines and no others. Each
// row holds one bit of its own, in a word that the OR keeps (bytes 0-7 of a
// 16-byte quarter of a line), so a row read or skipped shows in the result.
func TestReadRows(t *testing.T) {
	const nrows, lines = 64, 5
	stride := lines*64 + 64 // a line past the lines read, never read
	r := rand.New(rand.NewPCG(3, 4))
	w := make([]byte, nrows*stride)
	for k := range nrows {
		at := k*stride + r.IntN(lines)*64 + r.IntN(4)*16
		binary.LittleEndian.PutUint64(w[at:], 1<<k)
		binary.LittleEndian.PutUint64(w[k*stride+lines*64:], ^uint64(0))
	}
	for _, n := range []int{0, 1, 3, 4, 7, 9, 33} {
		for _, dist := range []int{1, 8} {
			var rows []int32
			var want uint64
			for _, k := range r.Perm(nrows)[:n] {
				rows = append(rows, int32(k))
				want |= 1 << k
			}
			rows = append(rows, 0) // keeps &rows[0] valid at n = 0
			got := readRows(&w[0], stride, &rows[0], n, lines, dist)
			assert.Equal(t, fmt.Sprintf("%064b", want), fmt.Sprintf("%064b", got), "n=%d dist=%d", n, dist)
		}
	}
}

// BenchmarkGatherShare measures the 70%-of-stream line of issue 4 as a
// ratio within one run: each iteration gathers pct% of a q4_0 matrix's rows
// (BenchmarkGather's matrices and row sets, the default kernel), then reads
// the same rows with readRows (the kernel's reads without its arithmetic),
// then streams as many bytes of a 256 MB buffer, as one run and as four
// side by side (the faster is the stream), so a drift of the host's
// bandwidth meets all alike. gather%stream is the line; reads%stream
// is what the rows' scattered reads allow whatever the arithmetic.
func BenchmarkGatherShare(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2")
	}
	rb := kQ4.rowBytes(benchCols)
	r := rand.New(rand.NewPCG(2, 2))
	x := randVec(r, benchCols)
	xq := make([]byte, benchCols/32*34)
	QuantizeQ8(xq, x)
	out := make([]float32, benchRows)
	a, free := streamBuf(benchHuge)
	defer free()
	lockThread()
	defer unlockThread()
	for _, pct := range []int{10, 20, 50} {
		b.Run(fmt.Sprintf("q4_0/%dpct", pct), func(b *testing.B) {
			m := benchMatrix(kQ4)
			sets := benchRowSet(pct)
			bytes := len(sets[0]) * rb
			chunk := bytes / 4
			var t [2]time.Duration
			st := streams{a: a}
			var sink uint64
			i := 0
			for b.Loop() {
				rows := sets[i%benchSets]
				t0 := time.Now()
				GatherQ4_0(out[:len(rows)], m.layers[i%len(m.layers)], benchCols, rows, xq)
				t1 := time.Now()
				sink |= readRows(&m.layers[(i+1)%len(m.layers)][0], rb, &rows[0], len(rows), rb/64, 8)
				t[0], t[1] = t[0]+t1.Sub(t0), t[1]+time.Since(t1)
				st.read(chunk, 1)
				i += 2
			}
			_ = sink
			stream := st.time()
			for k, name := range []string{"gather-MB/s", "reads-MB/s"} {
				b.ReportMetric(float64(bytes)*float64(b.N)/t[k].Seconds()/1e6, name)
			}
			b.ReportMetric(float64(bytes)*float64(b.N)/stream.Seconds()/1e6, "stream-MB/s")
			b.ReportMetric(100*stream.Seconds()/t[0].Seconds(), "gather%stream")
			b.ReportMetric(100*stream.Seconds()/t[1].Seconds(), "reads%stream")
		})
	}
}
