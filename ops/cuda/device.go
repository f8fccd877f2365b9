//go:build cuda

package cuda

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdint.h>
#include <string.h>

// launch passes each argument as one 8-byte slot, which is why every kernel
// takes 64-bit scalars.
static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned bx, unsigned shmem,
                       CUstream s, uint64_t *args, int n) {
	void *p[16];
	for (int i = 0; i < n && i < 16; i++) p[i] = &args[i];
	return cuLaunchKernel(f, gx, gy, 1, bx, 1, 1, shmem, s, p, NULL);
}

// launchPDL launches f allowed to start before the kernel ahead of it on
// the stream finishes (programmatic dependent launch, Hopper and later):
// the kernel must wait in griddepcontrol.wait before it reads anything.
static CUresult launchPDL(CUfunction f, unsigned gx, unsigned gy, unsigned bx, unsigned shmem, CUstream s,
                          uint64_t *args, int n) {
	void *p[16];
	for (int i = 0; i < n && i < 16; i++) p[i] = &args[i];
	CUlaunchAttribute a;
	memset(&a, 0, sizeof a);
	a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	a.value.programmaticStreamSerializationAllowed = 1;
	CUlaunchConfig c;
	memset(&c, 0, sizeof c);
	c.gridDimX = gx;
	c.gridDimY = gy;
	c.gridDimZ = 1;
	c.blockDimX = bx;
	c.blockDimY = 1;
	c.blockDimZ = 1;
	c.sharedMemBytes = shmem;
	c.hStream = s;
	c.attrs = &a;
	c.numAttrs = 1;
	return cuLaunchKernelEx(&c, f, p, NULL);
}

static const char *errName(CUresult r) {
	const char *s = 0;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s) return "unknown CUDA error";
	return s;
}

static CUresult hostAlloc(void **p, size_t n) { return cuMemHostAlloc(p, n, CU_MEMHOSTALLOC_PORTABLE); }

static CUresult beginCapture(CUstream s) { return cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); }
static CUresult endCapture(CUstream s, CUgraph *g, CUgraphExec *e) {
	CUresult r = cuStreamEndCapture(s, g);
	if (r != CUDA_SUCCESS) return r;
	return cuGraphInstantiateWithFlags(e, *g, 0);
}
*/
import "C"

import (
	_ "embed"
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"
)

//go:generate nvcc -fatbin -gencode arch=compute_80,code=compute_80 -gencode arch=compute_90,code=sm_90 -o kernels.fatbin kernels.cu

//go:embed kernels.fatbin
var fatbin string

// Device is one GPU with its context, the kernels' module and one stream on
// which every call is queued in order. A CUDA context is current on one OS
// thread at a time: Open locks the calling goroutine to its thread, and all
// later calls must come from that goroutine.
type Device struct {
	Name      string
	SMs       int
	Ordinal   int
	ctx       cu.CUContext
	dev       cu.Device
	mod       cu.Module
	stream    cu.Stream
	fns       map[string]C.CUfunction
	scratch   *Buffer // the axpy's per-chunk partials
	counters  *Buffer // the axpy's per-column-slice arrival counts
	xq        *QX     // MatVec's q8_0 copy of x for q4_0 rows
	pdl       bool    // the gathers are launched as programmatic dependents
	closeList []func()
}

// Buffer is device memory.
type Buffer struct {
	Ptr   cu.DevicePtr
	Bytes int64
}

// Open makes device ordinal's primary context current on this goroutine's
// OS thread and loads the kernels.
func Open(ordinal int) (*Device, error) {
	runtime.LockOSThread()
	d := &Device{Ordinal: ordinal, fns: map[string]C.CUfunction{}}
	fail := func(what string, err error) (*Device, error) {
		d.Close()
		return nil, fmt.Errorf("cuda: device %d: %s: %v", ordinal, what, err)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return fail("get device", err)
	}
	d.dev = dev
	if d.ctx, err = dev.RetainPrimaryCtx(); err != nil {
		return fail("retain primary context", err)
	}
	if err = cu.SetCurrentContext(d.ctx); err != nil {
		return fail("set context", err)
	}
	d.Name, _ = dev.Name()
	d.SMs, _ = dev.Attribute(cu.MultiprocessorCount)
	major, _ := dev.Attribute(cu.ComputeCapabilityMajor)
	d.pdl = major >= 9 // griddepcontrol (pdl_wait) is Hopper's
	if d.mod, err = cu.LoadData(fatbin); err != nil {
		return fail("load kernels.fatbin", err)
	}
	for _, name := range kernelNames {
		fn, err := d.mod.Function(name)
		if err != nil {
			return fail("kernel "+name, err)
		}
		d.fns[name] = *(*C.CUfunction)(unsafe.Pointer(&fn))
	}
	if d.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fail("make stream", err)
	}
	if d.counters, err = d.Alloc(maxSlices * 4); err != nil {
		return fail("alloc", err)
	}
	if err = cu.MemsetD32(d.counters.Ptr, 0, maxSlices); err != nil {
		return fail("memset", err)
	}
	if err = cu.Synchronize(); err != nil {
		return fail("synchronize", err)
	}
	return d, nil
}

