package ops

import (
	"runtime"
	"sync"
)

// Pool runs coarse work (a whole mat-vec, a whole FFN) on a fixed set of
// goroutines. Hand-off blocks on channels: a spinning helper was measured to
// stall for milliseconds at the tail, which costs more than a wake-up.
type Pool struct {
	threads int
	work    []chan task // one per helper, so chunk k always lands on the same goroutine
	once    sync.Once
	done    sync.WaitGroup
}

type task struct {
	f      func(lo, hi int)
	lo, hi int
	wg     *sync.WaitGroup
}

// NewPool starts a pool of threads workers, counting the caller's goroutine
// as one; threads < 1 means runtime.GOMAXPROCS(0).
func NewPool(threads int) *Pool {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads}
	for i := 1; i < threads; i++ {
		c := make(chan task, 1)
		p.work = append(p.work, c)
		p.done.Add(1)
		go p.worker(c)
	}
	return p
}

func (p *Pool) worker(c chan task) {
	defer p.done.Done()
	for t := range c {
		t.f(t.lo, t.hi)
		t.wg.Done()
	}
}

// Threads is the number of chunks Run splits work into (1 for a nil Pool).
func (p *Pool) Threads() int {
	if p == nil {
		return 1
	}
	return p.threads
}

// Run calls f on contiguous chunks covering [0,n), one per worker, the first
// on the caller's goroutine, and returns when all are done. f must not call
// Run on the same pool, and Run must not race with Close.
func (p *Pool) Run(n int, f func(lo, hi int)) {
	if n <= 0 {
		return
	}
	k := min(p.Threads(), n)
	if k == 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	wg.Add(k - 1)
	for i := 1; i < k; i++ {
		p.work[i-1] <- task{f: f, lo: i * n / k, hi: (i + 1) * n / k, wg: &wg}
	}
	f(0, n/k)
	wg.Wait()
}

// Close stops the workers; later Runs execute inline. Safe to call twice.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		for _, c := range p.work {
			close(c)
		}
		p.done.Wait()
		p.threads = 1
	})
}
