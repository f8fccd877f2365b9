package ops

import (
	"fmt"
	"sort"
)

// Tensor is a batch of activation rows, one row per token.
type Tensor struct {
	Rows, Cols int
	Data       []float32
}

// Row returns row i.
func (t *Tensor) Row(i int) []float32 { return t.Data[i*t.Cols : (i+1)*t.Cols] }

// Weight is a model tensor bound to one weight slot of a node. A 1-D tensor
// is dequantized once to Vec; a 2-D one stays in its file encoding as M.
type Weight struct {
	Name string
	Dims []int // GGML order: Dims[0] is the row length
	M    *Matrix
	Vec  []float32
}

// AttrKind is the type of an operator attribute.
type AttrKind int

const (
	Int AttrKind = iota
	Float
	String
	Bool
)

func (k AttrKind) String() string { return [...]string{"integer", "number", "string", "boolean"}[k] }

// AttrSpec declares one attribute. A nil Default makes it required; Enum, if
// set, lists the allowed strings.
type AttrSpec struct {
	Name    string
	Kind    AttrKind
	Default any
	Enum    []string
}

// Attrs holds resolved attribute values: int, float64, string or bool.
type Attrs map[string]any

func (a Attrs) Int(k string) int       { return a[k].(int) }
func (a Attrs) Float(k string) float64 { return a[k].(float64) }
func (a Attrs) Str(k string) string    { return a[k].(string) }
func (a Attrs) Bool(k string) bool     { return a[k].(bool) }

// Slot is a named weight input of an operator.
type Slot struct {
	Name     string
	Optional bool
	Vector   bool // must be 1-D (norm scales, biases)
	// Whole: the op multiplies every row of the matrix by the same x, so a
	// layout made for whole mat-vecs may serve it (PackAll).
	Whole bool
	// Dense: without a predictor the op reads every row so, or, with Axpy,
	// adds up all the rows scaled (a sparse FFN's down_t): layouts made for
	// that may serve it in dense runs (engine's Model.PackDense).
	Dense, Axpy bool
}

// ShapeArgs is what a shape rule sees: input widths, bound weights (nil for
// an absent optional slot) and attributes.
type ShapeArgs struct {
	In []int
	W  []*Weight
	A  Attrs
}

// Ctx is what a kernel sees when it runs. The rows of a batch may belong to
// several sequences (continuous batching); Rows says, for each input row,
// where it stands in its own sequence.
type Ctx struct {
	In   []*Tensor
	Out  *Tensor
	W    []*Weight
	A    Attrs
	Rows []Row
	Pool *Pool
	// Predict, for a Sparse op, returns the neurons of FFN ffn (an index
	// into what the op's FFNs returned) to compute for row; nil means all.
	// It is nil itself when no predictor runs.
	Predict func(ffn, row int) []int32
	// OutRows, for a LastRows op, lists the input rows to compute, one per
	// output row; nil means every row.
	OutRows []int
	// Skipped, for a Sparse op, counts the predicted neurons' rows a decode
	// step did not read; nil: not counted.
	Skipped *Skipped
}

// Skipped counts the up and down rows of predicted neurons that one-token
// FFNs left unread, their output being zero (the gate did not fire, or the
// activation is 0). Updated atomically: the pool's pieces add to it.
type Skipped struct{ Up, Down int64 }

// Row is one input row's place in its sequence.
type Row struct {
	Pos   int   // position in the sequence
	NCtx  int   // the sequence's context length
	KV    DType // the element type of its KV cache: F32 or F16
	State *any  // kept across calls for this node and sequence (the KV cache)
}

// PosState is a Row.State made of values kept per position (attention's
// KV cache), which a saved session writes and reads back position by
// position (graph/state.go): one code path for every such state.
type PosState interface {
	// Planes lists its arrays, in a fixed order.
	Planes() []Plane
}

// Plane is one array of a PosState: Runs runs of NCtx rows of Width values,
// row p of run g at (g·NCtx+p)·Width, held in F32 or in F16 (the other
// nil). The rows of positions 0..n-1 of each run are a sequence of n
// positions' state.
type Plane struct {
	F32               []float32
	F16               []uint16
	Runs, Width, NCtx int
}

// HeldState is a Row.State kept where the host cannot read it (a GPU's KV
// caches) for the state nodes of the program its op stands in for
// (graph.Program.StateOf). A saved session reads it through host planes
// in those nodes' layout, so that either program restores the other's
// files.
type HeldState interface {
	// Download fills positions [0,n) of dst: per state node of the
	// source program, in order, the planes its PosState would have.
	Download(dst [][]Plane, n int) error
}

