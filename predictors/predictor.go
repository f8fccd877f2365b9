// Package predictors decides, before an FFN runs, which of its neurons will
// fire. The executor asks the session's predictor once per layer and token;
// the sparse_ffn op then reads only the chosen neurons' weights.
package predictors

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pinfer/pinfer/ops"
)

// Layer is what a predictor may know about one FFN.
type Layer struct {
	Index      int // block index
	Expert     int // expert index inside a mixture of experts, else 0
	NEmbd, NFF int
	Gate, Up   *ops.Matrix // neuron-major; Up is nil for a non-gated FFN
	GateBias   []float32   // added to the gate pre-activation (OPT); nil if none
	FC1, FC2   *ops.Matrix // PowerInfer's predictor, if the file has one: relu(x·fc1)·fc2
	Act        string      // relu, fatrelu, drelu, silu, gelu
	Threshold  float32     // a neuron fires when gate > Threshold (FATReLU: > 0)
	PredCut    float32     // mlp scores at or below this are skipped (powerinfer.sparse_threshold)
	Rates      []float32   // per-neuron activation rate from a profile; nil if none
}

// NewLayer describes an op's FFN to predictors.
func NewLayer(block, expert int, f ops.FFN) *Layer {
	return &Layer{Index: block, Expert: expert, NEmbd: f.Gate.Cols, NFF: f.Gate.Rows, Gate: f.Gate, Up: f.Up,
		GateBias: f.GateBias, FC1: f.FC1, FC2: f.FC2, Act: f.Act, Threshold: f.Threshold, PredCut: f.PredCut}
}

// Input is one token's view of a layer.
type Input struct {
	Resid  []float32 // the residual stream before the FFN norm: the predictor's input
	Normed []float32 // the FFN's own input
	Pool   *ops.Pool
}

// Rows is a prefill's tokens at one layer: row t of Resid and Normed
// (T rows each) is token t's Input.
type Rows struct {
	Resid, Normed []float32
	T             int
	Pool          *ops.Pool
}

// Batch is a Predictor that also chooses for all tokens of a prefill at
// once, so that its mat-vecs become mat-mats. PredictRows sets dst[t] (the
// slice reused, grown to T) as Predict would for token t.
type Batch interface {
	PredictRows(l *Layer, in Rows, dst [][]int32) [][]int32
}

// Predictor chooses neurons. Predict appends the chosen ids to dst in
// ascending order and returns it; nil means every neuron, and an empty
// non-nil slice none.
type Predictor interface {
	Name() string
	Predict(l *Layer, in Input, dst []int32) []int32
}

// Factory makes a predictor for a model's layers; it may fail, for example
// when the file has no fc1/fc2 for mlp.
type Factory func(layers []*Layer) (Predictor, error)

var builtins = map[string]Factory{}

// Register adds a built-in predictor by name.
func Register(name string, f Factory) { builtins[name] = f }

