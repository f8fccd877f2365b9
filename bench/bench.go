// Package bench measures prefill and decode speed the way llama-bench does,
// with dense and sparse runs in one process so that their ratio holds on a
// noisy machine, and relates decode speed to the bytes of weights each token
// reads and to a streaming-read bandwidth measured next to each decode
// repetition.
package bench

import (
	"fmt"
	"math"
	"time"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
)

// Options of one bench run.
type Options struct {
	Prompt  int // tokens of the prefill test (0: skip)
	Gen     int // tokens of the decode test (0: skip)
	Reps    int // repetitions of each test
	Threads int
	Modes   []string // "dense", "sparse", "split", "hybrid", or a predictor name
	// Device puts a mode's weights on the GPU before it is measured and
	// takes them off after (release); it says what it placed. split (the
	// llama.cpp layer split, run dense) and hybrid (hot neurons on the GPU,
	// the file's predictor) need it; other modes run on the CPU.
	Device func(mode string) (placed string, release func(), err error)
}

// Result is one line of the table.
type Result struct {
	Mode          string    `json:"mode"`
	Predictor     string    `json:"predictor"`
	Test          string    `json:"test"` // pp64, tg16
	TokensPerSec  []float64 `json:"samples_ts"`
	Mean          float64   `json:"avg_ts"`
	SD            float64   `json:"stddev_ts"`
	Median        float64   `json:"median_ts"`
	BytesPerToken float64   `json:"bytes_per_token,omitempty"` // weights read per decoded token
	GBPerSec      float64   `json:"gb_per_s,omitempty"`        // implied by the median
	// StreamGBps is the median over decode repetitions of the streaming
	// read measured around each (the mean of one just before and one just
	// after), and OfStream the median of each repetition's weight reads per
	// second against its own figure.
	StreamGBps float64 `json:"stream_gb_per_s,omitempty"`
	OfStream   float64 `json:"of_stream,omitempty"`
	ActiveFrac float64 `json:"active_fraction,omitempty"` // mean over layers
	Placed     string  `json:"gpu,omitempty"`             // what the mode put on the GPU
}

// Report is the whole run.
type Report struct {
	Model      string  `json:"model"`
	SizeBytes  int64   `json:"size_bytes"`
	Params     int64   `json:"params"`
	Backend    string  `json:"backend"`
	Threads    int     `json:"threads"`
	StreamGBps float64 `json:"stream_gb_per_s"` // median of the decode tests' stream figures
	// HugePages is the part of the model file's resident bytes in 2 MB
	// pages after the run (-1: the kernel does not say): with small pages
	// every token's reads walk the page tables far more often.
	HugePages float64  `json:"huge_page_share"`
	Results   []Result `json:"results"`
}

// Run measures m.
func Run(m *engine.Model, o Options) (*Report, error) {
	if o.Reps <= 0 {
		o.Reps = 5
	}
	pool := ops.NewPool(o.Threads)
	defer pool.Close()
	rep := &Report{Model: m.File.Path, Backend: ops.Backend(), Threads: pool.Threads()}
	for _, t := range m.File.Tensors {
		rep.SizeBytes += int64(t.Size)
		rep.Params += int64(t.Elems())
	}
	st := newStreamer(pool)
	for _, mode := range o.Modes {
		name := mode
		switch mode {
		case "dense", "split":
			name = "dense"
		case "sparse", "hybrid":
			name = ""
		}
		pred, err := m.Predictor(name)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %v", mode, err)
		}
		if (mode == "sparse" || mode == "hybrid") && pred.Name() == "dense" {
			return nil, fmt.Errorf("mode %s: %s carries no predictor (fc1/fc2): train one with 'pinfer predictor train', or name one, e.g. --mode dense,oracle", mode, m.File.Path)
		}
		if (mode == "split" || mode == "hybrid") && o.Device == nil {
			return nil, fmt.Errorf("mode %s needs a GPU: give --vram-budget (in a CUDA build)", mode)
		}
		placed, release := "", func() {}
		if o.Device != nil {
			if placed, release, err = o.Device(mode); err != nil {
				return nil, fmt.Errorf("mode %s: %v", mode, err)
			}
		}
		err = runMode(rep, m, pool, st, pred, mode, placed, o)
		release()
		if err != nil {
			return nil, err
		}
	}
	var streams []float64
	for _, r := range rep.Results {
		if r.StreamGBps > 0 {
			streams = append(streams, r.StreamGBps)
		}
	}
	if len(streams) == 0 {
		streams = append(streams, st.measure(5)) // no decode test: measure once
	}
	rep.StreamGBps = median(streams)
	rep.HugePages = -1
	if frac, ok := m.File.HugePages(); ok {
		rep.HugePages = frac
	}
	return rep, nil
}

