package ops

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinfer/pinfer/internal/hugepage"
	"github.com/pinfer/pinfer/ops/avx2"
)

// Repacked q4_0 matrices. On AVX2 the row kernels spend ~9 operations a
// row and block, a third of them on scales, and with AVX-512 they still
// read memory slower (avx2.PackPays); with eight rows
// interleaved (avx2.PackQ4x8) one broadcast of x serves all eight and a
// block's scales are one conversion, and a prompt's four tokens share each
// unpacked part. A matrix that the mat-mul reads whole (attention's q, k,
// v, o, the output) is packed once at load; its packed copy then serves
// every row of its whole groups of eight, so that the rows' own bytes are
// not read again and can leave memory. A dense run packs the FFNs too
// (gate and up so, down_t for avx2.AxpyQ4x16), keeping their rows for the
// sparse path. llama.cpp repacks q4_0 at load likewise; --no-repack turns
// it off here too.

// Repack lets PackAll pack.
var Repack = true

// Pack is a matrix to pack and the layout: for mat-vecs (avx2.PackQ4x8),
// or, with Axpy, for a sum of every row scaled (avx2.PackQ4Axpy), as a
// dense FFN's down projection reads ffn_down_t.
type Pack struct {
	M    *Matrix
	Axpy bool
}

// Packing is PackAll's work, which may go on after it returns.
type Packing struct {
	ps    []Pack
	bytes int // of the copies
	free  func()
	stop  atomic.Bool
	done  chan struct{}
}

