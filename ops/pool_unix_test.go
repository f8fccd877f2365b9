//go:build unix

package ops

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Helpers that have polled for spinFor block: over a quiet stretch well
// past it, an idle pool of four uses a small fraction of one CPU.
func TestPoolIdleHelpersBlock(t *testing.T) {
	p := NewPool(4)
	defer p.Close()
	p.Run(4, func(lo, hi int) {})
	time.Sleep(2 * spinFor)
	start, cpu0 := time.Now(), processCPU(t)
	time.Sleep(50 * spinFor)
	used := processCPU(t) - cpu0
	assert.Less(t, used.Seconds(), 0.2*time.Since(start).Seconds(), "CPU used while idle")
}

func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
