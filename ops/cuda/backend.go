//go:build cuda

package cuda

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/pinfer/pinfer/ops"
	"gorgonia.org/cu"
)

// Backend is the GPU as ops.Accel: it holds a Residency and runs the
// executor's mat-vecs over resident matrices and the hot share of each
// sparse FFN, while the CPU computes the cold share.
//
// Threads: a driver-API context may be current on several OS threads, so
// rather than hopping every call over a channel to one locked goroutine
// (two thread hand-offs per call, hundreds of calls per token) each call
// locks the caller's goroutine to its thread, makes the context current
// there and unlocks when done. A mutex keeps one call on the device at a
// time; an FFN holds it from FFNStart until its wait, as the stream and
// the staging buffers are shared.
type Backend struct {
	mu    sync.Mutex
	d     *Device
	dense map[*ops.Matrix]*Matrix
	ffns  map[*ops.Matrix]*hotFFN
	bytes int64
	err   error // the first device failure: from then on the CPU does all

	// Staging: activations cross through pinned host memory.
	hIn, hOut, hIdx         *HostBuffer
	dIn, dOut, dIdx, dG, dU *Buffer

	hot, cold       [][]int32 // FFNStart's per-token split: views of the below or of a hotFFN's lists
	hotBuf, coldBuf [][]int32 // owned, reused
}

type hotFFN struct {
	gate, up, down *Matrix
	downSrc        *ops.Matrix
	bias           *Buffer // gate bias of the hot neurons, in device row order
	ids            []int32 // device row -> neuron id
	local          []int32 // neuron id -> device row, -1 on the CPU
	allRows        []int32 // 0..len(ids)-1: every hot row
	coldAll        []int32 // the CPU's neurons when all are active; never nil
	act            string
	thr            float32
}

// NewBackend opens GPU ordinal and uploads r.
func NewBackend(ordinal int, r *Residency) (*Backend, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d, err := Open(ordinal)
	if err != nil {
		return nil, err // Open undid its own thread lock
	}
	runtime.UnlockOSThread() // Open's; the deferred one is ours
	b := &Backend{d: d, dense: map[*ops.Matrix]*Matrix{}, ffns: map[*ops.Matrix]*hotFFN{}}
	if err := b.upload(r); err != nil {
		runtime.LockOSThread() // for Close's unlock
		b.closeLocked()
		return nil, err
	}
	return b, nil
}

func (b *Backend) upload(r *Residency) error {
	for _, m := range r.Dense {
		if b.dense[m] != nil {
			continue
		}
		dm, err := b.d.UploadMatrix(m, nil)
		if err != nil {
			return err
		}
		b.dense[m] = dm
		b.bytes += int64(dm.Bytes())
	}
	for _, f := range r.FFNs {
		if len(f.Hot) == 0 || b.ffns[f.Gate] != nil {
			continue
		}
		h := &hotFFN{downSrc: f.Down, ids: f.Hot, act: f.Act, thr: f.Threshold, local: make([]int32, f.Gate.Rows), coldAll: []int32{}}
		for i := range h.local {
			h.local[i] = -1
		}
		for k, id := range f.Hot {
			h.local[id] = int32(k)
			h.allRows = append(h.allRows, int32(k))
		}
		for i, l := range h.local {
			if l < 0 {
				h.coldAll = append(h.coldAll, int32(i))
			}
		}
		var err error
		if h.gate, err = b.d.UploadMatrix(f.Gate, f.Hot); err != nil {
			return err
		}
		b.ffns[f.Gate] = h // from here Close frees what follows too
		if f.Up != nil {
			if h.up, err = b.d.UploadMatrix(f.Up, f.Hot); err != nil {
				return err
			}
		}
		if h.down, err = b.d.UploadMatrix(f.Down, f.Hot); err != nil {
			return err
		}
		if f.GateBias != nil {
			bias := make([]float32, len(f.Hot))
			for k, id := range f.Hot {
				bias[k] = f.GateBias[id]
			}
			if h.bias, err = b.d.Alloc(4 * int64(len(bias))); err != nil {
				return err
			}
			if err = b.d.UploadF32(h.bias, bias); err != nil {
				return err
			}
		}
		for _, m := range []*Matrix{h.gate, h.up, h.down} {
			if m != nil {
				b.bytes += int64(m.Bytes())
			}
		}
	}
	return b.d.Sync()
}

// Bytes is the device memory the weights take.
func (b *Backend) Bytes() int64 { return b.bytes }

// Name is the GPU's name.
func (b *Backend) Name() string { return b.d.Name }

// Err is the device failure that turned the backend off, if any.
func (b *Backend) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Close frees the device memory; the backend must not be ops.Device any more.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.d == nil {
		return nil
	}
	if err := b.bind(); err != nil {
		return err
	}
	b.closeLocked()
	return nil
}

