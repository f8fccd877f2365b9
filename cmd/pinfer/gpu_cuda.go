//go:build cuda

package main

import (
	"fmt"
	"os"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/hybrid"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/ops/cuda"
	"github.com/pinfer/pinfer/placement"
)

// attachGPU puts the hybrid placement of m on GPU 0 as ops.Device when a
// budget is given; release takes it off.
func attachGPU(m *engine.Model, mf *modelFlags, g *gpuFlags) (func(), error) {
	if _, err := g.bytes(); err != nil || g.budget == 0 {
		return func() {}, err
	}
	pool := ops.NewPool(mf.threads)
	defer pool.Close()
	o, err := g.hybridOptions(mf, pool, true)
	if err != nil {
		return nil, err
	}
	plan, err := hybrid.Plan(m, o)
	if err != nil {
		return nil, err
	}
	_, release, err := useGPU(m, plan)
	return release, err
}

// useGPU uploads what plan puts on the GPU and makes it ops.Device.
func useGPU(m *engine.Model, plan *placement.Plan) (string, func(), error) {
	r, err := hybrid.Resident(m.Prog, plan)
	if err != nil {
		return "", nil, err
	}
	b, err := cuda.NewBackend(0, r)
	if err != nil {
		return "", nil, err
	}
	ops.Device = b
	neurons, total := 0, 0
	for _, l := range plan.Layers {
		neurons += len(l.GPU)
		total += l.NFF
	}
	desc := fmt.Sprintf("%.2f GiB on the GPU: %d dense matrices, %.0f%% of FFN neurons", float64(b.Bytes())/(1<<30), len(r.Dense), 100*float64(neurons)/float64(max(total, 1)))
	return desc, func() {
		ops.Device = nil
		if err := b.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "pinfer:", err)
		}
	}, nil
}

// benchGPU is bench's device hook: split and hybrid put their placement on
// the GPU for the time of their measurement; other modes run on the CPU.
func benchGPU(m *engine.Model, mf *modelFlags, g *gpuFlags) func(mode string) (string, func(), error) {
	return func(mode string) (string, func(), error) {
		var plan *placement.Plan
		budget, err := g.bytes()
		if err != nil {
			return "", nil, err
		}
		switch mode {
		case "split", "hybrid":
			if budget == 0 {
				return "", nil, fmt.Errorf("mode %s needs --vram-budget", mode)
			}
		default:
			return "", func() {}, nil
		}
		if mode == "split" {
			plan, err = hybrid.SplitPlan(m, budget)
		} else {
			pool := ops.NewPool(mf.threads)
			o, oerr := g.hybridOptions(mf, pool, true)
			if oerr != nil {
				pool.Close()
				return "", nil, oerr
			}
			plan, err = hybrid.Plan(m, o)
			pool.Close()
		}
		if err != nil {
			return "", nil, err
		}
		return useGPU(m, plan)
	}
}