// Names lists the built-in predictors.
func Names() []string {
	var n []string
	for k := range builtins {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// New makes the named built-in predictor. "static:RATE" is the static
// predictor with its floor set (NewStaticMinRate).
func New(name string, layers []*Layer) (Predictor, error) {
	if rest, ok := strings.CutPrefix(name, "static:"); ok {
		r, err := strconv.ParseFloat(rest, 64)
		if err != nil || !(r >= 0 && r <= 1) {
			return nil, fmt.Errorf("predictor %q: want static:RATE, RATE a firing rate in [0, 1] (static alone is static:%g)", name, DefaultMinRate)
		}
		return NewStaticMinRate(layers, float32(r))
	}
	f, ok := builtins[name]
	if !ok {
		return nil, fmt.Errorf("predictor %q: not a built-in (built-ins: %s; or give a plugin's .go file)", name, strings.Join(Names(), ", "))
	}
	return f(layers)
}

func init() {
	Register("dense", func([]*Layer) (Predictor, error) { return Dense{}, nil })
	Register("oracle", func([]*Layer) (Predictor, error) { return &Oracle{}, nil })
	Register("mlp", NewMLP)
	Register("static", NewStatic)
}

// Dense computes every neuron.
type Dense struct{}

func (Dense) Name() string                           { return "dense" }
func (Dense) Predict(*Layer, Input, []int32) []int32 { return nil }

// Oracle computes the real gate and keeps the neurons that fire: exact, and
// as costly as the gate itself. It serves tests and measurement.
type Oracle struct{ g []float32 }

func (*Oracle) Name() string { return "oracle" }

func (o *Oracle) Predict(l *Layer, in Input, dst []int32) []int32 {
	o.g = grow(o.g, l.NFF)
	return l.Fired(in.Pool, in.Normed, o.g, some(dst))
}

// GateScores writes into g (NFF long) the gate pre-activations of the FFN
// input x, bias included: what every oracle, label and truth is made from.
func (l *Layer) GateScores(pool *ops.Pool, x, g []float32) {
	ops.MatMul(pool, g, l.Gate, x, 1)
	if l.GateBias != nil {
		ops.Axpy(g, 1, l.GateBias)
	}
}

// Fired appends to dst the neurons whose gate fires for the FFN input x,
// ascending, using g (NFF long) as scratch.
func (l *Layer) Fired(pool *ops.Pool, x, g []float32, dst []int32) []int32 {
	l.GateScores(pool, x, g)
	for i, v := range g {
		if Fires(l, v) {
			dst = append(dst, int32(i))
		}
	}
	return dst
}

// MLPScores writes into s (NFF long) PowerInfer's predictor scores
// relu(fc1·resid)·fc2, using h (the rank long) for the hidden units.
func (l *Layer) MLPScores(pool *ops.Pool, resid, h, s []float32) {
	l.mlpScores(pool, resid, h, s, 1)
}

// mlpScores is MLPScores for T tokens (rows of resid, h and s).
func (l *Layer) mlpScores(pool *ops.Pool, resid, h, s []float32, T int) {
	ops.MatMul(pool, h, l.FC1, resid, T)
	ops.ReLU(h)
	ops.MatMul(pool, s, l.FC2, h, T)
}

// Fires reports whether a gate pre-activation v passes the layer's
// activation, which is what every label and oracle counts.
func Fires(l *Layer, v float32) bool {
	switch l.Act {
	case "relu", "drelu":
		return v > 0
	case "fatrelu":
		return v > l.Threshold
	}
	return true // silu and gelu never vanish
}

// MLP is PowerInfer's predictor: scores = relu(x·fc1)·fc2 on the residual,
// and neurons scoring above the file's sparse threshold are computed.
type MLP struct{ h, s []float32 }

// NewMLP checks that every sparse layer carries fc1 and fc2.
func NewMLP(layers []*Layer) (Predictor, error) {
	for _, l := range layers {
		if l.FC1 == nil {
			return nil, fmt.Errorf("predictor mlp: layer %d has no fc1/fc2 tensors (train them with 'pinfer predictor train')", l.Index)
		}
	}
	return &MLP{}, nil
}

func (*MLP) Name() string { return "mlp" }

func (m *MLP) Predict(l *Layer, in Input, dst []int32) []int32 {
	m.h = grow(m.h, l.FC1.Rows)
	m.s = grow(m.s, l.NFF)
	l.MLPScores(in.Pool, in.Resid, m.h, m.s)
	return ops.Above(some(dst), m.s, l.PredCut)
}

// PredictRows scores all of a prompt's tokens with two mat-mats.
func (m *MLP) PredictRows(l *Layer, in Rows, dst [][]int32) [][]int32 {
	T, nff := in.T, l.NFF
	m.h = grow(m.h, T*l.FC1.Rows)
	m.s = grow(m.s, T*nff)
	l.mlpScores(in.Pool, in.Resid, m.h, m.s, T)
	for len(dst) < T {
		dst = append(dst, nil)
	}
	// A 64-token prompt has 700 thousand scores per layer of the 7B file;
	// picking from them on one thread took 6% of its prefill.
	in.Pool.Run(T, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			dst[t] = ops.Above(some(dst[t][:0]), m.s[t*nff:(t+1)*nff], l.PredCut)
		}
	})
	return dst
}

