//go:build pinfer_plugin

// Package mlp is PowerInfer's predictor written as a plugin: the neurons
// whose fc1/fc2 score passes the file's cut. It is the built-in mlp
// predictor's twin, so the two measure what running through yaegi costs.
package mlp

import "pinfer/host"

func Predict(l host.Layer, in host.Input) []int32 {
	if !l.HasMLP() {
		return nil
	}
	return host.Above(host.MLPScores(l, in), l.PredCut())
}
