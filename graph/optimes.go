package graph

import "time"

// OpTimes is where a Runner's Forward calls spent their time, op by op:
// the profile that says which part of a step to speed up next, as ggml's
// per-op perf counters do. A group of nodes run as one call (a layer's q,
// k and v) counts as one call of its op.
type OpTimes struct {
	Ops []OpTime // in the order first seen
	at  map[string]int
}

// PredictorOp names, in OpTimes, the time sparse ops spent in their
// predictor (one call a sparse node's run), which their own entry leaves
// out: a step's predictor and its FFN rows are priced apart.
const PredictorOp = "predictor"

// OpTime is one op's share of the calls.
type OpTime struct {
	Op    string
	Calls int
	Time  time.Duration
}

// Add counts o's calls and time under its op: a call's, from the Runner,
// or another OpTimes' totals merged in.
func (t *OpTimes) Add(o OpTime) {
	if t.at == nil {
		t.at = map[string]int{}
	}
	k, ok := t.at[o.Op]
	if !ok {
		k = len(t.Ops)
		t.at[o.Op] = k
		t.Ops = append(t.Ops, OpTime{Op: o.Op})
	}
	t.Ops[k].Calls += o.Calls
	t.Ops[k].Time += o.Time
}
