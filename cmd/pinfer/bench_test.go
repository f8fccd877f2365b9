package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/pinfer/pinfer/bench"
)

// The closing ratios pair lines of the same test and threads (sparse
// against dense) or of the same threads and depth (a mode's prefill
// against its decode), and name them only when there is more than one
// pair to tell apart.
func TestBenchRatioLines(t *testing.T) {
	line := func(mode, test string, threads, gen, depth int, median float64) bench.Result {
		return bench.Result{Mode: mode, Test: test, Threads: threads, Gen: gen, Depth: depth, Median: median}
	}
	pg := func(mode string, median float64) bench.Result {
		return bench.Result{Mode: mode, Test: "pp64+tg16", Threads: 2, Prompt: 64, Gen: 16, Median: median}
	}
	one := []bench.Result{
		line("dense", "pp64", 2, 0, 0, 20), line("dense", "tg16", 2, 16, 0, 4),
		line("sparse", "pp64", 2, 0, 0, 30), line("sparse", "tg16", 2, 16, 0, 10),
		pg("dense", 7), pg("sparse", 11), // a --pg line is in no ratio
	}
	assert.Equal(t, []string{
		"sparse / dense decode (medians): 2.50x",
		"dense prefill / decode per token (medians): 5.00x",
		"sparse prefill / decode per token (medians): 3.00x",
	}, ratios(one))

	many := []bench.Result{
		line("dense", "tg16", 1, 16, 0, 2), line("dense", "tg16", 2, 16, 0, 4), line("dense", "tg16 @ d512", 2, 16, 512, 3),
		line("sparse", "tg16", 1, 16, 0, 3), line("sparse", "tg16", 2, 16, 0, 9), line("sparse", "tg16 @ d512", 2, 16, 512, 6),
		line("sparse", "pp64", 2, 0, 0, 36),
	}
	assert.Equal(t, []string{
		"sparse / dense decode (medians, tg16, 1 thread): 1.50x",
		"sparse / dense decode (medians, tg16, 2 threads): 2.25x",
		"sparse / dense decode (medians, tg16 @ d512, 2 threads): 2.00x",
		"sparse prefill / decode per token (medians, pp64 against tg16, 2 threads): 4.00x",
	}, ratios(many))

	kv := func(x bench.Result, t string) bench.Result { x.KVType = t; return x }
	kvs := []bench.Result{
		kv(line("dense", "tg16", 2, 16, 0, 4), "f32"), kv(line("dense", "tg16", 2, 16, 0, 5), "f16"),
		kv(line("sparse", "tg16", 2, 16, 0, 8), "f32"), kv(line("sparse", "tg16", 2, 16, 0, 15), "f16"),
	}
	assert.Equal(t, []string{
		"sparse / dense decode (medians, tg16, 2 threads, KV f32): 2.00x",
		"sparse / dense decode (medians, tg16, 2 threads, KV f16): 3.00x",
	}, ratios(kvs))
}
