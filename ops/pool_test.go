package ops

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPoolCoversRange(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		p := NewPool(threads)
		assert.Equal(t, threads, p.Threads())
		for _, n := range []int{0, 1, 2, 5, 100, 1001} {
			var mu sync.Mutex
			var chunks [][2]int
			hits := make([]int, n)
			p.Run(n, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					hits[i]++ // chunks are disjoint, so no two goroutines share an index
				}
				mu.Lock()
				chunks = append(chunks, [2]int{lo, hi})
				mu.Unlock()
			})
			for i, h := range hits {
				require.Equal(t, 1, h, "threads=%d n=%d index %d", threads, n, i)
			}
			if n == 0 {
				assert.Empty(t, chunks)
				continue
			}
			require.Len(t, chunks, min(threads, n), "threads=%d n=%d", threads, n)
			sort.Slice(chunks, func(i, j int) bool { return chunks[i][0] < chunks[j][0] })
			for i, c := range chunks {
				assert.Less(t, c[0], c[1], "empty chunk")
				if i > 0 {
					assert.Equal(t, chunks[i-1][1], c[0], "contiguous")
				}
				// Even split: sizes differ by at most one.
				assert.LessOrEqual(t, c[1]-c[0], n/len(chunks)+1)
			}
		}
		p.Close()
		p.Close()
		ran := 0
		p.Run(10, func(lo, hi int) { ran += hi - lo })
		assert.Equal(t, 10, ran, "Run after Close runs inline")
	}
}

func TestNilPool(t *testing.T) {
	var p *Pool
	assert.Equal(t, 1, p.Threads())
	var got [2]int
	p.Run(7, func(lo, hi int) { got = [2]int{lo, hi} })
	assert.Equal(t, [2]int{0, 7}, got)
	p.Close()
}

func TestPoolConcurrentRuns(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	var wg sync.WaitGroup
	sums := make([]int, 4)
	for g := range sums {
		wg.Go(func() {
			for range 200 {
				var mu sync.Mutex
				s := 0
				p.Run(30, func(lo, hi int) {
					mu.Lock()
					s += hi - lo
					mu.Unlock()
				})
				sums[g] += s
			}
		})
	}
	wg.Wait()
	for _, s := range sums {
		assert.Equal(t, 200*30, s)
	}
}

// Share covers the range once with contiguous pieces, whoever runs them,
// and lets a busy worker's pieces go to the others.
func TestPoolShare(t *testing.T) {
	for _, threads := range []int{1, 2, 3} {
		p := NewPool(threads)
		for _, n := range []int{0, 1, 2, 7, 100, 1001} {
			for _, pieces := range []int{0, 1, 4, 9, 5000} {
				var mu sync.Mutex
				var chunks [][2]int
				hits := make([]int, n)
				p.Share(n, pieces, funcJob(func(lo, hi int) {
					for i := lo; i < hi; i++ {
						hits[i]++
					}
					mu.Lock()
					chunks = append(chunks, [2]int{lo, hi})
					mu.Unlock()
				}))
				for i, h := range hits {
					require.Equal(t, 1, h, "threads=%d n=%d pieces=%d index %d", threads, n, pieces, i)
				}
				sort.Slice(chunks, func(i, j int) bool { return chunks[i][0] < chunks[j][0] })
				for i, c := range chunks {
					assert.Less(t, c[0], c[1], "empty piece")
					if i > 0 {
						assert.Equal(t, chunks[i-1][1], c[0], "contiguous")
					}
				}
				if n > 0 && threads > 1 {
					assert.Len(t, chunks, min(n, max(pieces, min(threads, n))))
				}
			}
		}
		p.Close()
	}
}

// Helpers poll for spinFor and then block: work handed out after a longer
// pause still reaches every helper, whichever side it finds them on.
func TestPoolWakesAfterPolling(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	for _, pause := range []time.Duration{0, spinFor / 2, 3 * spinFor} {
		time.Sleep(pause)
		var mu sync.Mutex
		var who []int
		p.Run(3, func(lo, hi int) {
			mu.Lock()
			who = append(who, lo)
			mu.Unlock()
		})
		sort.Ints(who)
		require.Equal(t, []int{0, 1, 2}, who, "after a pause of %v", pause)
	}
}
