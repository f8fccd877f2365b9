//go:build cuda

package cuda

import (
	"fmt"
	"math"

	"github.com/pinfer/pinfer/ops"
)

var kernelNames = []string{
	"rms_norm", "rope", "kv_store", "attention", "copy16", "ffn_act",
	"quant_q8", "compact", "norm2", "ew", "embed", "rope2", "attn2",
	"ax_f32", "ax_f16", "ax_q8_0", "ax_q4_0",
}

// benchKernels are launched by the bandwidth tests only: the previous
// gathers, the current ones without the touches of x, and kernels that
// time fixed costs.
var benchKernels = []string{
	"gvprev_f16", "gvprev_q4_0", "gv_noxt_f16_64", "nop", "chain",
}

func init() {
	kernelNames = append(kernelNames, benchKernels...)
	for _, t := range []string{"f32", "f16", "q8_0", "q4_0"} {
		for _, g := range []string{"8", "16", "32", "64"} {
			kernelNames = append(kernelNames, "gv_"+t+"_"+g, "gu_"+t+"_"+g)
		}
	}
}

const maxSlices = 4096

// arg is one kernel argument in its 8-byte slot.
type arg = uint64

func ptr(b *Buffer) arg {
	if b == nil {
		return 0
	}
	return arg(b.Ptr)
}
func i64(v int) arg     { return arg(int64(v)) }
func f64(v float64) arg { return math.Float64bits(v) }

// Matrix is a weight matrix uploaded once in the device layout.
type Matrix struct {
	Layout
	Buf *Buffer
}

// UploadMatrix copies m to the device; with rows set, only those rows, in
// that order (the hot neurons of a layer), so that row r on the device is
// m's row rows[r].
func (d *Device) UploadMatrix(m *ops.Matrix, rows []int32) (*Matrix, error) {
	l, data, err := Pack(m, rows)
	if err != nil {
		return nil, err
	}
	buf, err := d.Alloc(int64(len(data)))
	if err != nil {
		return nil, err
	}
	if err := d.UploadBytes(buf, data); err != nil {
		d.Free(buf)
		return nil, err
	}
	// The copy is queued: wait so that data may be collected.
	if err := d.Sync(); err != nil {
		d.Free(buf)
		return nil, err
	}
	return &Matrix{Layout: l, Buf: buf}, nil
}

// Free releases the matrix's memory.
func (m *Matrix) Free(d *Device) { d.Free(m.Buf) }

func suffix(t ops.DType) string {
	switch t {
	case ops.F32:
		return "f32"
	case ops.F16:
		return "f16"
	case ops.Q8_0:
		return "q8_0"
	}
	return "q4_0"
}

// elemsPerVector is how many elements one 16-byte load of a row holds.
func elemsPerVector(t ops.DType) int {
	switch t {
	case ops.F32:
		return 4
	case ops.F16:
		return 8
	case ops.Q8_0:
		return 16
	}
	return 32
}

func need(b *Buffer, bytes int64, what string) error {
	if b == nil || b.Bytes < bytes {
		have := int64(0)
		if b != nil {
			have = b.Bytes
		}
		return fmt.Errorf("cuda: %s buffer has %d bytes, needs %d", what, have, bytes)
	}
	return nil
}

// MatVec queues out[k] = row r_k of m · x for k < n, where r_k = idx[k]
// (int32 row ids on the device) or k when idx is nil: the dense mat-vec and
// the sparse row-gather. x holds m.Cols floats. q4_0 rows are dotted with x
// rounded to q8_0 first, as the CPU's q4_0 kernels do (into a scratch of
// the Device: calls must stay on its stream).
func (d *Device) MatVec(out *Buffer, m *Matrix, x, idx *Buffer, n int) error {
	if err := need(x, 4*int64(m.Cols), "mat-vec input"); err != nil {
		return err
	}
	var xq *QX
	if m.Type == ops.Q4_0 {
		var err error
		if xq, err = d.scratchQX(m.Cols); err != nil {
			return err
		}
		if err := d.Quantize(xq, x); err != nil {
			return err
		}
	}
	return d.Gemv(out, m, x, xq, idx, n, nil)
}

