//go:build pinfer_plugin

// Package adaptive keeps the neurons whose MLP score clears a cut, and moves
// each layer's cut with the activations it has seen, so that recall holds at
// a target however good or bad the predictor is in that layer. A fixed cut
// (the mlp built-in's) gives whatever recall the predictor happens to
// reach. To see the truth it pays, on one token in every few of each layer,
// for the real active set (one full gate product, the oracle's cost), and
// takes a stochastic-approximation step: the cut goes down when recall fell
// short of the target and up when it overshot, settling where the expected
// recall equals the target.
package adaptive

import (
	"math"

	"pinfer/host"
)

const (
	target = 0.95 // recall to hold
	every  = 4    // learn on one token in every 4 of each layer
	rate   = 0.5  // step of the cut per unit of recall error
)

var (
	// per FFN (a layer's experts apart): its calls, and its cut in units
	// of the scores' RMS, which starts at 0 like mlp's
	calls = map[[2]int]int{}
	cut   = map[[2]int]float32{}
)

func Predict(l host.Layer, in host.Input) []int32 {
	if !l.HasMLP() {
		return nil
	}
	s := host.MLPScores(l, in)
	if rms := math.Sqrt(float64(host.Dot(s, s)) / float64(l.NFF)); rms > 0 {
		host.Scale(s, float32(1/rms))
	}
	k := [2]int{l.Index, l.Expert}
	c := cut[k]
	ids := host.Above(s, c)
	if calls[k]%every == 0 {
		r := host.Recall(ids, host.Fired(l, in))
		cut[k] = c - rate*(target-r)
	}
	calls[k]++
	return ids
}
