//go:build !cuda

package main

import (
	"errors"
	"fmt"
	"math"

	"github.com/pinfer/pinfer/engine"
)

var errNoCUDA = errors.New("this pinfer was built without CUDA; see README 'Building for a GPU'")

// noGPU refuses the GPU flags: without a GPU backend a budget, or an index
// to reset or disable, would be ignored, and the run would silently be CPU
// only.
func noGPU(g *gpuFlags) error {
	switch {
	case g.budget > 0 && !math.IsInf(g.budget, 0):
		return fmt.Errorf("--vram-budget %g: %w", g.budget, errNoCUDA)
	case g.resetIndex:
		return fmt.Errorf("--reset-gpu-index: %w", errNoCUDA)
	case g.disableIndex:
		return fmt.Errorf("--disable-gpu-index: %w", errNoCUDA)
	}
	_, err := g.bytes() // a budget that is no size
	return err
}

// attachGPU refuses the GPU flags: this build has no GPU backend.
func attachGPU(m *engine.Model, mf *modelFlags, g *gpuFlags) (func(), error) {
	if err := noGPU(g); err != nil {
		return nil, err
	}
	return func() {}, nil
}

// benchGPU is bench's device hook; it refuses the GPU flags for any mode
// (bench asks it once before loading a model), and the GPU modes need a
// CUDA build.
func benchGPU(m *engine.Model, mf *modelFlags, g *gpuFlags) func(mode string) (string, func(), error) {
	return func(mode string) (string, func(), error) {
		if err := noGPU(g); err != nil {
			return "", nil, err
		}
		if mode == "split" || mode == "hybrid" {
			return "", nil, fmt.Errorf("mode %s: %w", mode, errNoCUDA)
		}
		return "", func() {}, nil
	}
}