// Restored is the Row.State that a restored session leaves an op whose
// state is held elsewhere: positions [0,N) of each of the source
// program's state nodes, for the op to take up (upload) when it first
// runs, and to save again as they are until then.
type Restored struct {
	Planes [][]Plane
	N      int
}

// PosMajor copies positions [0,n) of pl into dst as n rows of Runs·Width
// values, run by run within a row: a device cache's layout, position
// first. SetPosMajor is its inverse.
func (pl Plane) PosMajor(dst []float32, n int) { pl.crossRows(dst, n, false) }

// SetPosMajor stores n position-major rows of src (PosMajor's layout) as
// positions [0,n) of pl.
func (pl Plane) SetPosMajor(src []float32, n int) { pl.crossRows(src, n, true) }

// crossRows walks positions [0,n) of pl beside their position-major rows
// in buf, copying into pl when in is set, else out of it.
func (pl Plane) crossRows(buf []float32, n int, in bool) {
	row, w := pl.Runs*pl.Width, pl.Width
	for p := range n {
		for g := range pl.Runs {
			at, b := (g*pl.NCtx+p)*w, buf[p*row+g*w:][:w]
			switch {
			case in && pl.F16 != nil:
				EncodeF16(pl.F16[at:at+w], b)
			case in:
				copy(pl.F32[at:at+w], b)
			case pl.F16 != nil:
				for i, h := range pl.F16[at : at+w] {
					b[i] = F16ToF32(h)
				}
			default:
				copy(b, pl.F32[at:at+w])
			}
		}
	}
}

// Op is one registered operator: its signature, shape rule and kernel.
type Op struct {
	Name    string
	Doc     string
	Inputs  int // number of activation inputs
	Weights []Slot
	Attrs   []AttrSpec
	// Shape returns the width of the output rows, or why the inputs do not fit.
	Shape func(s *ShapeArgs) (int, error)
	Run   func(c *Ctx) error
	// RunGroup, where set, runs several nodes of the op as one call: the
	// executor groups nodes that follow each other and read the same
	// inputs, none of them trimmed (OutRows). Their Ctxs share Rows, so a
	// grouped op keeps no Row.State.
	RunGroup func(cs []*Ctx) error
	// PosFloats, where set, is how many values a sequence's State keeps
	// for each position of its context (attention's k and v rows), from
	// the input widths: enough to size a context before any is made.
	PosFloats func(in []int, a Attrs) int
	// NewState, for an op that keeps Row.State, makes an empty one for a
	// sequence of r.NCtx positions of r.KV at the input widths in: what a
	// session restored from a file (graph.Session.LoadState) fills before
	// the op first runs, and finds again in Row.State then.
	NewState func(r Row, in []int, a Attrs) PosState
	// LastRows ops may be asked to compute only some rows (Ctx.OutRows): the
	// output projection needs only each sequence's last row in decode.
	LastRows bool
	// Sparse ops compute only the neurons a predictor chose (Ctx.Predict);
	// FFNs describes the FFNs inside such an op (one, or one per expert),
	// which is what a predictor sees.
	Sparse bool
	FFNs   func(w []*Weight, a Attrs) []FFN
}

// FFN is one feed-forward network inside a sparse op.
type FFN struct {
	Gate, Up  *Matrix   // neuron-major rows; Up is nil for a non-gated FFN
	GateBias  []float32 // nil if none
	FC1, FC2  *Matrix   // PowerInfer's predictor, if the file has one
	Act       string
	Threshold float32  // FATReLU's threshold
	PredCut   float32  // the predictor's score threshold
	Skipped   *Skipped // where a decode step counts the rows it skips; may be nil
}

var registry = map[string]*Op{}

// Register adds an op; a duplicate name is a programming error.
func Register(op *Op) {
	if _, dup := registry[op.Name]; dup {
		panic("ops: duplicate op " + op.Name)
	}
	registry[op.Name] = op
}

// Lookup finds a registered op.
func Lookup(name string) (*Op, bool) { op, ok := registry[name]; return op, ok }

// Names lists the registered ops in sorted order.
func Names() []string {
	var n []string
	for k := range registry {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func sameWidth(s *ShapeArgs) (int, error) {
	for i, w := range s.In[1:] {
		if w != s.In[0] {
			return 0, fmt.Errorf("input %d is %d wide but input 0 is %d wide", i+1, w, s.In[0])
		}
	}
	return s.In[0], nil
}

func vecFits(w *Weight, n int) error {
	if w != nil && len(w.Vec) != n {
		return fmt.Errorf("weight %s has %d elements but the input is %d wide", w.Name, len(w.Vec), n)
	}
	return nil
}
