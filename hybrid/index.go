package hybrid

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/placement"
	"github.com/pinfer/pinfer/predictors"
	"github.com/pinfer/pinfer/profile"
)

// Options say how the hybrid placement of a model is found, as PowerInfer's
// flags do.
type Options struct {
	Budget  uint64            // bytes of GPU memory for weights (--vram-budget)
	Stats   string            // activation profile; "" calibrates on a short run
	Profile *predictors.Stats // a profile already read; wins over Stats
	Disable bool              // --disable-gpu-index: dense parts only; no index read or written
	Reset   bool              // --reset-gpu-index: make the index again even if one is cached
	Pool    *ops.Pool         // for the calibration run
	Log     io.Writer         // what was decided, a line each; nil: silent
}

// CalibrationTokens is the length of the run that estimates activation
// rates when no profile is given.
const CalibrationTokens = 32

// Plan finds the hybrid placement of m: the cached <model>.generated.gpuidx
// when it was made for this budget, else a new one, which it caches.
func Plan(m *engine.Model, o Options) (*placement.Plan, error) {
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", a...)
		}
	}
	if o.Budget == 0 {
		plan := &placement.Plan{}
		for _, l := range neuronLayers(m.Prog) {
			plan.Layers = append(plan.Layers, placement.LayerPlan{Index: l.Index, NFF: l.NFF})
		}
		return plan, nil
	}
	if !o.Disable && !o.Reset {
		for _, path := range indexPaths(m.Path) {
			ix, err := placement.ReadIndex(path)
			if err != nil {
				continue
			}
			if ix.VRAMCapacity == o.Budget && fits(ix, m) {
				logf("gpu index: %s (made for %.2f GiB)", path, gib(ix.VRAMCapacity))
				return FromIndex(ix), nil
			}
		}
	}
	var st *predictors.Stats
	var err error
	switch {
	case len(neuronLayers(m.Prog)) == 0:
		// No FFN placed by neuron (none is sparse, or each is a mixture of
		// experts, placed whole): nothing for a profile to rank.
		st = &predictors.Stats{Model: m.Path}
	case o.Profile != nil:
		st = o.Profile
	case o.Stats != "":
		if st, err = predictors.ReadStats(o.Stats); err != nil {
			return nil, err
		}
	case o.Disable:
		st = uniform(m, 0) // no neuron has value: the budget goes to dense parts
	default:
		logf("gpu index: no --stats: activation rates from a %d-token calibration run (exact gate); give a profile for a better placement", CalibrationTokens)
		if st, err = Calibrate(m, o.Pool); err != nil {
			return nil, err
		}
	}
	pm, err := placement.FromGGUF(m.File, st)
	if err != nil {
		return nil, err
	}
	plan := placement.Place(pm, o.Budget, placement.Costs{})
	if o.Disable {
		plan = denseOnly(pm, plan)
	}
	neurons, total := 0, 0
	for _, l := range plan.Layers {
		neurons += len(l.GPU)
		total += l.NFF
	}
	logf("gpu placement: %.2f of %.2f GiB on the GPU: %d of %d dense parts, %d of %d FFN neurons",
		gib(plan.Used), gib(pm.Bytes()), len(plan.Dense), len(pm.Parts), neurons, total)
	if pm.CPU > 0 {
		logf("gpu placement: %.2f GiB of the experts' predictors stay on the CPU, which runs them", gib(pm.CPU))
	}
	if o.Disable {
		return plan, nil
	}
	path, err := writeIndex(m.Path, plan.Index())
	if err != nil {
		return nil, err
	}
	logf("gpu index: wrote %s", path)
	return plan, nil
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }

// fits tells whether ix covers every sparse layer of m at its size.
func fits(ix *placement.Index, m *engine.Model) bool {
	nff := map[int]int{}
	for _, l := range ix.Layers {
		nff[l.Index] = l.NFF
	}
	for _, l := range neuronLayers(m.Prog) {
		if nff[l.Index] != l.NFF {
			return false
		}
	}
	return true
}

// neuronLayers is the FFNs whose neurons placement places one by one: every
// sparse layer but a mixture's experts, which are placed whole.
func neuronLayers(p *graph.Program) []*predictors.Layer {
	var out []*predictors.Layer
	for _, n := range p.Nodes {
		if n.Op.Name != "moe" {
			out = append(out, n.Layers...)
		}
	}
	return out
}

// denseOnly keeps p's dense parts and drops its neurons.
func denseOnly(m *placement.Model, p *placement.Plan) *placement.Plan {
	size := map[string]uint64{}
	for _, pt := range m.Parts {
		size[pt.Name] = pt.Bytes
	}
	q := &placement.Plan{Budget: p.Budget, Dense: p.Dense}
	for _, d := range p.Dense {
		q.Used += size[d]
	}
	for _, l := range p.Layers {
		q.Layers = append(q.Layers, placement.LayerPlan{Index: l.Index, NFF: l.NFF})
	}
	return q
}

// uniform is a profile in which every neuron fires at rate r.
func uniform(m *engine.Model, r float32) *predictors.Stats {
	st := &predictors.Stats{Model: m.Path}
	for _, l := range neuronLayers(m.Prog) {
		f := make([]float32, l.NFF)
		for i := range f {
			f[i] = r
		}
		st.Layers = append(st.Layers, predictors.LayerStats{Layer: l.Index, Frequency: f})
	}
	return st
}

// Calibrate profiles a short run of fixed pseudo-random tokens: any text
// makes the hot neurons of a ReLU model stand out, and this needs none.
func Calibrate(m *engine.Model, pool *ops.Pool) (*predictors.Stats, error) {
	tokens := []int{m.Tok.BOS()}
	for i := 1; i < CalibrationTokens; i++ {
		tokens = append(tokens, (i*7919+13)%m.Prog.Vocab)
	}
	own := pool == nil
	if own {
		pool = ops.NewPool(0)
		defer pool.Close()
	}
	return profile.RunTokens(m, tokens, profile.Options{Ctx: CalibrationTokens, Pool: pool})
}

// indexPaths are where a model's generated index lives: beside it, or in
// the user's cache directory when the model's directory is not writable.
func indexPaths(model string) []string {
	paths := []string{model + ".generated.gpuidx"}
	if dir, err := os.UserCacheDir(); err == nil {
		abs, _ := filepath.Abs(model)
		sum := sha256.Sum256([]byte(abs))
		paths = append(paths, filepath.Join(dir, "pinfer", fmt.Sprintf("%x-%s.generated.gpuidx", sum[:6], filepath.Base(model))))
	}
	return paths
}

func writeIndex(model string, ix *placement.Index) (string, error) {
	paths := indexPaths(model)
	var first error
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			first = cmpErr(first, err)
			continue
		}
		err := placement.WriteIndex(p, ix)
		if err == nil {
			return p, nil
		}
		first = cmpErr(first, err)
	}
	return "", fmt.Errorf("%s: cannot cache the GPU index: %v", model, first)
}

func cmpErr(first, err error) error {
	if first == nil {
		return err
	}
	return first
}

// SplitPlan is Split for a loaded model: every neuron of a sparse FFN
// placed, or a dense model's FFNs as their blocks' parts.
func SplitPlan(m *engine.Model, budget uint64) (*placement.Plan, error) {
	pm, err := placement.FromGGUF(m.File, uniform(m, 1))
	if err != nil {
		return nil, err
	}
	return Split(pm, budget), nil
}