// closeLocked frees everything; the thread is bound, and Device.Close
// releases that binding.
func (b *Backend) closeLocked() {
	for _, m := range b.dense {
		m.Free(b.d)
	}
	for _, h := range b.ffns {
		for _, m := range []*Matrix{h.gate, h.up, h.down} {
			if m != nil {
				m.Free(b.d)
			}
		}
		b.d.Free(h.bias)
	}
	for _, x := range []*Buffer{b.dIn, b.dOut, b.dIdx, b.dG, b.dU} {
		b.d.Free(x)
	}
	for _, h := range []*HostBuffer{b.hIn, b.hOut, b.hIdx} {
		b.d.FreeHost(h)
	}
	b.dense, b.ffns = nil, nil
	b.d.Close()
	b.d = nil
}

// bind locks the goroutine to its thread and makes the context current
// there; the caller unlocks the thread.
func (b *Backend) bind() error {
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(b.d.ctx); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("cuda: set context: %v", err)
	}
	return nil
}

func (b *Backend) fail(err error) {
	if b.err == nil {
		b.err = err
		fmt.Fprintf(os.Stderr, "pinfer: GPU failure, the CPU computes from now on: %v\n", err)
	}
}

// MatMul runs out = x·mᵀ on the GPU when m is resident.
func (b *Backend) MatMul(out []float32, m *ops.Matrix, x []float32, T int) bool {
	dm := b.dense[m]
	if dm == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return false
	}
	if err := b.matMul(out, dm, x, T); err != nil {
		b.fail(err)
		return false
	}
	return true
}

func (b *Backend) matMul(out []float32, m *Matrix, x []float32, T int) error {
	if err := b.bind(); err != nil {
		return err
	}
	defer runtime.UnlockOSThread()
	nx, ny := T*m.Cols, T*m.Rows
	if err := b.stage(nx, ny, 0, 0); err != nil {
		return err
	}
	copy(b.hIn.F32(), x[:nx])
	if err := b.d.UploadHostAsync(b.dIn, b.hIn, 4*int64(nx)); err != nil {
		return err
	}
	for t := 0; t < T; t++ {
		o := b.dOut.View(4*int64(t*m.Rows), 4*int64(m.Rows))
		if err := b.d.MatVec(o, m, b.dIn.View(4*int64(t*m.Cols), 4*int64(m.Cols)), nil, m.Rows); err != nil {
			return err
		}
	}
	if err := b.d.DownloadHostAsync(b.hOut, b.dOut, 4*int64(ny)); err != nil {
		return err
	}
	if err := b.d.Sync(); err != nil {
		return err
	}
	copy(out[:ny], b.hOut.F32())
	return nil
}

// stage grows the staging buffers to in and out floats, idx ids and gu
// floats of gate and up values. Nothing is queued when it runs.
func (b *Backend) stage(in, out, idx, gu int) error {
	for _, s := range []struct {
		h     **HostBuffer
		d     **Buffer
		bytes int64
	}{{&b.hIn, &b.dIn, 4 * int64(in)}, {&b.hOut, &b.dOut, 4 * int64(out)}, {&b.hIdx, &b.dIdx, 4 * int64(idx)}, {nil, &b.dG, 4 * int64(gu)}, {nil, &b.dU, 4 * int64(gu)}} {
		size := max(s.bytes, 4096)
		if *s.d == nil || (*s.d).Bytes < s.bytes {
			b.d.Free(*s.d)
			*s.d = nil
			nb, err := b.d.Alloc(size + size/2)
			if err != nil {
				return err
			}
			*s.d = nb
		}
		if s.h != nil && (*s.h == nil || (*s.h).Bytes < s.bytes) {
			b.d.FreeHost(*s.h)
			*s.h = nil
			nh, err := b.d.AllocHost(size + size/2)
			if err != nil {
				return err
			}
			*s.h = nh
		}
	}
	return nil
}

// I32 views the buffer as int32s.
func (h *HostBuffer) I32() []int32 { return unsafe.Slice((*int32)(h.p), h.Bytes/4) }