// Static computes a fixed set per FFN, chosen once from a profile
// (--stats) and the same for every token: the neurons whose profiled
// firing rate is at least MinRate. "static" uses DefaultMinRate;
// "static:RATE" sets another floor. Layers and experts keep their own sets.
//
// It is a floor, not PowerInfer's hot set: it skips the neurons that fire
// for few tokens, so on text like the profile's it loses about the share
// of firings those neurons carry (the sum of their rates over the sum of
// all rates), and it computes the rest for every token whether they fire or
// not. PowerInfer's hot neurons (those that fire for most tokens, or the
// fewest covering 80% of the firings) decide placement ('pinfer place');
// which of the others run is left to a per-token predictor (mlp).
//
// How much it saves depends on how skewed the model's rates are. On the
// Shakespeare fixture they are flat: the rarest neuron of each layer fires
// for 3.2-12.7% of tokens (activation_stats.json), no neuron of layers 1-3
// fires for half of them, and 80% of the firings need 686-734 of the 1024
// neurons. So static keeps 1019-1024 neurons a layer (99.5-100%) and saves
// almost nothing; a floor that saves more costs what a fixed set cannot
// avoid: on heldout.txt's first 4096 tokens, static:0.1 keeps 89-100% for +11% perplexity,
// static:0.15 keeps 56-98% for +92%, static:0.2 keeps 25-91% for +299%.
// `pinfer predictor eval --predictor static` prints each layer's share
// (predicted) beside its recall.
type Static struct {
	MinRate float32
	sets    map[layerKey][]int32 // the experts of a mixture share a block index
}

// DefaultMinRate is the static predictor's floor: a neuron firing for
// fewer than 5% of the profiled tokens is skipped.
const DefaultMinRate = 0.05

// NewStatic is NewStaticMinRate at DefaultMinRate.
func NewStatic(layers []*Layer) (Predictor, error) {
	return NewStaticMinRate(layers, DefaultMinRate)
}

// NewStaticMinRate keeps, per FFN, the neurons whose rate is at least
// minRate (compared as float32, as the profile's rates are read). It needs
// every layer's rates, from a profile.
func NewStaticMinRate(layers []*Layer, minRate float32) (Predictor, error) {
	if !(minRate >= 0 && minRate <= 1) {
		return nil, fmt.Errorf("predictor static: minimum rate %v, want a firing rate in [0, 1]", minRate)
	}
	s := &Static{MinRate: minRate, sets: map[layerKey][]int32{}}
	for _, l := range layers {
		if l.Rates == nil {
			return nil, fmt.Errorf("predictor static: layer %d has no activation statistics (pass --stats from 'pinfer profile')", l.Index)
		}
		set := []int32{}
		for i, r := range l.Rates {
			if r >= s.MinRate {
				set = append(set, int32(i))
			}
		}
		s.sets[layerKey{l.Index, l.Expert}] = set
	}
	return s, nil
}

func (*Static) Name() string { return "static" }

func (s *Static) Predict(l *Layer, _ Input, dst []int32) []int32 {
	set, ok := s.sets[layerKey{l.Index, l.Expert}]
	if !ok {
		return nil // a layer without statistics runs dense
	}
	return append(some(dst), set...)
}

// some makes an empty choice a non-nil empty slice: the executor passes a
// nil dst on a row's first call and reads a nil result as every neuron, so
// appending nothing to it would turn "none" into "all".
func some(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}