// runMode measures one mode's prefill and decode tests into rep.
func runMode(rep *Report, m *engine.Model, pool *ops.Pool, st *streamer, pred predictors.Predictor, mode, placed string, o Options) error {
	if o.Prompt > 0 {
		r, err := measure(m, pool, nil, pred, o.Prompt, 0, o.Reps)
		if err != nil {
			return err
		}
		r.Mode, r.Test, r.Placed = mode, fmt.Sprintf("pp%d", o.Prompt), placed
		rep.Results = append(rep.Results, *r)
	}
	if o.Gen > 0 {
		r, err := measure(m, pool, st, pred, 1, o.Gen, o.Reps)
		if err != nil {
			return err
		}
		r.Mode, r.Test, r.Placed = mode, fmt.Sprintf("tg%d", o.Gen), placed
		rep.Results = append(rep.Results, *r)
	}
	return nil
}

// measure runs a prompt of p tokens then g decode steps, reps times (after
// one warm-up), and reports tokens per second of the prompt (g == 0) or of
// the decode steps, the latter next to st's figure around each repetition.
func measure(m *engine.Model, pool *ops.Pool, st *streamer, pred predictors.Predictor, p, g, reps int) (*Result, error) {
	r := &Result{Predictor: "dense"}
	if pred != nil {
		r.Predictor = pred.Name()
	}
	prompt := make([]int, p)
	for i := range prompt {
		prompt[i] = (i*7919 + 13) % m.Prog.Vocab
	}
	var active, streams []float64
	bracket := st != nil && g > 0 // the stream read just before and after each repetition
	for rep := -1; rep < reps; rep++ {
		var before float64
		if bracket && rep >= 0 {
			before = st.measure(3)
		}
		sess := m.NewSession(p+g+1, pool)
		sess.SetPredictor(pred)
		start := time.Now()
		logits, err := sess.Forward(prompt, false)
		if err != nil {
			return nil, err
		}
		if g > 0 {
			sess.Runner().Stats = graph.Stats{Tokens: make([]int64, len(m.Prog.Layers)), Active: make([]int64, len(m.Prog.Layers))}
			start = time.Now()
			for i := 0; i < g; i++ {
				id := argmax(logits.Data)
				if logits, err = sess.Forward([]int{id}, false); err != nil {
					return nil, err
				}
			}
		}
		el := time.Since(start).Seconds()
		if rep < 0 {
			continue // warm-up: page cache, buffers
		}
		n := p
		if g > 0 {
			n = g
		}
		r.TokensPerSec = append(r.TokensPerSec, float64(n)/el)
		if bracket {
			streams = append(streams, (before+st.measure(3))/2)
		}
		if g > 0 {
			var sum float64
			for k := range m.Prog.Layers {
				sum += sess.Runner().Stats.ActiveFraction(m.Prog, k)
			}
			if len(m.Prog.Layers) > 0 {
				active = append(active, sum/float64(len(m.Prog.Layers)))
			}
		}
	}
	r.Mean, r.SD, r.Median = summarize(r.TokensPerSec)
	if g > 0 {
		fracs := make([]float64, len(m.Prog.Layers))
		for k := range fracs {
			fracs[k] = 1
		}
		if len(active) > 0 {
			r.ActiveFrac = mean(active)
			for k := range fracs {
				fracs[k] = r.ActiveFrac
			}
		}
		r.BytesPerToken = BytesPerToken(m.Prog, fracs, pred != nil && pred.Name() != "dense")
		r.GBPerSec = r.BytesPerToken * r.Median / 1e9
		if len(streams) > 0 {
			ratios := make([]float64, len(streams))
			for i, s := range streams {
				ratios[i] = r.BytesPerToken * r.TokensPerSec[i] / 1e9 / s
			}
			r.StreamGBps, r.OfStream = median(streams), median(ratios)
		}
	}
	return r, nil
}

// BytesPerToken counts the weight bytes one decode step reads: every weight
// once (one row of an embedding table), except that a sparse FFN reads only
// its active fraction of neuron rows, plus its predictor when one runs.
func BytesPerToken(p *graph.Program, active []float64, sparse bool) float64 {
	var total float64
	seen := map[*ops.Weight]bool{}
	for _, n := range p.Nodes {
		for slot, w := range n.W {
			if w == nil || seen[w] {
				continue
			}
			seen[w] = true
			if w.M == nil {
				total += float64(4 * len(w.Vec)) // norms, biases: held as f32
				continue
			}
			bytes := float64(len(w.M.Data))
			switch {
			case n.Op.Name == "embedding":
				bytes /= float64(w.M.Rows)
			case n.Op.Sparse:
				name := n.Op.Weights[slot].Name
				if name == "fc1" || name == "fc2" {
					if !sparse {
						bytes = 0
					}
				} else if sparse && len(n.Layers) > 0 {
					bytes *= active[n.FirstLayer]
				}
			}
			total += bytes
		}
	}
	return total
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

func summarize(x []float64) (mean_, sd, med float64) {
	mean_ = mean(x)
	for _, v := range x {
		sd += (v - mean_) * (v - mean_)
	}
	if len(x) > 1 {
		sd = math.Sqrt(sd / float64(len(x)-1))
	}
	return mean_, sd, median(x)
}

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(max(len(x), 1))
}