// Axpy queues y += Σ_k a[k] · row r_k of m for k < n, r_k as in MatVec: the
// down projection of the active neurons over a neuron-major down_t. The sum
// is computed in a fixed order, so repeated runs give identical results.
// Calls on one Device share a scratch buffer, so they must stay on its stream.
func (d *Device) Axpy(y *Buffer, m *Matrix, a, idx *Buffer, n int) error {
	return d.AxpyN(y, m, a, idx, n, nil, nil, false)
}

// growScratch sizes the axpy scratch; it allocates only when a larger call
// comes, so a warmed-up decode step allocates nothing (and may be captured).
func (d *Device) growScratch(bytes int64) error {
	if d.scratch != nil && d.scratch.Bytes >= bytes {
		return nil
	}
	if err := d.Sync(); err != nil {
		return err
	}
	d.Free(d.scratch)
	var err error
	d.scratch, err = d.Alloc(bytes)
	return err
}

// Reserve sizes the axpy scratch for rows of cols columns ahead of a graph
// capture, whatever the number of rows.
func (d *Device) Reserve(cols int) error {
	if err := d.growScratch(int64(4*d.SMs) * int64(cols) * 4); err != nil {
		return err
	}
	if cols%32 == 0 {
		_, err := d.scratchQX(cols)
		return err
	}
	return nil
}

// RMSNorm queues out = x / rms(x) · w over n floats.
func (d *Device) RMSNorm(out, x, w *Buffer, n int, eps float32) error {
	for _, b := range []*Buffer{out, x, w} {
		if err := need(b, 4*int64(n), "rms_norm"); err != nil {
			return err
		}
	}
	return d.launch("rms_norm", 1, 1, 1024, ptr(out), ptr(x), ptr(w), i64(n), f64(float64(eps)))
}

// RoPE rotates x (nHead heads of headDim) in place for position pos, as
// ops.RoPE does.
func (d *Device) RoPE(x *Buffer, nHead, headDim, nRot, pos int, theta float64, neox bool) error {
	if nRot%2 != 0 || nRot > headDim {
		return fmt.Errorf("cuda: rope n_rot %d must be even and at most the head size %d", nRot, headDim)
	}
	if err := need(x, 4*int64(nHead*headDim), "rope"); err != nil {
		return err
	}
	nx := 0
	if neox {
		nx = 1
	}
	n := nHead * nRot / 2
	return d.launch("rope", (n+255)/256, 1, 256, ptr(x), i64(nHead), i64(headDim), i64(nRot), i64(pos), f64(theta), i64(nx))
}

// KVCache holds every position's k and v rows of one attention layer in
// device memory, with the attention's score scratch.
type KVCache struct {
	NCtx, KDim, VDim int
	K, V, scores     *Buffer
}

// NewKVCache allocates a cache of nctx positions for up to nHead heads.
func (d *Device) NewKVCache(nctx, kdim, vdim, nHead int) (*KVCache, error) {
	c := &KVCache{NCtx: nctx, KDim: kdim, VDim: vdim}
	var err error
	if c.K, err = d.Alloc(4 * int64(nctx*kdim)); err != nil {
		return nil, err
	}
	if c.V, err = d.Alloc(4 * int64(nctx*vdim)); err != nil {
		d.Free(c.K)
		return nil, err
	}
	if c.scores, err = d.Alloc(4 * int64(nctx*nHead)); err != nil {
		d.Free(c.K)
		d.Free(c.V)
		return nil, err
	}
	return c, nil
}

// Free releases the cache.
func (c *KVCache) Free(d *Device) {
	d.Free(c.K)
	d.Free(c.V)
	d.Free(c.scores)
}