// PackAll packs the q4_0 matrices of ps that have eight rows or more, where
// that pays (avx2.PackPays, the fast kernels on, Repack set), on up
// to threads goroutines, as llama.cpp repacks at load. The copies share one
// map of 2 MB pages, each matrix's part populated by the kernel in one call
// before it is written (MADV_POPULATE_WRITE). That populating is most of
// the time: for a 7B's 1.3 GB on the 2-core VM 0.1-0.2 s, but up to ~2 s
// just after another process freed its memory (the kernel compacts it into
// huge pages), and ~3 s in 4 KB pages a fault at a time. So PackAll returns
// after budget, and what is left goes on in the background, the row kernels
// serving each matrix until its copy is made. Each packed matrix's rows,
// which only its copy is read for from then on, go to release (if not
// nil), which several goroutines may call at the same time. Nil when there
// is nothing to pack.
func PackAll(ps []Pack, threads int, budget time.Duration, release func([]byte)) (*Packing, error) {
	if !Repack || !Fast || !avx2.PackPays() {
		return nil, nil
	}
	p := &Packing{done: make(chan struct{})}
	seen := map[Pack]bool{}
	for _, k := range ps {
		if n := k.M.packBytes(k.Axpy); n > 0 && k.M.packed(k.Axpy) == nil && !seen[k] {
			seen[k] = true
			p.ps = append(p.ps, k)
			p.bytes += n
		}
	}
	if p.bytes == 0 {
		return nil, nil
	}
	buf, free, err := hugepage.Alloc[byte](p.bytes, true)
	if err != nil {
		return nil, fmt.Errorf("repacking %d MB of q4_0 matrices: %v", p.bytes>>20, err)
	}
	p.free = free
	type job struct {
		Pack
		dst []byte
	}
	jobs := make(chan job, len(p.ps))
	for _, k := range p.ps {
		n := k.M.packBytes(k.Axpy)
		jobs <- job{k, buf[:n:n]}
		buf = buf[n:]
	}
	close(jobs)
	var wg sync.WaitGroup
	for range max(1, threads) {
		wg.Go(func() {
			for j := range jobs {
				if p.stop.Load() {
					continue
				}
				hugepage.Populate(j.dst)
				rows := j.M.pack(j.dst, j.Axpy)
				if release != nil {
					release(rows)
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(p.done)
	}()
	select {
	case <-p.done:
	case <-time.After(budget):
	}
	return p, nil
}

// Bytes is the size of the packed copies (0 for nil).
func (p *Packing) Bytes() int {
	if p == nil {
		return 0
	}
	return p.bytes
}

// Wait returns once every matrix is packed.
func (p *Packing) Wait() {
	if p != nil {
		<-p.done
	}
}

// Close stops the packing and frees the copies; the matrices go back to
// their rows.
func (p *Packing) Close() {
	if p == nil {
		return
	}
	p.stop.Store(true)
	<-p.done
	for _, k := range p.ps {
		k.M.copyFor(k.Axpy).Store(nil)
	}
	p.free()
}

// packBytes is the size of m's packed copy: its whole groups of eight
// rows, or for axpy all rows (their count a multiple of sixteen) in
// records of 256 columns (avx2.Q4AxpyBytes), if it is q4_0; 0 if it cannot
// be packed.
func (m *Matrix) packBytes(axpy bool) int {
	if m.Type != Q4_0 || m.Rows < 8 || axpy && m.Rows%16 != 0 {
		return 0
	}
	if axpy {
		return avx2.Q4AxpyBytes(m.Rows, m.Cols)
	}
	return m.Rows / 8 * 8 * m.rowBytes()
}

// pack makes dst (packBytes long; nil: made here) m's packed copy, then
// m's readers' (packed), and returns the rows it holds.
func (m *Matrix) pack(dst []byte, axpy bool) []byte {
	n := m.packBytes(axpy)
	if n == 0 {
		return nil
	}
	rows := m.Data[:m.Rows/8*8*m.rowBytes()]
	if dst == nil {
		dst = make([]byte, n)
	}
	if axpy {
		avx2.PackQ4AxpyInto(dst, rows, m.Cols)
	} else {
		avx2.PackQ4x8Into(dst, rows, m.Cols)
	}
	m.copyFor(axpy).Store(&dst)
	return rows
}

// packed is m's packed copy for mat-vecs or for axpy, nil until pack made
// it.
func (m *Matrix) packed(axpy bool) []byte {
	if p := m.copyFor(axpy).Load(); p != nil {
		return *p
	}
	return nil
}

func (m *Matrix) copyFor(axpy bool) *atomic.Pointer[[]byte] {
	if axpy {
		return &m.a8
	}
	return &m.p8
}

// packedRows sets out[t*ldo+r-off] to row r of m times token t of a, for
// rows r0..r1 that m's packed copy p8 holds, and returns the first row it
// left to the row kernels. Whole groups go to the packed kernel in one
// call; a group that the range cuts is computed whole into scratch and
// the wanted rows copied.
func packedRows(m *Matrix, p8 []byte, out []float32, ldo, off, r0, r1 int, a *avx2.Acts) int {
	gb := len(p8) / (m.Rows / 8)
	end := min(r1, m.Rows/8*8)
	if r0 >= end {
		return r0
	}
	cut := func(g int) {
		lo, hi := max(r0, 8*g), min(end, 8*g+8)
		s := packScratch.Get().(*[]float32)
		*s = growF(*s, 8*a.T)
		avx2.GatherQ4x8Acts(*s, 8, p8[g*gb:(g+1)*gb], a)
		for t := range a.T {
			copy(out[t*ldo+lo-off:t*ldo+hi-off], (*s)[8*t+lo-8*g:8*t+hi-8*g])
		}
		packScratch.Put(s)
	}
	g0, g1 := (r0+7)/8, end/8 // the whole groups
	if g0 > g1 {              // inside one group, off both its edges
		cut(r0 / 8)
		return end
	}
	if g1 > g0 {
		avx2.GatherQ4x8Acts(out[8*g0-off:], ldo, p8[g0*gb:g1*gb], a)
	}
	if r0%8 != 0 {
		cut(r0 / 8)
	}
	if end%8 != 0 {
		cut(end / 8)
	}
	return end
}

var packScratch = sync.Pool{New: func() any { return new([]float32) }}
