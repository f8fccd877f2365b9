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
	budget, err := g.bytes()
	if err != nil || g.budget == 0 {
		return func() {}, err
	}
	if budget >= modelBytes(m) {
		if _, release, ok := allOnGPU(m, mf.predictor); ok {
			return release, nil
		}
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
	if _, release, ok := splitOnGPU(m, plan, mf.predictor); ok {
		return release, nil
	}
	_, release, err := useGPU(m, plan)
	return release, err
}

// modelBytes is the size of m's tensors.
func modelBytes(m *engine.Model) uint64 {
	var n uint64
	for _, t := range m.File.Tensors {
		n += t.Size
	}
	return n
}

// allOnGPU runs m wholly on the GPU when the budget holds the model: its
// program is swapped for the device executor's until release. ok is false
// (said on stderr) when the executor cannot run the model or the
// predictor; the hybrid path then serves.
func allOnGPU(m *engine.Model, predictor string) (*hybrid.DeviceExec, func(), bool) {
	pred, err := m.Predictor(predictor)
	if err != nil {
		return nil, nil, false // the run's own predictor load says why
	}
	mode := map[string]string{"mlp": "mlp", "dense": "dense", "oracle": "dense"}[pred.Name()]
	if mode == "" {
		fmt.Fprintf(os.Stderr, "pinfer: predictor %s runs on the CPU: the hybrid path serves\n", pred.Name())
		return nil, nil, false
	}
	e, err := hybrid.NewDeviceExec(m.Prog, hybrid.DeviceOptions{Predictor: mode, Log: os.Stderr})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pinfer: %v; the hybrid path serves\n", err)
		return nil, nil, false
	}
	return e, swapIn(m, e), true
}

// swapIn runs m on e until the returned release, which gives m its program
// back and frees the device.
func swapIn(m *engine.Model, e *hybrid.DeviceExec) func() {
	orig := m.Prog
	m.Prog, m.Host = e.Program(), orig
	return func() {
		m.Prog, m.Host = orig, nil
		if err := e.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "pinfer:", err)
		}
	}
}

// splitOnGPU runs m's decode step on the device executor under plan, the
// cold neurons and the mat-vecs plan leaves in CPU memory on the CPU
// between its graphs, when the predictor is the file's; ok false (said on
// stderr unless the predictor is why) leaves the per-op hybrid path.
func splitOnGPU(m *engine.Model, plan *placement.Plan, predictor string) (string, func(), bool) {
	pred, err := m.Predictor(predictor)
	if err != nil || pred.Name() != "mlp" {
		return "", nil, false
	}
	r, err := hybrid.Resident(m.Prog, plan)
	if err != nil {
		return "", nil, false
	}
	e, err := hybrid.NewDeviceExec(m.Prog, hybrid.DeviceOptions{Predictor: "mlp", Resident: r, Log: os.Stderr})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pinfer: %v; the per-op hybrid path serves\n", err)
		return "", nil, false
	}
	desc := placed(e.Bytes(), len(r.Dense), plan) + "; the step as CUDA graphs cut where the CPU works: cold neurons and the mat-vecs left in CPU memory"
	return desc, swapIn(m, e), true
}

// placed says what a placement put on the GPU.
func placed(bytes int64, dense int, plan *placement.Plan) string {
	neurons, total := 0, 0
	for _, l := range plan.Layers {
		neurons += len(l.GPU)
		total += l.NFF
	}
	return fmt.Sprintf("%.2f GiB on the GPU: %d dense matrices, %.0f%% of FFN neurons", float64(bytes)/(1<<30), dense, 100*float64(neurons)/float64(max(total, 1)))
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
	desc := placed(b.Bytes(), len(r.Dense), plan)
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
		if mode == "hybrid" && budget >= modelBytes(m) {
			if e, release, ok := allOnGPU(m, ""); ok {
				desc := fmt.Sprintf("all on the GPU (device executor): %.2f GiB, the decode step one CUDA graph of %d kernels, predictor on the GPU",
					float64(e.Bytes())/(1<<30), e.Kernels())
				return desc, func() {
					if tokens, active, err := e.SparseCounts(); err == nil && tokens > 0 && len(active) > 0 {
						var frac float64
						for k, a := range active {
							frac += float64(a) / float64(tokens) / float64(m.Prog.Layers[k].NFF)
						}
						fmt.Fprintf(os.Stderr, "hybrid (all on the GPU): %d steps, %.1f%% of FFN neurons computed on average\n", tokens, 100*frac/float64(len(active)))
					}
					release()
				}, nil
			}
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
		if mode == "hybrid" {
			if desc, release, ok := splitOnGPU(m, plan, mf.predictor); ok {
				return desc, release, nil
			}
		}
		return useGPU(m, plan)
	}
}
