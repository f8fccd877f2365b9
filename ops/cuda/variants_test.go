//go:build cuda

package cuda

import (
	"math"
	"sort"
	"testing"
	"time"

	"github.com/pinfer/pinfer/ops"
)

// TestGatherVariants times the gather kernels side by side (the previous
// ones, the current ones and variants of them) over several row counts of
// the 11008x4096 matrix, fits time = intercept + bytes/rate over the
// sparse counts, times the fixed costs on their own (an empty kernel; one
// with a gather's dependent loads but not its bytes), and checks every
// kernel's output against the first's. It runs when PINFER_CUDA_VARIANTS
// is set; NOTES.md has the readings.
func TestGatherVariants(t *testing.T) {
	d, cp := timingDevice(t, "PINFER_CUDA_VARIANTS")
	warm := 300 * time.Millisecond
	next := func() time.Duration { w := warm; warm = 40 * time.Millisecond; return w }
	for _, pdl := range []bool{false, true} {
		sec := perCallWarm(t, d, 200, next(), func(int) error {
			if pdl {
				return d.launchPDL("nop", 276, 1, 256, 0, 0)
			}
			return d.launch("nop", 276, 1, 256, 0)
		})
		t.Logf("empty kernel, 276 blocks, pdl %v: %.2f us", pdl, sec*1e6)
	}
	fracs := []float64{0.05, 0.1, 0.15, 0.2, 0.25, 0.4, 1}
	type variant struct {
		kernel   string
		g, block int // lanes per row, block size
		resident int // blocks per SM the grid is capped at; 0: none
		pdl      bool
		fracs    []float64
	}
	sweep := []float64{0.05, 0.1, 0.15, 0.2, 0.25, 0.4, 1}
	point := []float64{0.2}
	for _, typ := range []ops.DType{ops.F16, ops.Q4_0, ops.Q8_0} {
		s := newMultiGather(t, d, typ, fracs)
		var ref []float32
		run := func(v variant, frac float64) (bytes, sec float64) {
			fi := sort.SearchFloat64s(fracs, frac)
			n := s.n[fi]
			gu := v.kernel[:2] == "gu"
			rpb := v.block
			if v.kernel != "chain" {
				rpb /= v.g
			}
			if gu {
				rpb /= 2
			}
			grid := (n + rpb - 1) / rpb
			if v.resident > 0 {
				grid = min(grid, v.resident*d.SMs)
			}
			launch := func(i int, out *Buffer) error {
				k := i % len(s.mats)
				m, idx := s.mats[k], s.idx[fi][i%len(s.idx[fi])]
				var args []arg
				switch {
				case gu:
					up := s.mats[(k+1)%len(s.mats)]
					args = []arg{ptr(out), ptr(m.Buf), ptr(up.Buf), i64(m.Stride), i64(m.QBytes), ptr(idx), i64(n), 0,
						i64(m.Cols), ptr(s.x), ptr(s.xq.Buf), 0, 0, 0}
				case v.kernel == "chain":
					args = []arg{ptr(out), ptr(m.Buf), i64(m.Stride), ptr(idx), i64(n), i64(v.g)}
				default:
					args = []arg{ptr(out), ptr(m.Buf), i64(m.Stride), i64(m.QBytes), ptr(idx), i64(n), 0,
						i64(m.Cols), ptr(s.x), ptr(s.xq.Buf), 0, 0, 0, 0}
				}
				if v.pdl {
					return d.launchPDL(v.kernel, grid, 1, v.block, 0, args...)
				}
				return d.launch(v.kernel, grid, 1, v.block, args...)
			}
			sec = perCallWarm(t, d, 200, next(), func(i int) error { return launch(i, s.y) })
			b := int64(n)*int64(s.mats[0].Stride) + 8*int64(n) + s.xbytes
			if gu {
				b += int64(n) * int64(s.mats[0].Stride)
			}
			bytes = float64(b)
			gbs := bytes / sec / 1e9
			t.Logf("%-18s blk %3d pdl %-5v %3.0f%% %7.2f us %6.0f GB/s %4.0f%%", v.kernel, v.block, v.pdl, 100*frac, sec*1e6, gbs, 100*gbs/cp)
			if frac == 0.2 && !gu && v.kernel != "chain" {
				// The output against the first kernel's, on the first list.
				if err := d.UploadF32(s.y, nanVec(11008)); err != nil {
					t.Fatal(err)
				}
				if err := launch(0, s.y); err != nil {
					t.Fatal(err)
				}
				got := down(t, d, s.y, n)
				if ref == nil {
					ref = got
				}
				var worst, scale float64
				for i := range got {
					worst = max(worst, math.Abs(float64(got[i]-ref[i])))
					scale = max(scale, math.Abs(float64(ref[i])))
					if math.IsNaN(float64(got[i])) {
						worst = math.Inf(1)
					}
				}
				if worst > 1e-4*scale {
					t.Errorf("%s: differs from the first kernel by %g (outputs up to %g)", v.kernel, worst, scale)
				}
			}
			return bytes, sec
		}
		// The kernel MatVec launches (lanes 64 for f16 and q8_0, 32 for
		// q4_0; 128-thread blocks; programmatic dependent launch), without
		// it, without the touches of x, and the previous kernel.
		var vs []variant
		switch typ {
		case ops.F16:
			vs = []variant{
				{"gvprev_f16", 32, 256, 0, false, sweep},
				{"gv_f16_64", 64, 128, 9, true, sweep},
				{"gv_f16_64", 64, 128, 9, false, point},
				{"gv_noxt_f16_64", 64, 128, 9, true, point},
				{"gu_f16_64", 64, 128, 9, true, []float64{0.1, 0.2}},
			}
		case ops.Q8_0:
			vs = []variant{
				{"gv_q8_0_64", 64, 128, 9, true, point},
			}
		default:
			vs = []variant{
				{"gvprev_q4_0", 32, 256, 0, false, sweep},
				{"gv_q4_0_32", 32, 128, 8, true, sweep},
				{"gv_q4_0_32", 32, 128, 8, false, point},
				{"gu_q4_0_32", 32, 128, 8, true, []float64{0.1, 0.2}},
				{"chain", 0, 256, 0, false, point},
				{"chain", 1, 256, 0, false, point},
				{"chain", 1, 256, 0, true, point},
			}
		}
		for _, v := range vs {
			var xs, ys []float64
			for _, frac := range v.fracs {
				b, sec := run(v, frac)
				if frac <= 0.25 {
					xs, ys = append(xs, b), append(ys, sec)
				}
			}
			if len(xs) > 2 {
				a, b := fitLine(xs, ys)
				t.Logf("%-18s blk %3d pdl %-5v fit over 5-25%%: %.2f us + bytes / %.0f GB/s", v.kernel, v.block, v.pdl, a*1e6, 1/b/1e9)
			}
		}
		s.free(d)
	}
}

