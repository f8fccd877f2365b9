// Package bench measures prefill and decode speed the way llama-bench does,
// with dense and sparse runs in one process, their repetitions taking turns,
// so that their ratio holds on a noisy machine, and relates decode speed to
// the bytes of weights each token reads and to a streaming-read bandwidth
// measured next to each decode repetition.
package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
)

// Options of one bench run. As llama-bench takes lists for -p, -n, -d, -t
// and -ctk, every test runs at every depth, thread count and KV cache
// type: Prompts are the prefill tests and Gens the decode tests (a 0 is no
// test).
type Options struct {
	Prompts []int    // tokens of each prefill test
	Gens    []int    // tokens of each decode test
	PG      [][2]int // prompt and decode tokens of each combined test (llama-bench's -pg), timed together
	// Depths are how many tokens the context holds before each test
	// starts, prefilled untimed (llama-bench's -d): decode at depth reads
	// that many positions' keys and values per token besides the weights.
	// None: 0.
	Depths  []int
	Reps    int   // repetitions of each test
	Threads []int // CPU threads of each pass over the tests; none: all
	// KVTypes are the attention caches' element types to run every test
	// with (llama-bench's -ctk); none: the model's.
	KVTypes []ops.DType
	Modes   []string // "dense", "sparse", "split", "hybrid", or a predictor name
	// Device puts a mode's weights on the GPU before it is measured and
	// takes them off after (release); it says what it placed. split (the
	// llama.cpp layer split, run dense) and hybrid (hot neurons on the GPU,
	// the file's predictor) need it; other modes run on the CPU.
	Device func(mode string) (placed string, release func(), err error)
	// OpTimes: each line also says where its tokens' time went, op by op
	// (Result.Ops).
	OpTimes bool
	// Progress, if set, is told before each run of a test (the warm-ups
	// too, Runs in all) which mode, test and thread count it is.
	Progress func(what string)
}

// Runs is how many times Run will run a test, warm-ups included.
func (o *Options) Runs() int {
	return len(o.Modes) * max(len(o.KVTypes), 1) * max(len(o.Threads), 1) * max(len(o.Depths), 1) * len(tests(*o, 0)) * (o.reps() + 1)
}

// reps is Reps, or its default for 0.
func (o *Options) reps() int {
	if o.Reps <= 0 {
		return 5
	}
	return o.Reps
}

// Result is one line of the table.
type Result struct {
	Mode          string    `json:"mode"`
	Predictor     string    `json:"predictor"`
	Test          string    `json:"test"` // pp64, tg16, tg16 @ d512
	Threads       int       `json:"n_threads"`
	KVType        string    `json:"kv_type"` // the attention cache's element type: f32 or f16
	Prompt        int       `json:"n_prompt"`
	Gen           int       `json:"n_gen"`
	Depth         int       `json:"n_depth"`
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
	// BoundTPS is the decode speed that the stream figure allows at these
	// bytes per token: what no kernel can beat on this host.
	BoundTPS   float64 `json:"bound_ts,omitempty"`
	ActiveFrac float64 `json:"active_fraction,omitempty"` // mean over layers
	Placed     string  `json:"gpu,omitempty"`             // what the mode put on the GPU
	// Ops, with Options.OpTimes, are the timed tokens' ops, the slowest
	// first.
	Ops []OpTime `json:"op_times,omitempty"`
}

// OpTime is one op's part of a line's tokens.
type OpTime struct {
	Op    string  `json:"op"`
	Calls float64 `json:"calls_per_token"`
	Ms    float64 `json:"ms_per_token"`
	Share float64 `json:"share"` // of all the ops' time
	// Bytes are the weights the op reads per decoded token (as
	// BytesPerToken counts them), and GBPerSec at what rate: 0 for an op
	// that reads none, and for prefill.
	Bytes    float64 `json:"bytes_per_token,omitempty"`
	GBPerSec float64 `json:"gb_per_s,omitempty"`
}

// Report is the whole run: what is common to its lines, then the lines.
type Report struct {
	Head
	StreamGBps float64  `json:"stream_gb_per_s"` // median of the decode tests' stream figures at the most threads
	Results    []Result `json:"results"`
}

// Head is the model and host that every line of a report shares.
type Head struct {
	Model     string `json:"model"`
	SizeBytes int64  `json:"size_bytes"`
	Params    int64  `json:"params"`
	Backend   string `json:"backend"`
	Repacked  int64  `json:"repacked_bytes"` // q4_0 weights repacked at load (ops.PackAll)
	// HugePages is the part of the model file's resident bytes in 2 MB
	// pages after the run (-1: the kernel does not say): with small pages
	// every token's reads walk the page tables far more often.
	HugePages float64 `json:"huge_page_share"`
}

