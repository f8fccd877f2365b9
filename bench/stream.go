package bench

import (
	"fmt"
	"sort"
	"time"

	"github.com/pinfer/pinfer/internal/hugepage"
	"github.com/pinfer/pinfer/ops"
)

// A streamer measures how fast this machine streams memory with the
// engine's own fastest read kernel, on a buffer far larger than the caches,
// split over a pool's threads: the ceiling decode speed is held against.
// A shared machine's bandwidth drifts by tens of percent within a minute, so
// bench measures it next to every decode repetition rather than once.
type streamer struct {
	buf   []float32
	close func()
}

func newStreamer() (*streamer, error) {
	// Huge pages, as the weights get (gguf maps them advised), so the bound
	// is not the weaker read of a buffer in 4 KB pages.
	buf, free, err := hugepage.Alloc[float32]((512<<20)/4, true)
	if err != nil {
		return nil, fmt.Errorf("bench: stream buffer: %w", err)
	}
	for i := range buf {
		buf[i] = float32(i & 7)
	}
	return &streamer{buf: buf, close: free}, nil
}

// measure returns, in GB/s, the faster of two reads of the buffer on
// pool's threads, each the median of passes: every thread one run of its
// part (ops.Sum), and four runs of it side by side (ops.SumRuns), which a
// Zen 3 core streams 5-15% faster with its neighbour reading too (and a
// third faster alone). The ceiling is the best read found, not the first.
func (s *streamer) measure(pool *ops.Pool, passes int) float64 {
	best := 0.0
	for _, sum := range []func([]float32) float32{ops.Sum, ops.SumRuns} {
		rates := make([]float64, 0, passes)
		for range passes {
			start := time.Now()
			pool.Run(len(s.buf), func(lo, hi int) { sum(s.buf[lo:hi]) })
			rates = append(rates, float64(4*len(s.buf))/time.Since(start).Seconds()/1e9)
		}
		best = max(best, median(rates))
	}
	return best
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}