// Close frees what Open made; buffers the caller allocated stay its own.
func (d *Device) Close() error {
	if d == nil {
		return nil
	}
	if d.ctx != (cu.CUContext{}) {
		cu.Synchronize()
	}
	for i := len(d.closeList) - 1; i >= 0; i-- {
		d.closeList[i]()
	}
	d.closeList = nil
	d.Free(d.scratch)
	d.Free(d.counters)
	if d.xq != nil {
		d.Free(d.xq.Buf)
	}
	d.scratch, d.counters, d.xq = nil, nil, nil
	if d.stream != (cu.Stream{}) {
		d.stream.Destroy()
	}
	if d.mod != (cu.Module{}) {
		d.mod.Unload()
	}
	if d.ctx != (cu.CUContext{}) {
		d.dev.ReleasePrimaryCtx()
		d.ctx = cu.CUContext{}
	}
	runtime.UnlockOSThread()
	return nil
}

// Alloc takes bytes of device memory (cuMemAlloc, never managed memory).
func (d *Device) Alloc(bytes int64) (*Buffer, error) {
	p, err := cu.MemAlloc(max(bytes, 1))
	if err != nil {
		return nil, fmt.Errorf("cuda: alloc %d bytes: %v", bytes, err)
	}
	return &Buffer{Ptr: p, Bytes: bytes}, nil
}

// Free releases b; nil is ignored.
func (d *Device) Free(b *Buffer) {
	if b != nil && b.Ptr != 0 {
		cu.MemFree(b.Ptr)
		b.Ptr = 0
	}
}

// Off returns the address off bytes into b.
func (b *Buffer) Off(off int64) cu.DevicePtr { return b.Ptr + cu.DevicePtr(off) }

func (d *Device) launch(name string, gx, gy, block int, args ...uint64) error {
	return d.launchShared(name, gx, gy, block, 0, args...)
}

func (d *Device) launchShared(name string, gx, gy, block, shmem int, args ...uint64) error {
	if gx == 0 || gy == 0 {
		return nil
	}
	return check("launch "+name, C.launch(d.fns[name], C.uint(gx), C.uint(gy), C.uint(block), C.uint(shmem),
		d.cstream(), (*C.uint64_t)(&args[0]), C.int(len(args))))
}

// launchPDL is launch for a kernel that calls pdl_wait before it reads
// anything: it may start while the kernel before it still runs.
func (d *Device) launchPDL(name string, gx, gy, block, shmem int, args ...uint64) error {
	if gx == 0 || gy == 0 {
		return nil
	}
	return check("launch "+name, C.launchPDL(d.fns[name], C.uint(gx), C.uint(gy), C.uint(block), C.uint(shmem),
		d.cstream(), (*C.uint64_t)(&args[0]), C.int(len(args))))
}

func (d *Device) cstream() C.CUstream { return *(*C.CUstream)(unsafe.Pointer(&d.stream)) }

func check(what string, r C.CUresult) error {
	if r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda: %s: %s (%d)", what, C.GoString(C.errName(r)), int(r))
	}
	return nil
}

// upload copies n bytes at p to dst+off, queued on the stream. The driver
// stages pageable memory before the call returns, so p may be reused at once.
func (d *Device) upload(dst *Buffer, off int64, p unsafe.Pointer, n int64) error {
	if n == 0 {
		return nil
	}
	if off < 0 || off+n > dst.Bytes {
		return fmt.Errorf("cuda: upload of %d bytes at %d overruns a %d-byte buffer", n, off, dst.Bytes)
	}
	return cu.MemcpyHtoDAsync(dst.Off(off), p, n, d.stream)
}

func (d *Device) download(p unsafe.Pointer, src *Buffer, off, n int64) error {
	if n == 0 {
		return nil
	}
	if off < 0 || off+n > src.Bytes {
		return fmt.Errorf("cuda: download of %d bytes at %d overruns a %d-byte buffer", n, off, src.Bytes)
	}
	if err := cu.MemcpyDtoHAsync(p, src.Off(off), n, d.stream); err != nil {
		return err
	}
	return d.stream.Synchronize()
}

// UploadBytes, UploadF32 and UploadI32 copy host data into dst from its start.
func (d *Device) UploadBytes(dst *Buffer, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return d.upload(dst, 0, unsafe.Pointer(&b[0]), int64(len(b)))
}

func (d *Device) UploadF32(dst *Buffer, x []float32) error {
	if len(x) == 0 {
		return nil
	}
	return d.upload(dst, 0, unsafe.Pointer(&x[0]), 4*int64(len(x)))
}

