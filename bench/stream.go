package bench

import (
	"sort"
	"time"

	"github.com/pinfer/pinfer/ops"
)

// StreamBandwidth measures how fast this machine streams memory with the
// engine's own fastest read kernel, on a buffer far larger than the caches,
// split over the pool's threads: the ceiling decode speed is held against.
// It returns the median of several passes, in GB/s.
func StreamBandwidth(pool *ops.Pool) float64 {
	const size = 512 << 20
	buf := make([]float32, size/4)
	for i := range buf {
		buf[i] = float32(i & 7)
	}
	var rates []float64
	for pass := 0; pass < 7; pass++ {
		start := time.Now()
		pool.Run(len(buf), func(lo, hi int) { ops.Sum(buf[lo:hi]) })
		rates = append(rates, float64(size)/time.Since(start).Seconds()/1e9)
	}
	sort.Float64s(rates)
	return rates[len(rates)/2]
}
