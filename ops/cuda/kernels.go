//go:build cuda

package cuda

import (
	"fmt"
	"math"

	"github.com/pinfer/pinfer/ops"
)

var kernelNames = []string{
	"gemv_f32", "gemv_f16", "gemv_q8_0", "gemv_q4_0",
	"gemv_f32_g", "gemv_f16_g", "gemv_q8_0_g", "gemv_q4_0_g",
	"axpy_f32", "axpy_f16", "axpy_q8_0", "axpy_q4_0",
	"rms_norm", "rope", "kv_store", "attention", "copy16", "ffn_act",
}

const (
	gemvWarps = 4 // rows per gemv block, one warp each: small blocks spread evenly over the SMs
	maxSlices = 4096
)

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

// globalX forces the mat-vec kernels that read x from global memory, so
// tests reach both paths for the quantized types.
var globalX = false

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
// the sparse row-gather. x holds m.Cols floats.
func (d *Device) MatVec(out *Buffer, m *Matrix, x, idx *Buffer, n int) error {
	if idx == nil && n > m.Rows {
		return fmt.Errorf("cuda: mat-vec of %d rows over a %d-row matrix", n, m.Rows)
	}
	for _, c := range []struct {
		b     *Buffer
		bytes int64
		what  string
	}{{out, 4 * int64(n), "mat-vec output"}, {x, 4 * int64(m.Cols), "mat-vec input"}} {
		if err := need(c.b, c.bytes, c.what); err != nil {
			return err
		}
	}
	if idx != nil {
		if err := need(idx, 4*int64(n), "mat-vec index"); err != nil {
			return err
		}
	}
	// Quantized rows stage x in shared memory, padded by 4 floats per 32,
	// unless that would pass the 48 KB a block gets without opting in: on
	// the H200 that made the q4_0 gather 1.3x and the dense q4_0 mat-vec
	// 1.9x faster, while f16 rows, whose lanes read x only 32 bytes apart,
	// were faster reading it from global memory (NOTES.md).
	name, shmem := "gemv_"+suffix(m.Type), (m.Cols+m.Cols/32*4+4)*4
	if shmem > 48<<10 || globalX || m.Type == ops.F32 || m.Type == ops.F16 {
		name, shmem = name+"_g", 0
	}
	return d.launchShared(name, (n+gemvWarps-1)/gemvWarps, 1, gemvWarps*32, shmem,
		ptr(out), ptr(m.Buf), i64(m.Stride), i64(m.QBytes), ptr(idx), i64(n), i64(m.Cols), ptr(x))
}

// Axpy queues y += Σ_k a[k] · row r_k of m for k < n, r_k as in MatVec: the
// down projection of the active neurons over a neuron-major down_t. The sum
// is computed in a fixed order, so repeated runs give identical results.
// Calls on one Device share a scratch buffer, so they must stay on its stream.
func (d *Device) Axpy(y *Buffer, m *Matrix, a, idx *Buffer, n int) error {
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
	if n == 0 {
		return nil
	}
	// A block covers 32 vectors of a row (512 bytes) and a chunk of rows.
	// Enough chunks to give each SM about four blocks keep the memory busy;
	// chunks of at least 32 rows keep the partials few.
	nv := m.Cols / elemsPerVector(m.Type)
	gx := max(1, (nv+31)/32)
	gy := max(1, min((4*d.SMs+gx-1)/gx, (n+31)/32))
	chunk := (n + gy - 1) / gy
	gy = (n + chunk - 1) / max(chunk, 1)
	if gx > maxSlices {
		return fmt.Errorf("cuda: axpy rows of %d columns are too long", m.Cols)
	}
	if gy > 1 {
		if err := d.growScratch(int64(gy) * int64(m.Cols) * 4); err != nil {
			return err
		}
	}
	return d.launch("axpy_"+suffix(m.Type), gx, gy, 256,
		ptr(y), ptr(m.Buf), i64(m.Stride), i64(m.QBytes), ptr(idx), ptr(a), i64(n), i64(m.Cols),
		i64(chunk), ptr(d.scratch), ptr(d.counters))
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
	return d.growScratch(int64(4*d.SMs) * int64(cols) * 4)
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
