//go:build !cuda

package main

import (
	"errors"
	"fmt"

	"github.com/pinfer/pinfer/engine"
)

var errNoCUDA = errors.New("this pinfer was built without CUDA; see README 'Building for a GPU'")

// attachGPU refuses a budget: this build has no GPU backend.
func attachGPU(m *engine.Model, mf *modelFlags, g *gpuFlags) (func(), error) {
	if _, err := g.bytes(); err != nil {
		return nil, err
	}
	if g.budget > 0 {
		return nil, fmt.Errorf("--vram-budget %g: %w", g.budget, errNoCUDA)
	}
	return func() {}, nil
}

// benchGPU is bench's device hook; the GPU modes need a CUDA build.
func benchGPU(m *engine.Model, mf *modelFlags, g *gpuFlags) func(mode string) (string, func(), error) {
	return func(mode string) (string, func(), error) {
		if mode == "split" || mode == "hybrid" {
			return "", nil, fmt.Errorf("mode %s: %w", mode, errNoCUDA)
		}
		return "", func() {}, nil
	}
}
