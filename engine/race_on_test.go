//go:build race

package engine

// raceOn: the race detector's sync.Pool drops a quarter of what is put
// back, on purpose, so pooled buffers are made again and allocation counts
// say nothing under -race.
const raceOn = true