// Check refuses negative token counts, fewer than one thread, and fewer
// than one repetition (Run first makes a zero Reps its default), naming the
// flag of llama-bench's that sets each.
func (o *Options) Check() error {
	if o.Reps < 1 {
		return fmt.Errorf("bench: -r %d: want at least 1 repetition", o.Reps)
	}
	for _, l := range []struct {
		flag string
		v    []int
		min  int
	}{{"-p", o.Prompts, 0}, {"-n", o.Gens, 0}, {"-d", o.Depths, 0}, {"-t", o.Threads, 1}} {
		for _, v := range l.v {
			if v < l.min {
				return fmt.Errorf("bench: %s %d: want at least %d", l.flag, v, l.min)
			}
		}
	}
	for _, pg := range o.PG {
		if pg[0] < 1 || pg[1] < 1 {
			return fmt.Errorf("bench: --pg %d,%d: want a prompt and a decode of at least 1 token each", pg[0], pg[1])
		}
	}
	if len(tests(*o, 0)) == 0 {
		return fmt.Errorf("bench: -p %v -n %v and no --pg: nothing to measure", o.Prompts, o.Gens)
	}
	return nil
}

// Run measures m.
func Run(m *engine.Model, o Options) (*Report, error) {
	o.Reps = o.reps()
	if err := o.Check(); err != nil {
		return nil, err
	}
	threads, depths := o.Threads, o.Depths
	if len(threads) == 0 {
		threads = []int{0} // ops.NewPool's default: every CPU
	}
	if len(depths) == 0 {
		depths = []int{0}
	}
	rep := &Report{Head: Head{Model: m.File.Path, Backend: ops.Backend()}}
	kvs := o.KVTypes
	if len(kvs) == 0 {
		kvs = []ops.DType{m.KVType}
	}
	defer func(kv ops.DType) { m.KVType = kv }(m.KVType)
	// A KV cache past memory would kill the run in Go's allocator at its
	// first Forward, after minutes of other tests: refuse it first.
	for _, kv := range kvs {
		m.KVType = kv
		for _, d := range depths {
			for _, t := range tests(o, d) {
				if err := m.CheckContext(t.context(), 1); err != nil {
					what := t.name // at depth 0, a long -p or -n
					if d > 0 {
						what = fmt.Sprintf("-d %d", d)
					}
					return nil, fmt.Errorf("bench: %s: %v", what, err)
				}
			}
		}
	}
	for _, t := range m.File.Tensors {
		rep.SizeBytes += int64(t.Size)
		rep.Params += int64(t.Elems())
	}
	st, err := newStreamer()
	if err != nil {
		return nil, err
	}
	defer st.close()
	// every runs the tests at each KV type, thread count and depth for runs.
	every := func(runs []modeRun) ([][]Result, error) {
		out := make([][]Result, len(runs))
		measure := func(n int) error {
			pool := ops.NewPool(n)
			defer pool.Close()
			for _, d := range depths {
				rs, err := measureModes(m, pool, st, runs, tests(o, d), o)
				if err != nil {
					return err
				}
				for i := range rs {
					out[i] = append(out[i], rs[i]...)
				}
			}
			return nil
		}
		for _, kv := range kvs {
			m.KVType = kv
			for _, n := range threads {
				if err := measure(n); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	}
	// Modes that run on the CPU alone are measured together, a repetition
	// of each in turn, so that the host's drift over the run (its streaming
	// read moves by half within minutes) touches them alike. A GPU mode
	// holds its placement only while it is measured: those run one by one.
	results := make([][]Result, len(o.Modes))
	var host []modeRun
	var hostAt []int
	for i, mode := range o.Modes {
		pred, err := modePredictor(m, mode, o.Device != nil)
		if err != nil {
			return nil, err
		}
		if mode != "split" && mode != "hybrid" {
			host = append(host, modeRun{mode: mode, pred: pred})
			hostAt = append(hostAt, i)
			continue
		}
		placed, release, err := o.Device(mode)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %v", mode, err)
		}
		m.WaitPacked()
		rs, err := every([]modeRun{{mode: mode, placed: placed, pred: pred}})
		release()
		if err != nil {
			return nil, err
		}
		results[i] = rs[0]
	}
	// The repacking at load, and a dense predictor's (engine.PackDense),
	// done before any timing.
	m.WaitPacked()
	rep.Repacked = int64(m.Repacked())
	rs, err := every(host)
	if err != nil {
		return nil, err
	}
	for k, i := range hostAt {
		results[i] = rs[k]
	}
	for _, r := range results {
		rep.Results = append(rep.Results, r...)
	}
	rep.StreamGBps = streamAtMost(rep.Results)
	if rep.StreamGBps == 0 { // no decode test: measure once
		pool := ops.NewPool(slices.Max(threads))
		rep.StreamGBps = st.measure(pool, 5)
		pool.Close()
	}
	rep.HugePages = -1
	if frac, ok := m.File.HugePages(); ok {
		rep.HugePages = frac
	}
	return rep, nil
}

// streamAtMost is the median of the decode lines' stream figures at the
// most threads (0 if none has one).
func streamAtMost(rs []Result) float64 {
	most := 0
	for _, r := range rs {
		most = max(most, r.Threads)
	}
	var streams []float64
	for _, r := range rs {
		if r.StreamGBps > 0 && r.Threads == most {
			streams = append(streams, r.StreamGBps)
		}
	}
	return median(streams)
}

// A test is one line's work: a prompt of p tokens (g == 0), or g decode
// steps after a one-token prompt, or with whole a prompt of p tokens and g
// decode steps timed together, at a depth.
type test struct {
	p, g, depth int
	whole       bool
	name        string
}

// context is the positions the test's session holds.
func (t test) context() int { return t.depth + t.p + t.g + 1 }

// decode says whether the test times decode steps alone: the lines held
// against the stream and counted in bytes per token.
func (t test) decode() bool { return t.g > 0 && !t.whole }

// tests are the prefill tests, then the decode tests, at depth d.
func tests(o Options, d int) []test {
	var ts []test
	for _, p := range o.Prompts {
		if p > 0 {
			ts = append(ts, test{p: p, depth: d, name: fmt.Sprintf("pp%d", p) + at(d)})
		}
	}
	for _, g := range o.Gens {
		if g > 0 {
			ts = append(ts, test{p: 1, g: g, depth: d, name: fmt.Sprintf("tg%d", g) + at(d)})
		}
	}
	for _, pg := range o.PG {
		ts = append(ts, test{p: pg[0], g: pg[1], depth: d, whole: true, name: fmt.Sprintf("pp%d+tg%d", pg[0], pg[1]) + at(d)})
	}
	return ts
}

// A modeRun is one mode to measure: its predictor, and what it placed on
// the GPU.
type modeRun struct {
	mode, placed string
	pred         predictors.Predictor
}

// modePredictor is the predictor a mode runs: dense and split none, sparse
// and hybrid the file's, any other mode the predictor of that name.
func modePredictor(m *engine.Model, mode string, gpu bool) (predictors.Predictor, error) {
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
	if (mode == "split" || mode == "hybrid") && !gpu {
		return nil, fmt.Errorf("mode %s needs a GPU: give --vram-budget (in a CUDA build)", mode)
	}
	return pred, nil
}

// measureModes measures the runs' tests on pool, each test's o.Reps
// repetitions interleaved across the runs (after one warm-up of each).
func measureModes(m *engine.Model, pool *ops.Pool, st *streamer, runs []modeRun, ts []test, o Options) ([][]Result, error) {
	out := make([][]Result, len(runs))
	for _, t := range ts {
		samples := make([][]sample, len(runs))
		for rep := -1; rep < o.Reps; rep++ {
			for i, r := range runs {
				if o.Progress != nil {
					o.Progress(fmt.Sprintf("%s %s -t %d, KV %s", r.mode, t.name, pool.Threads(), m.KVType))
				}
				s, err := once(m, pool, st, r.pred, t, rep >= 0, o.OpTimes)
				if err != nil {
					return nil, err
				}
				if rep >= 0 { // the warm-up fills the page cache and buffers
					samples[i] = append(samples[i], s)
				}
			}
		}
		for i, r := range runs {
			res := summary(m, r.pred, samples[i], t.decode())
			res.Mode, res.Test, res.Depth, res.Placed = r.mode, t.name, t.depth, r.placed
			res.Threads, res.Prompt, res.Gen, res.KVType = pool.Threads(), t.p, t.g, m.KVType.String()
			if t.decode() {
				res.Prompt = 0 // llama-bench's tg lines have n_prompt 0
			}
			out[i] = append(out[i], *res)
		}
	}
	return out, nil
}

// A sample is one repetition: tokens per second of the prompt (g == 0) or
// of the decode steps; for decode the streaming read around it and the
// mean shares of neurons computed and of up and down rows read; where asked
// for, the timed tokens' ops.
type sample struct {
	tps, stream float64
	reads       Reads
	ops         []graph.OpTime
	tokens      int
}

// Reads are a sparse FFN's shares of neuron rows read per decoded token:
// the gate's (the predicted neurons) and the up and down projections',
// less the rows whose output was zero (the gate did not fire).
type Reads struct{ Gate, Up, Down float64 }

// meanReads is the mean of rs (zero for none).
func meanReads(rs []Reads) Reads {
	var m Reads
	n := float64(max(len(rs), 1))
	for _, r := range rs {
		m.Gate += r.Gate / n
		m.Up += r.Up / n
		m.Down += r.Down / n
	}
	return m
}

// once runs, after t.depth untimed tokens, a prompt of t.p tokens, then
// t.g decode steps, timing the decode (or with t.whole both); with
// bracket, a decode is held between two streaming reads; with timeOps, the
// timed tokens' op times are kept.
func once(m *engine.Model, pool *ops.Pool, st *streamer, pred predictors.Predictor, t test, bracket, timeOps bool) (sample, error) {
	var s sample
	depth, p, g := t.depth, t.p, t.g
	prompt := make([]int, depth+p)
	for i := range prompt {
		prompt[i] = (i*7919 + 13) % m.Prog.Vocab
	}
	bracket = bracket && t.decode()
	var before float64
	if bracket {
		before = st.measure(pool, 3)
	}
	sess := m.NewSession(t.context(), pool)
	sess.SetPredictor(pred)
	if depth == 0 && !t.decode() {
		// A session makes its KV caches on its first Forward (for a short
		// context 64 huge-page slices of a 7B, ~8% of a 64-token prompt's
		// time on a 2-core host). llama-bench, too, times a prompt on a
		// context made beforehand: one untimed token, then Reset, which
		// keeps the caches. (A decode test's prompt has made them.)
		if _, err := sess.Forward(prompt[:1], false); err != nil {
			return s, err
		}
		sess.Reset()
	}
	if depth > 0 {
		if _, err := sess.Forward(prompt[:depth], false); err != nil {
			return s, err
		}
		prompt = prompt[depth:]
	}
	var ot *graph.OpTimes
	if timeOps {
		ot = &graph.OpTimes{}
	}
	if !t.decode() {
		sess.Runner().OpTimes = ot
	}
	start := time.Now()
	logits, err := sess.Forward(prompt, false)
	if err != nil {
		return s, err
	}
	if g > 0 {
		sess.Runner().Stats = graph.NewStats(m.Prog)
		if t.decode() {
			sess.Runner().OpTimes = ot
			start = time.Now()
		}
		for i := 0; i < g; i++ {
			id := argmax(logits.Data)
			if logits, err = sess.Forward([]int{id}, false); err != nil {
				return s, err
			}
		}
	}
	el := time.Since(start).Seconds()
	n := p
	switch {
	case t.whole:
		n = p + g
	case g > 0:
		n = g
	}
	s.tps = float64(n) / el
	if ot != nil {
		s.ops, s.tokens = ot.Ops, n
	}
	if bracket {
		s.stream = (before + st.measure(pool, 3)) / 2
	}
	if g > 0 && len(m.Prog.Layers) > 0 {
		layers := make([]Reads, len(m.Prog.Layers))
		for k := range layers {
			l := &layers[k]
			l.Gate, l.Up, l.Down = sess.Runner().Stats.ReadFractions(m.Prog, k)
		}
		s.reads = meanReads(layers)
	}
	return s, nil
}

// summary makes a table line of a test's samples: speed, and for decode the
// bytes each token read, at what rate, and against the streaming reads.
func summary(m *engine.Model, pred predictors.Predictor, samples []sample, decode bool) *Result {
	r := &Result{Predictor: "dense"}
	if pred != nil {
		r.Predictor = pred.Name()
	}
	var streams []float64
	var reads []Reads
	for _, s := range samples {
		r.TokensPerSec = append(r.TokensPerSec, s.tps)
		if s.stream > 0 {
			streams = append(streams, s.stream)
		}
		if decode && len(m.Prog.Layers) > 0 {
			reads = append(reads, s.reads)
		}
	}
	r.Mean, r.SD, r.Median = summarize(r.TokensPerSec)
	if !decode {
		r.Ops = opTimes(samples, nil)
		return r
	}
	fracs := make([]Reads, len(m.Prog.Layers))
	for k := range fracs {
		fracs[k] = Reads{1, 1, 1}
	}
	if len(reads) > 0 {
		mr := meanReads(reads)
		r.ActiveFrac = mr.Gate
		for k := range fracs {
			fracs[k] = mr
		}
	}
	sparse := pred != nil && pred.Name() != "dense"
	r.BytesPerToken = BytesPerToken(m.Prog, fracs, sparse)
	r.Ops = opTimes(samples, BytesByOp(m.Prog, fracs, sparse))
	r.GBPerSec = r.BytesPerToken * r.Median / 1e9
	if len(streams) == len(samples) && len(streams) > 0 {
		ratios := make([]float64, len(streams))
		for i, s := range streams {
			ratios[i] = r.BytesPerToken * r.TokensPerSec[i] / 1e9 / s
		}
		r.StreamGBps, r.OfStream = median(streams), median(ratios)
		r.BoundTPS = r.StreamGBps * 1e9 / r.BytesPerToken
	}
	return r
}

// opTimes sums the samples' op times over their tokens, the slowest op
// first, with the rate of each op's weight reads where bytes (per token,
// by op) are given. None when the samples kept none.
func opTimes(samples []sample, bytes map[string]float64) []OpTime {
	var all graph.OpTimes
	var tokens int
	var total time.Duration
	for _, s := range samples {
		tokens += s.tokens
		for _, o := range s.ops {
			all.Add(o)
			total += o.Time
		}
	}
	var out []OpTime
	for _, o := range all.Ops {
		x := OpTime{Op: o.Op, Calls: float64(o.Calls) / float64(tokens), Ms: o.Time.Seconds() * 1e3 / float64(tokens)}
		if total > 0 {
			x.Share = o.Time.Seconds() / total.Seconds()
		}
		if b := bytes[o.Op]; b > 0 && x.Ms > 0 {
			x.Bytes, x.GBPerSec = b, b/(x.Ms/1e3)/1e9
		}
		out = append(out, x)
	}
	slices.SortStableFunc(out, func(a, b OpTime) int { return cmp.Compare(b.Ms, a.Ms) })
	return out
}

// BytesPerToken counts the weight bytes one decode step reads: every weight
// once (one row of an embedding table), except that a sparse FFN reads only
// the shares reads[layer] of its neuron rows, plus its predictor when one
// runs.
func BytesPerToken(p *graph.Program, reads []Reads, sparse bool) float64 {
	var total float64
	weightReads(p, reads, sparse, func(_ string, bytes float64) { total += bytes })
	return total
}

// BytesByOp is BytesPerToken op by op.
func BytesByOp(p *graph.Program, reads []Reads, sparse bool) map[string]float64 {
	by := map[string]float64{}
	weightReads(p, reads, sparse, func(op string, bytes float64) { by[op] += bytes })
	return by
}

// weightReads gives each weight's bytes read per decode step, as
// BytesPerToken counts them, to read with the op of the first node that
// reads it whole (a predictor's with graph.PredictorOp); an embedding's
// row goes to the embedding, and a table tied to the output is read whole
// there besides.
func weightReads(p *graph.Program, reads []Reads, sparse bool, read func(op string, bytes float64)) {
	seen := map[*ops.Weight]bool{}
	for _, n := range p.Nodes {
		for slot, w := range n.W {
			if w != nil && w.M != nil && n.Op.Name == "embedding" {
				read(n.Op.Name, float64(len(w.M.Data))/float64(w.M.Rows))
				continue
			}
			if w == nil || seen[w] {
				continue
			}
			seen[w] = true
			if w.M == nil {
				read(n.Op.Name, float64(4*len(w.Vec))) // norms, biases: held as f32
				continue
			}
			bytes, op := float64(len(w.M.Data)), n.Op.Name
			switch {
			case n.Op.Sparse:
				name := n.Op.Weights[slot].Name
				if name == "fc1" || name == "fc2" {
					op = graph.PredictorOp
					if !sparse {
						bytes = 0
					}
				} else if sparse && len(n.Layers) > 0 {
					f := reads[n.FirstLayer]
					switch name {
					case "up":
						bytes *= f.Up
					case "down":
						bytes *= f.Down
					default:
						bytes *= f.Gate
					}
				}
			}
			read(op, bytes)
		}
	}
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

// at names a test's context depth as llama-bench does: "tg16 @ d512".
func at(depth int) string {
	if depth == 0 {
		return ""
	}
	return fmt.Sprintf(" @ d%d", depth)
}
