//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"runtime"

	"github.com/pinfer/pinfer/ops"
	"gorgonia.org/cu"
)

// The calls below queue the kernels of a whole decode step (step.cuh): row
// counts, the token and the position may live in device memory, so that a
// step captured once as a graph replays for every token.

// QX is a vector of N floats (N a multiple of 32) rounded to q8_0 blocks on
// the device, as the CPU rounds activations for q4_0 weights.
type QX struct {
	Buf *Buffer
	N   int
}

// AllocQX allocates a q8_0 vector of n elements.
func (d *Device) AllocQX(n int) (*QX, error) {
	if n <= 0 || n%32 != 0 {
		return nil, fmt.Errorf("cuda: a q8_0 vector of %d elements is not whole blocks of 32", n)
	}
	b, err := d.Alloc(int64(n / 32 * 40))
	if err != nil {
		return nil, err
	}
	return &QX{Buf: b, N: n}, nil
}

func (d *Device) scratchQX(n int) (*QX, error) {
	if d.xq != nil && d.xq.N >= n {
		return &QX{Buf: d.xq.Buf, N: n}, nil
	}
	if d.xq != nil {
		if err := d.Sync(); err != nil {
			return nil, err
		}
		d.Free(d.xq.Buf)
		d.xq = nil
	}
	q, err := d.AllocQX(n)
	if err != nil {
		return nil, err
	}
	d.xq = q
	return q, nil
}

func qptr(q *QX) arg {
	if q == nil {
		return 0
	}
	return ptr(q.Buf)
}

// Quantize queues xq = q8_0(x).
func (d *Device) Quantize(xq *QX, x *Buffer) error {
	if err := need(x, 4*int64(xq.N), "quantize input"); err != nil {
		return err
	}
	nb := xq.N / 32
	return d.launch("quant_q8", min((nb+7)/8, 8*d.SMs), 1, 256, ptr(xq.Buf), ptr(x), i64(xq.N))
}

// stepBlock is the gathers' block size; lanes(m) of its threads dot one
// row.
const stepBlock = 128

// lanes is the lane group that dots one row of m: about a quarter of the
// row's 16-byte vectors, so that each lane has four loads in flight per
// round and a row takes one or two rounds (4096 columns: 64 lanes for
// f16, two rounds; 32 for q4_0, one), between 8 and 64.
func lanes(m *Layout) int {
	g := 8
	for g < 64 && 2*g <= m.Cols/elemsPerVector(m.Type)/4 {
		g *= 2
	}
	return g
}

// stepKernel is the gather kernel of m's type and lane group.
func stepKernel(prefix string, m *Layout) string {
	return fmt.Sprintf("%s_%s_%d", prefix, suffix(m.Type), lanes(m))
}

// rowsGrid is the grid for n rows of m: a block per stepBlock/lanes rows,
// but no more blocks than stay resident at once (the kernels' launch
// bounds: 9 per SM for 64 lanes, 8 for fewer), over which the kernels
// stride. A sparse gather of a few thousand rows is then in flight at
// once, and one whose count is read on the device starts no blocks that
// would only exit.
func (d *Device) rowsGrid(m *Layout, n, perRow int) int {
	g := lanes(m)
	resident := 8
	if g == 64 {
		resident = 9
	}
	rpb := stepBlock / g / perRow
	return max(1, min((n+rpb-1)/rpb, resident*d.SMs))
}

// launchGather launches a gather kernel, which waits in pdl_wait before it
// reads anything: on Hopper it may start while the kernel ahead of it
// drains (programmatic dependent launch), about 0.2-0.3 us a call.
func (d *Device) launchGather(name string, grid int, args ...uint64) error {
	if d.pdl {
		return d.launchPDL(name, grid, 1, stepBlock, 0, args...)
	}
	return d.launch(name, grid, 1, stepBlock, args...)
}

// Epi says what Gemv does with each row's dot.
type Epi int

const (
	EpiStore Epi = iota // out[k] = dot (+ bias[r_k])
	EpiReLU             // out[k] = relu(dot)
	EpiCut              // mask[k] = dot > cut, an int32 flag
)

// GemvOpts are Gemv's optional parts.
type GemvOpts struct {
	Count *Buffer // int32 on the device: the number of rows, instead of n (n is then the most)
	Bias  *Buffer // f32 per matrix row, added with EpiStore
	Epi   Epi
	Cut   float32
	Mask  *Buffer // int32 per row, for EpiCut
}

