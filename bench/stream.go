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
// split over the pool's threads: the ceiling decode speed is held against.
// A shared machine's bandwidth drifts by tens of percent within a minute, and
// by several within the seconds of one decode repetition, so bench reads a
// slice of the buffer after every decode step (step) and holds the
// repetition against those slices together: the same stretch of time.
type streamer struct {
	pool  *ops.Pool
	buf   []float32
	at    int // where the next slice starts
	close func()
}

// sliceFloats is one step's slice, 64 MB: twice a large L3, and a few
// milliseconds, small beside a decode step of a multi-GB model.
const sliceFloats = (64 << 20) / 4

func newStreamer(pool *ops.Pool) (*streamer, error) {
	// Huge pages, as the weights get (gguf maps them advised), so the bound
	// is not the weaker read of a buffer in 4 KB pages.
	buf, free, err := hugepage.Alloc[float32]((512<<20)/4, true)
	if err != nil {
		return nil, fmt.Errorf("bench: stream buffer: %w", err)
	}
	for i := range buf {
		buf[i] = float32(i & 7)
	}
	return &streamer{pool: pool, buf: buf, close: free}, nil
}

// measure returns the median of passes reads of the buffer, in GB/s.
func (s *streamer) measure(passes int) float64 {
	rates := make([]float64, 0, passes)
	for range passes {
		start := time.Now()
		s.pool.Run(len(s.buf), func(lo, hi int) { ops.Sum(s.buf[lo:hi]) })
		rates = append(rates, float64(4*len(s.buf))/time.Since(start).Seconds()/1e9)
	}
	return median(rates)
}

// step reads the buffer's next slice and returns its bytes and duration.
// Consecutive slices move through the buffer, so none finds the last one in
// cache.
func (s *streamer) step() (bytes int, d time.Duration) {
	n := min(sliceFloats, len(s.buf))
	if s.at+n > len(s.buf) {
		s.at = 0
	}
	part := s.buf[s.at : s.at+n]
	s.at += n
	start := time.Now()
	s.pool.Run(len(part), func(lo, hi int) { ops.Sum(part[lo:hi]) })
	return 4 * n, time.Since(start)
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
