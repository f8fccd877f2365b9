//go:build pinfer_plugin

// Package topk keeps, in each layer, the K neurons with the highest MLP
// predictor scores. K is the layer's expected active count from its profile
// (with a margin) when there is one, else a fixed share of the neurons.
package topk

import (
	"math"

	"pinfer/host"
)

const (
	share  = 0.25 // of the neurons, without a profile
	margin = 1.25 // times the profiled active count
)

var keep = map[[2]int]int{} // K per FFN (layer, expert), for those with a predictor

// Init decides each layer's K once.
func Init(layers []host.Layer) {
	for _, l := range layers {
		if l.HasMLP() {
			keep[[2]int{l.Index, l.Expert}] = Budget(l)
		}
	}
}

// Predict computes the scores and picks natively.
func Predict(l host.Layer, in host.Input) []int32 {
	k, ok := keep[[2]int{l.Index, l.Expert}]
	if !ok {
		return nil // no predictor tensors (or a layer Init did not see): compute it all
	}
	return host.TopK(host.MLPScores(l, in), k)
}

// Budget is how many neurons to keep in l.
func Budget(l host.Layer) int {
	n := float64(l.NFF)
	if r := l.Rates(); r != nil {
		return int(math.Min(n, math.Ceil(margin*float64(host.Sum(r)))))
	}
	return int(math.Ceil(share * n))
}