// Gemv queues out[k] = row r_k of m · x for k < n (r_k = idx[k], or k when
// idx is nil). q4_0 rows read xq (q8_0 of x), the others x.
func (d *Device) Gemv(out *Buffer, m *Matrix, x *Buffer, xq *QX, idx *Buffer, n int, o *GemvOpts) error {
	if o == nil {
		o = &GemvOpts{}
	}
	if idx == nil && n > m.Rows {
		return fmt.Errorf("cuda: mat-vec of %d rows over a %d-row matrix", n, m.Rows)
	}
	if m.Type == ops.Q4_0 {
		if xq == nil || xq.N != m.Cols {
			return fmt.Errorf("cuda: a q4_0 mat-vec of %d columns needs the q8_0 of x", m.Cols)
		}
	} else if err := need(x, 4*int64(m.Cols), "mat-vec input"); err != nil {
		return err
	}
	switch o.Epi {
	case EpiCut:
		if err := need(o.Mask, 4*int64(n), "mat-vec mask"); err != nil {
			return err
		}
	default:
		if err := need(out, 4*int64(n), "mat-vec output"); err != nil {
			return err
		}
	}
	if idx != nil {
		if err := need(idx, 4*int64(n), "mat-vec index"); err != nil {
			return err
		}
	}
	if n == 0 {
		return nil
	}
	return d.launchGather(stepKernel("gv", &m.Layout), d.rowsGrid(&m.Layout, n, 1),
		ptr(out), ptr(m.Buf), i64(m.Stride), i64(m.QBytes), ptr(idx), i64(n), ptr(o.Count), i64(m.Cols),
		ptr(x), qptr(xq), ptr(o.Bias), i64(int(o.Epi)), f64(float64(o.Cut)), ptr(o.Mask))
}

// GateUp queues a[k] = act(gate_r·x + bias[r], up_r·x) for the rows r = r_k
// of k < n (or *count): the FFN's first half for the chosen neurons. up and
// bias may be nil; gate and up share type and shape.
func (d *Device) GateUp(a *Buffer, gate, up *Matrix, x *Buffer, xq *QX, idx *Buffer, n int, count, bias *Buffer, act string, thr float32) error {
	code, ok := actCodes[act]
	if !ok {
		return fmt.Errorf("cuda: FFN activation %q has no kernel", act)
	}
	if up != nil && up.Layout != gate.Layout {
		return fmt.Errorf("cuda: gate and up differ in layout (%s %dx%d, %s %dx%d)", gate.Type, gate.Rows, gate.Cols, up.Type, up.Rows, up.Cols)
	}
	if gate.Type == ops.Q4_0 {
		if xq == nil || xq.N != gate.Cols {
			return fmt.Errorf("cuda: a q4_0 FFN of %d columns needs the q8_0 of x", gate.Cols)
		}
	} else if err := need(x, 4*int64(gate.Cols), "FFN input"); err != nil {
		return err
	}
	if err := need(a, 4*int64(n), "FFN activations"); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	var upBuf *Buffer
	perRow := 1
	if up != nil {
		upBuf, perRow = up.Buf, 2 // a lane group each for gate and up
	}
	return d.launchGather(stepKernel("gu", &gate.Layout), d.rowsGrid(&gate.Layout, n, perRow),
		ptr(a), ptr(gate.Buf), ptr(upBuf), i64(gate.Stride), i64(gate.QBytes), ptr(idx), i64(n), ptr(count),
		i64(gate.Cols), ptr(x), qptr(xq), ptr(bias), i64(code), f64(float64(thr)))
}

// AxpyN queues y += Σ_k a[k] · row r_k of m over k < n (or *count when
// count is set; n is then the most), rows with a zero coefficient skipped.
// With overwrite, y = base + that sum (base nil: 0). The sum's order
// depends only on the row count, so repeated runs agree exactly.
func (d *Device) AxpyN(y *Buffer, m *Matrix, a, idx *Buffer, n int, count, base *Buffer, overwrite bool) error {
	if idx == nil && n > m.Rows {
		return fmt.Errorf("cuda: axpy of %d rows over a %d-row matrix", n, m.Rows)
	}
	if err := need(y, 4*int64(m.Cols), "axpy output"); err != nil {
		return err
	}
	if err := need(a, 4*int64(n), "axpy coefficient"); err != nil {
		return err
	}
	if idx != nil {
		if err := need(idx, 4*int64(n), "axpy index"); err != nil {
			return err
		}
	}
	if n == 0 && !overwrite {
		return nil
	}
	// A block covers a slice of g vectors of every row and a chunk of the
	// rows: about four blocks per SM in all, but chunks of at least 4 rows
	// per lane group (one round of loads in flight each; the partials'
	// reduction costs more than a longer chunk).
	g := 32
	if m.Type == ops.Q8_0 || m.Type == ops.Q4_0 {
		g = 8
	}
	nv := m.Cols / elemsPerVector(m.Type)
	gx := max(1, (nv+g-1)/g)
	if gx > maxSlices {
		return fmt.Errorf("cuda: axpy rows of %d columns are too long", m.Cols)
	}
	perChunk := 4 * 256 / g
	gy := max(1, min((4*d.SMs+gx-1)/gx, (n+perChunk-1)/perChunk))
	if gy > 1 {
		if err := d.growScratch(int64(gy) * int64(m.Cols) * 4); err != nil {
			return err
		}
	}
	ow := 0
	if overwrite {
		ow = 1
	}
	return d.launch("ax_"+suffix(m.Type), gx, gy, 256,
		ptr(y), ptr(m.Buf), i64(m.Stride), i64(m.QBytes), ptr(idx), ptr(a), i64(n), ptr(count), i64(m.Cols),
		ptr(d.scratch), ptr(d.counters), ptr(base), i64(ow))
}