func (d *Device) UploadI32(dst *Buffer, x []int32) error {
	if len(x) == 0 {
		return nil
	}
	return d.upload(dst, 0, unsafe.Pointer(&x[0]), 4*int64(len(x)))
}

// DownloadF32 waits for the stream and copies len(x) floats from src.
func (d *Device) DownloadF32(x []float32, src *Buffer) error {
	if len(x) == 0 {
		return d.Sync()
	}
	return d.download(unsafe.Pointer(&x[0]), src, 0, 4*int64(len(x)))
}

// CopyAsync queues a device-to-device copy.
func (d *Device) CopyAsync(dst, src *Buffer, n int64) error {
	if n > dst.Bytes || n > src.Bytes {
		return fmt.Errorf("cuda: copy of %d bytes between buffers of %d and %d", n, src.Bytes, dst.Bytes)
	}
	return cu.MemcpyDtoDAsync(dst.Ptr, src.Ptr, n, d.stream)
}

// Sync waits until everything queued so far has run.
func (d *Device) Sync() error { return d.stream.Synchronize() }

// HostBuffer is page-locked host memory, which copies to and from the GPU
// at full PCIe speed and asynchronously; the executor keeps the activations
// that cross between CPU and GPU in it.
type HostBuffer struct {
	p     unsafe.Pointer
	Bytes int64
}

// AllocHost takes page-locked host memory.
func (d *Device) AllocHost(bytes int64) (*HostBuffer, error) {
	var p unsafe.Pointer
	if err := check("cuMemHostAlloc", C.hostAlloc(&p, C.size_t(max(bytes, 1)))); err != nil {
		return nil, err
	}
	return &HostBuffer{p: p, Bytes: bytes}, nil
}

// F32 views the buffer as float32s.
func (h *HostBuffer) F32() []float32 { return unsafe.Slice((*float32)(h.p), h.Bytes/4) }

// FreeHost releases h.
func (d *Device) FreeHost(h *HostBuffer) {
	if h != nil && h.p != nil {
		cu.MemFreeHost(h.p)
		h.p = nil
	}
}

// UploadHostAsync and DownloadHostAsync copy between pinned host memory and
// the device without waiting; Sync (or an event) tells when they are done.
func (d *Device) UploadHostAsync(dst *Buffer, h *HostBuffer, n int64) error {
	if n > h.Bytes {
		return fmt.Errorf("cuda: upload of %d bytes from a %d-byte host buffer", n, h.Bytes)
	}
	return d.upload(dst, 0, h.p, n)
}

func (d *Device) DownloadHostAsync(h *HostBuffer, src *Buffer, n int64) error {
	if n > h.Bytes || n > src.Bytes {
		return fmt.Errorf("cuda: download of %d bytes between buffers of %d and %d", n, src.Bytes, h.Bytes)
	}
	return cu.MemcpyDtoHAsync(h.p, src.Ptr, n, d.stream)
}

// Graph is a captured sequence of launches and copies, replayed with one
// call: the decode step of a layer costs one launch instead of one per
// kernel.
type Graph struct {
	g C.CUgraph
	e C.CUgraphExec
	d *Device
}

// BeginCapture starts recording this device's stream instead of running it.
func (d *Device) BeginCapture() error {
	return check("cuStreamBeginCapture", C.beginCapture(d.cstream()))
}

// EndCapture stops recording and instantiates what was recorded.
func (d *Device) EndCapture() (*Graph, error) {
	g := &Graph{d: d}
	if err := check("end capture", C.endCapture(d.cstream(), &g.g, &g.e)); err != nil {
		return nil, err
	}
	return g, nil
}

// Launch queues one replay of the graph on the device's stream.
func (g *Graph) Launch() error {
	return check("cuGraphLaunch", C.cuGraphLaunch(g.e, g.d.cstream()))
}

// Destroy frees the graph.
func (g *Graph) Destroy() {
	if g.e != nil {
		C.cuGraphExecDestroy(g.e)
		C.cuGraphDestroy(g.g)
		g.e, g.g = nil, nil
	}
}

// Timer measures device time between two points of the stream.
type Timer struct{ start, stop cu.Event }

// StartTimer records a start event on the stream.
func (d *Device) StartTimer() (*Timer, error) {
	t := &Timer{}
	var err error
	if t.start, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
		return nil, err
	}
	if t.stop, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
		return nil, err
	}
	return t, t.start.Record(d.stream)
}

// Stop records the end, waits for it and returns the milliseconds between.
func (t *Timer) Stop(d *Device) (float64, error) {
	if err := t.stop.Record(d.stream); err != nil {
		return 0, err
	}
	if err := t.stop.Synchronize(); err != nil {
		return 0, err
	}
	ms, err := t.start.Elapsed(t.stop)
	cu.DestroyEvent(&t.start)
	cu.DestroyEvent(&t.stop)
	return ms, err
}
