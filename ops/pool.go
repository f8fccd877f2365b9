package ops

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs coarse work (a whole mat-vec, a whole FFN) on a fixed set of
// goroutines. Hand-off is by channels, each side polling briefly (see
// spinFor) before it blocks: an unbounded spin that never yielded was
// measured to stall for milliseconds at the tail.
type Pool struct {
	threads int
	work    []chan piece // one per helper, so chunk k always lands on the same goroutine
	once    sync.Once
	done    sync.WaitGroup
	mu      sync.Mutex     // one Do at a time: they share wg and the fields below
	wg      sync.WaitGroup // the current Do's helpers
	busy    atomic.Int32   // how many of them are still running

	// The current Share: its job, range, piece count and next piece.
	sj     Job
	sn, sk int
	next   atomic.Int64
}

// A Job is work over [0,n) that Pool.Do splits into contiguous chunks.
// Passing a pointer to a reused struct keeps a call free of allocations,
// which a closure capturing its caller's variables is not.
type Job interface {
	Run(lo, hi int)
}

// funcJob adapts a function to Job; a func value fits in an interface
// without allocating.
type funcJob func(lo, hi int)

func (f funcJob) Run(lo, hi int) { f(lo, hi) }

type piece struct {
	j      Job // nil: take pieces of the current Share
	lo, hi int
}

// NewPool starts a pool of threads workers, counting the caller's goroutine
// as one; threads < 1 means runtime.GOMAXPROCS(0).
func NewPool(threads int) *Pool {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads}
	for i := 1; i < threads; i++ {
		c := make(chan piece, 1)
		p.work = append(p.work, c)
		p.done.Add(1)
		go p.worker(c)
	}
	return p
}

func (p *Pool) worker(c chan piece) {
	defer p.done.Done()
	for {
		t, ok := receive(c)
		if !ok {
			return
		}
		if t.j == nil {
			p.drain()
		} else {
			t.j.Run(t.lo, t.hi)
		}
		p.busy.Add(-1)
		p.wg.Done()
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
// Run on the same pool, and Run must not race with Close; concurrent Runs
// take turns.
func (p *Pool) Run(n int, f func(lo, hi int)) { p.Do(n, funcJob(f)) }

// Do is Run for a Job.
func (p *Pool) Do(n int, j Job) {
	if n <= 0 {
		return
	}
	k := min(p.Threads(), n)
	if k == 1 {
		j.Run(0, n)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wg.Add(k - 1)
	p.busy.Store(int32(k - 1))
	for i := 1; i < k; i++ {
		p.work[i-1] <- piece{j: j, lo: i * n / k, hi: (i + 1) * n / k}
	}
	j.Run(0, n/k)
	p.await()
}

// Share is Do with [0,n) cut into pieces (at least one per worker) that
// the workers take in turn as they become free, so that one that starts
// late (a helper's wake-up, a CPU taken by another process) does less of
// the work instead of holding up the rest. Pieces are contiguous and in
// order; j.Run may run several times on one goroutine.
func (p *Pool) Share(n, pieces int, j Job) {
	k := min(p.Threads(), n)
	if k <= 1 {
		if n > 0 {
			j.Run(0, n)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sj, p.sn, p.sk = j, n, min(n, max(pieces, k))
	p.next.Store(0)
	p.wg.Add(k - 1)
	p.busy.Store(int32(k - 1))
	for i := 1; i < k; i++ {
		p.work[i-1] <- piece{}
	}
	p.drain()
	p.await()
	p.sj = nil
}

func (p *Pool) drain() {
	for {
		c := int(p.next.Add(1) - 1)
		if c >= p.sk {
			return
		}
		p.sj.Run(c*p.sn/p.sk, (c+1)*p.sn/p.sk)
	}
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

// spinFor is how long a thread polls for what it waits on (a helper for
// its next piece, the caller for its helpers) before it blocks. Decode
// hands out work every few tens of microseconds, and waking a blocked
// thread costs about as much on a virtual machine, whose idle vCPU halts.
const spinFor = time.Millisecond

// poll calls ready until it reports true or spinFor has passed, and
// reports whether ready did. Every 256 calls it yields the processor, so
// that other goroutines (the GC's, a server's) still run; not more often:
// runtime.Gosched takes the scheduler's lock, and eight helpers yielding
// in a loop were measured to spend half the CPU time contending for it.
func poll(ready func() bool) bool {
	start := time.Now()
	for i := 1; ; i++ {
		if ready() {
			return true
		}
		if i&255 == 0 {
			if time.Since(start) > spinFor {
				return false
			}
			runtime.Gosched()
		}
	}
}

func receive(c chan piece) (t piece, ok bool) {
	if poll(func() bool {
		select {
		case t, ok = <-c:
			return true
		default:
			return false
		}
	}) {
		return t, ok
	}
	t, ok = <-c
	return t, ok
}

// await returns when the current Do's helpers are done.
func (p *Pool) await() {
	poll(func() bool { return p.busy.Load() == 0 })
	p.wg.Wait()
}
