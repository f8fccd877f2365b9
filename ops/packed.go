package ops

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinfer/pinfer/internal/hugepage"
	"github.com/pinfer/pinfer/ops/avx2"
)

// Repacked q4_0 matrices. On AVX2 without AVX-512 the row kernels spend ~9
// operations a row and block, a third of them on scales; with eight rows
// interleaved (avx2.PackQ4x8) one broadcast of x serves all eight and a
// block's scales are one conversion, and a prompt's four tokens share each
// unpacked part. A matrix that the mat-mul reads whole (attention's q, k,
// v, o, the output) is packed once at load; its packed copy then serves
// every row of its whole groups of eight, so that the rows' own bytes are
// not read again and can leave memory. llama.cpp repacks q4_0 at load
// likewise; --no-repack turns it off here too.

// Repack lets PackAll pack.
var Repack = true

// Packing is PackAll's work, which may go on after it returns.
type Packing struct {
	ms    []*Matrix
	bytes int // of the copies
	free  func()
	stop  atomic.Bool
	done  chan struct{}
}

// PackAll packs the q4_0 matrices of ms that have eight rows or more, where
// that pays (AVX2 without AVX-512, the fast kernels on, Repack set), on up
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
func PackAll(ms []*Matrix, threads int, budget time.Duration, release func([]byte)) (*Packing, error) {
	if !Repack || !Fast || !avx2.PackPays() {
		return nil, nil
	}
	p := &Packing{done: make(chan struct{})}
	seen := map[*Matrix]bool{}
	for _, m := range ms {
		if n := m.packBytes(); n > 0 && m.packed() == nil && !seen[m] {
			seen[m] = true
			p.ms = append(p.ms, m)
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
		m   *Matrix
		dst []byte
	}
	jobs := make(chan job, len(p.ms))
	for _, m := range p.ms {
		n := m.packBytes()
		jobs <- job{m, buf[:n:n]}
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
				rows := j.m.pack(j.dst)
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
	for _, m := range p.ms {
		m.p8.Store(nil)
	}
	p.free()
}

// packBytes is the size of m's packed copy: its whole groups of eight
// rows, if it is q4_0; 0 if it cannot be packed.
func (m *Matrix) packBytes() int {
	if m.Type != Q4_0 || m.Rows < 8 {
		return 0
	}
	return m.Rows / 8 * 8 * m.rowBytes()
}

// pack makes dst (packBytes long; nil: made here) m's packed copy, then
// m's readers' (packed), and returns the rows it holds.
func (m *Matrix) pack(dst []byte) []byte {
	rows := m.Data[:m.packBytes()]
	if len(rows) == 0 {
		return nil
	}
	if dst == nil {
		dst = make([]byte, len(rows))
	}
	avx2.PackQ4x8Into(dst, rows, m.Cols)
	m.p8.Store(&dst)
	return rows
}

// packed is m's packed copy, nil until pack made it.
func (m *Matrix) packed() []byte {
	if p := m.p8.Load(); p != nil {
		return *p
	}
	return nil
}

// packedRows computes rows r0..r1 of part pt that its packed copy p8 holds,
// for the tokens of j.a, and returns the first row it left to the row
// kernels. Whole groups go to the packed kernel in one call; a group that
// the range cuts is computed whole into scratch and the wanted rows copied.
func (j *matJob) packedRows(pt matPart, p8 []byte, r0, r1 int) int {
	m := pt.m
	gb := len(p8) / (m.Rows / 8)
	end := min(r1, m.Rows/8*8)
	if r0 >= end {
		return r0
	}
	cut := func(g int) {
		lo, hi := max(r0, 8*g), min(end, 8*g+8)
		s := packScratch.Get().(*[]float32)
		*s = growF(*s, 8*j.T)
		avx2.GatherQ4x8Acts(*s, 8, p8[g*gb:(g+1)*gb], j.a)
		for t := range j.T {
			copy(pt.out[t*m.Rows+lo:t*m.Rows+hi], (*s)[8*t+lo-8*g:8*t+hi-8*g])
		}
		packScratch.Put(s)
	}
	g0, g1 := (r0+7)/8, end/8 // the whole groups
	if g0 > g1 {              // inside one group, off both its edges
		cut(r0 / 8)
		return end
	}
	if g1 > g0 {
		avx2.GatherQ4x8Acts(pt.out[8*g0:], m.Rows, p8[g0*gb:g1*gb], j.a)
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