// Attention stores k and v at position pos of the cache and queues out =
// softmax(q·Kᵀ·scale)·V per head over positions up to pos (the last window
// of them when window > 0), with nHead/nHeadKV query heads per KV head.
// scale 0 means 1/√head_dim.
func (d *Device) Attention(out, q, k, v *Buffer, c *KVCache, pos, nHead, nHeadKV, window int, scale float32) error {
	if nHead <= 0 || nHeadKV <= 0 || nHead%nHeadKV != 0 || c.KDim%nHeadKV != 0 || c.VDim%nHeadKV != 0 {
		return fmt.Errorf("cuda: attention of %d heads over %d KV heads (k %d, v %d wide)", nHead, nHeadKV, c.KDim, c.VDim)
	}
	if pos < 0 || pos >= c.NCtx {
		return fmt.Errorf("cuda: context is full: position %d, context %d", pos, c.NCtx)
	}
	if c.scores.Bytes < 4*int64(c.NCtx*nHead) {
		return fmt.Errorf("cuda: the cache was made for fewer than %d heads", nHead)
	}
	hd, vd := c.KDim/nHeadKV, c.VDim/nHeadKV
	for _, x := range []struct {
		b     *Buffer
		bytes int
	}{{q, nHead * hd}, {k, c.KDim}, {v, c.VDim}, {out, nHead * vd}} {
		if err := need(x.b, 4*int64(x.bytes), "attention"); err != nil {
			return err
		}
	}
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(hd)))
	}
	w := max(c.KDim, c.VDim)
	if err := d.launch("kv_store", (w+255)/256, 1, 256, ptr(c.K), ptr(c.V), ptr(k), ptr(v), i64(c.KDim), i64(c.VDim), i64(pos)); err != nil {
		return err
	}
	return d.launch("attention", nHead, 1, 256, ptr(out), ptr(q), ptr(c.K), ptr(c.V), ptr(c.scores),
		i64(c.NCtx), i64(nHead), i64(nHeadKV), i64(hd), i64(vd), i64(pos), i64(window), f64(float64(scale)))
}

// CopyKernel queues a copy of n bytes (a multiple of 16) by a plain kernel.
func (d *Device) CopyKernel(dst, src *Buffer, n int64) error {
	if n%16 != 0 || n > dst.Bytes || n > src.Bytes {
		return fmt.Errorf("cuda: kernel copy of %d bytes between buffers of %d and %d", n, src.Bytes, dst.Bytes)
	}
	return d.launch("copy16", 8*d.SMs, 1, 512, ptr(dst), ptr(src), i64(int(n/16)))
}

// FFNAct queues g[k] = act(g[k] + bias[idx[k]], u[k]) · u[k] for k < n, the
// activation ops.FFNActivation computes; u and bias may be nil, and bias is
// indexed by the rows idx names (by k when idx is nil).
func (d *Device) FFNAct(g, u, bias, idx *Buffer, n int, act string, threshold float32) error {
	code, ok := actCodes[act]
	if !ok {
		return fmt.Errorf("cuda: FFN activation %q has no kernel", act)
	}
	if err := need(g, 4*int64(n), "activation"); err != nil {
		return err
	}
	if u != nil {
		if err := need(u, 4*int64(n), "activation up"); err != nil {
			return err
		}
	}
	return d.launch("ffn_act", (n+255)/256, 1, 256, ptr(g), ptr(u), ptr(bias), ptr(idx), i64(n), i64(code), f64(float64(threshold)))
}

// View is the part of b from off bytes on, n bytes long: kernels take
// buffers, and one upload may carry several tokens' vectors.
func (b *Buffer) View(off, n int64) *Buffer {
	if off < 0 || n < 0 || off+n > b.Bytes {
		panic(fmt.Sprintf("cuda: view of %d bytes at %d of a %d-byte buffer", n, off, b.Bytes))
	}
	return &Buffer{Ptr: b.Off(off), Bytes: n}
}