// fitLine is the least-squares y = a + b·x.
func fitLine(x, y []float64) (a, b float64) {
	var sx, sy, sxx, sxy float64
	n := float64(len(x))
	for i := range x {
		sx += x[i]
		sy += y[i]
		sxx += x[i] * x[i]
		sxy += x[i] * y[i]
	}
	b = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return (sy - b*sx) / n, b
}

// multiGather is gatherSetup with index lists for several row fractions:
// call i takes copy i%copies and list i%lists, with enough lists that the
// rows the 200 calls of a graph touch add up to over 400 MB.
type multiGather struct {
	mats   []*Matrix
	idx    [][]*Buffer
	n      []int
	x, y   *Buffer
	xq     *QX
	xbytes int64 // x as the kernel reads it
}

func newMultiGather(t testing.TB, d *Device, typ ops.DType, fracs []float64) *multiGather {
	const cols = benchCols
	mats, l, r := benchCopies(t, d, typ)
	s := &multiGather{mats: mats}
	for _, frac := range fracs {
		n := int(frac * benchRows)
		s.n = append(s.n, n)
		nl := min(200, max(len(mats), int((400<<20)/max(1, int64(n)*int64(l.Stride)))+1))
		var lists []*Buffer
		for range nl {
			lists = append(lists, upI32(t, d, sortedRows(r, n)))
		}
		s.idx = append(s.idx, lists)
	}
	s.x, s.y = upF32(t, d, randVec(r, cols)), upF32(t, d, make([]float32, benchRows))
	var err error
	if s.xq, err = d.AllocQX(cols); err != nil {
		t.Fatal(err)
	}
	if err := d.Quantize(s.xq, s.x); err != nil {
		t.Fatal(err)
	}
	s.xbytes = 4 * cols
	if typ == ops.Q4_0 {
		s.xbytes = 40 * cols / 32
	}
	return s
}

func (s *multiGather) free(d *Device) {
	for _, m := range s.mats {
		m.Free(d)
	}
	d.Free(s.xq.Buf)
}