// FFNStart queues the hot ∩ active neurons of f on the GPU and hands the
// CPU the rest; see ops.Accel.
func (b *Backend) FFNStart(f *ops.FFN, down *ops.Matrix, x []float32, T int, actives [][]int32) ([][]int32, func([]float32), bool) {
	h := b.ffns[f.Gate]
	if h == nil || h.downSrc != down {
		return nil, nil, false
	}
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return nil, nil, false
	}
	for len(b.hot) < T {
		b.hot, b.cold = append(b.hot, nil), append(b.cold, nil)
		b.hotBuf = append(b.hotBuf, make([]int32, 0, 256))
		b.coldBuf = append(b.coldBuf, make([]int32, 0, 256))
	}
	nHot, anyCold := 0, false
	for t := 0; t < T; t++ {
		var a []int32
		if actives != nil {
			a = actives[t]
		}
		if a == nil {
			b.hot[t], b.cold[t] = h.allRows, h.coldAll
		} else {
			// Never nil: a nil list would tell the CPU "every neuron".
			hot, cold := b.hotBuf[t][:0], b.coldBuf[t][:0]
			for _, id := range a {
				if uint32(id) < uint32(len(h.local)) && h.local[id] >= 0 {
					hot = append(hot, h.local[id])
				} else {
					cold = append(cold, id)
				}
			}
			b.hotBuf[t], b.coldBuf[t] = hot, cold
			b.hot[t], b.cold[t] = hot, cold
		}
		nHot += len(b.hot[t])
		anyCold = anyCold || len(b.cold[t]) > 0
	}
	if nHot == 0 {
		b.mu.Unlock()
		return nil, nil, false
	}
	dim := h.down.Cols
	if err := b.ffnLaunch(h, x, T, nHot); err != nil {
		b.fail(err)
		b.mu.Unlock()
		return nil, nil, false
	}
	var cold [][]int32
	if anyCold {
		cold = b.cold[:T]
	}
	hot := b.hot[:T]
	wait := func(out []float32) {
		defer b.mu.Unlock()
		if err := b.ffnWait(); err != nil {
			b.fail(err)
			cpuHot(f, down, h, x, T, hot, out)
			return
		}
		ops.Axpy(out[:T*dim], 1, b.hOut.F32()[:T*dim])
	}
	return cold, wait, true
}

func (b *Backend) ffnLaunch(h *hotFFN, x []float32, T, nHot int) error {
	if err := b.bind(); err != nil {
		return err
	}
	defer runtime.UnlockOSThread()
	d, dim := h.gate.Cols, h.down.Cols
	if err := b.stage(T*d, T*dim, nHot, nHot); err != nil {
		return err
	}
	copy(b.hIn.F32(), x[:T*d])
	ids := b.hIdx.I32()[:0]
	for _, hot := range b.hot[:T] {
		ids = append(ids, hot...)
	}
	dev := b.d
	if err := dev.UploadHostAsync(b.dIn, b.hIn, 4*int64(T*d)); err != nil {
		return err
	}
	if err := dev.UploadHostAsync(b.dIdx, b.hIdx, 4*int64(nHot)); err != nil {
		return err
	}
	if err := cu.MemsetD32Async(b.dOut.Ptr, 0, int64(T*dim), dev.stream); err != nil {
		return err
	}
	off := int64(0)
	for t, hot := range b.hot[:T] {
		n := len(hot)
		if n == 0 {
			continue
		}
		idx, g := b.dIdx.View(4*off, 4*int64(n)), b.dG.View(4*off, 4*int64(n))
		xt := b.dIn.View(4*int64(t*d), 4*int64(d))
		if err := dev.MatVec(g, h.gate, xt, idx, n); err != nil {
			return err
		}
		var u *Buffer
		if h.up != nil {
			u = b.dU.View(4*off, 4*int64(n))
			if err := dev.MatVec(u, h.up, xt, idx, n); err != nil {
				return err
			}
		}
		if err := dev.FFNAct(g, u, h.bias, idx, n, h.act, h.thr); err != nil {
			return err
		}
		if err := dev.Axpy(b.dOut.View(4*int64(t*dim), 4*int64(dim)), h.down, g, idx, n); err != nil {
			return err
		}
		off += int64(n)
	}
	return dev.DownloadHostAsync(b.hOut, b.dOut, 4*int64(T*dim))
}

func (b *Backend) ffnWait() error {
	if err := b.bind(); err != nil {
		return err
	}
	defer runtime.UnlockOSThread()
	return b.d.Sync()
}

// cpuHot computes the GPU's share on the CPU, after a device failure, with
// the portable row ops.
func cpuHot(f *ops.FFN, down *ops.Matrix, h *hotFFN, x []float32, T int, hot [][]int32, out []float32) {
	d, dim := f.Gate.Cols, down.Cols
	for t := 0; t < T; t++ {
		xt, ot := x[t*d:(t+1)*d], out[t*dim:(t+1)*dim]
		for _, l := range hot[t] {
			id := int(h.ids[l])
			g, u := f.Gate.DotRow(id, xt), float32(1)
			if f.GateBias != nil {
				g += f.GateBias[id]
			}
			if f.Up != nil {
				u = f.Up.DotRow(id, xt)
			}
			if a := ops.FFNActivation(f.Act, f.Threshold, g, u); a != 0 {
				down.AxpyRow(id, a, ot)
			}
		}
	}
}