// Compact queues idx = the k < n whose int32 mask[k] is set, ascending,
// *count = how many, and, when total is set, total's int64 += count.
func (d *Device) Compact(idx, count, total, mask *Buffer, n int) error {
	if err := need(idx, 4*int64(n), "compact index"); err != nil {
		return err
	}
	if err := need(mask, 4*int64(n), "compact mask"); err != nil {
		return err
	}
	return d.launch("compact", 1, 1, 1024, ptr(idx), ptr(count), ptr(total), ptr(mask), i64(n))
}

// Norm queues v = x + b (b may be nil), sum = v and sumq = q8_0(v) where
// set, out = rms_norm(v)·w (layer false) or layer_norm(v)·w + bias, and
// outq = q8_0(out) where set.
func (d *Device) Norm(out *Buffer, outq *QX, x, b, sum *Buffer, sumq *QX, w, bias *Buffer, n int, eps float32, layer bool) error {
	for _, q := range []*QX{outq, sumq} {
		if q != nil && q.N != n {
			return fmt.Errorf("cuda: norm of %d with a q8_0 output of %d", n, q.N)
		}
	}
	kind := 0
	if layer {
		kind = 1
	}
	return d.launch("norm2", 1, 1, 1024, ptr(out), qptr(outq), ptr(x), ptr(b), ptr(sum), qptr(sumq), ptr(w), ptr(bias),
		i64(n), f64(float64(eps)), i64(kind))
}

// ewOps are the element-wise kernel's ops.
var ewOps = map[string]int{"add": 0, "mul": 1, "relu": 2, "silu": 3, "gelu": 4}

// Elementwise queues out = a op b (add, mul) or op(a) (relu, silu, gelu),
// and outq = q8_0(out) when set.
func (d *Device) Elementwise(out *Buffer, outq *QX, a, b *Buffer, n int, op string) error {
	code, ok := ewOps[op]
	if !ok {
		return fmt.Errorf("cuda: no element-wise kernel for %q", op)
	}
	if outq != nil && outq.N != n {
		return fmt.Errorf("cuda: %s of %d with a q8_0 output of %d", op, n, outq.N)
	}
	return d.launch("ew", (n+255)/256, 1, 256, ptr(out), qptr(outq), ptr(a), ptr(b), i64(n), i64(code))
}

// Embed queues out = row params[which] + offset of m (params: int64 token
// id and position in device memory), dequantized.
func (d *Device) Embed(out *Buffer, m *Matrix, params *Buffer, which, offset int) error {
	return d.launch("embed", max(1, min((m.Cols+255)/256, d.SMs)), 1, 256, ptr(out), ptr(m.Buf), i64(m.Stride), i64(m.QBytes),
		i64(int(m.Type)), i64(m.Cols), ptr(params), i64(which), i64(offset))
}

// RoPEAt queues out = in rotated at the position params holds.
func (d *Device) RoPEAt(out, in *Buffer, nHead, headDim, nRot int, params *Buffer, theta float64, neox bool) error {
	if nRot%2 != 0 || nRot > headDim {
		return fmt.Errorf("cuda: rope n_rot %d must be even and at most the head size %d", nRot, headDim)
	}
	nx := 0
	if neox {
		nx = 1
	}
	n := max(nHead*nRot/2, nHead*(headDim-nRot), 1)
	return d.launch("rope2", (n+255)/256, 1, 256, ptr(out), ptr(in), i64(nHead), i64(headDim), i64(nRot), ptr(params), f64(theta), i64(nx))
}

// AttentionAt queues the attention of q at the position params holds,
// storing k and v there in c.
func (d *Device) AttentionAt(out, q, k, v *Buffer, c *KVCache, params *Buffer, nHead, nHeadKV, window int, scale float32) error {
	if nHead <= 0 || nHeadKV <= 0 || nHead%nHeadKV != 0 || c.KDim%nHeadKV != 0 || c.VDim%nHeadKV != 0 {
		return fmt.Errorf("cuda: attention of %d heads over %d KV heads (k %d, v %d wide)", nHead, nHeadKV, c.KDim, c.VDim)
	}
	hd, vd := c.KDim/nHeadKV, c.VDim/nHeadKV
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(hd)))
	}
	return d.launch("attn2", nHead, 1, 256, ptr(out), ptr(q), ptr(k), ptr(v), ptr(c.K), ptr(c.V), ptr(c.scores),
		i64(c.NCtx), i64(nHead), i64(nHeadKV), i64(hd), i64(vd), ptr(params), i64(window), f64(float64(scale)))
}

// Bind locks the calling goroutine to its OS thread and makes the device's
// context current there, for a caller that drives the Device from
// goroutines other than Open's; unbind undoes the lock.
func (d *Device) Bind() (unbind func(), err error) {
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("cuda: set context: %v", err)
	}
	return runtime.UnlockOSThread, nil
}

// Release undoes Open's lock of the calling goroutine to its thread, for a
// Device that is driven through Bind from then on.
func (d *Device) Release() { runtime.UnlockOSThread() }
