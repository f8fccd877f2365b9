package engine

import (
	"math"
	"slices"

	"github.com/pinfer/pinfer/graph"
)

// Embeddings, as llama.cpp's (llama-embedding, llama-server's) and
// ollama's give them: a text's embedding is the hidden state the output
// projection reads (the final norm's output, graph.Runner.Hidden), pooled
// over its positions by the mean, the last one or the first (llama.cpp's
// cls: the BOS for a decoder), then normalized as
// llama.cpp's embd_normalize says (2, the euclidean norm, by default).

// Pooling names the ways a sequence's hidden rows become one vector.
const (
	PoolingMean = "mean"
	PoolingLast = "last"
	PoolingCLS  = "cls"
	// PoolingNone keeps every token's row (llama-embedding's none): a
	// vector per token.
	PoolingNone = "none"
)

// Poolings lists them, for flags' checks and messages.
var Poolings = []string{PoolingMean, PoolingLast, PoolingCLS, PoolingNone}

// Embed runs ids from the start of sess (a session of HiddenProgram's
// program, r its runner) and returns their embedding: one vector, or with
// PoolingNone one for each token, each normalized.
func (m *Model) Embed(r *graph.Runner, sess *graph.Session, ids []int, pooling string, norm int) ([][]float32, error) {
	sess.Reset()
	hid, err := r.Hidden([]*graph.Session{sess}, [][]int{ids})
	if err != nil {
		return nil, err
	}
	if pooling != PoolingNone {
		return [][]float32{Normalize(Pool(hid.Rows, hid.Cols, hid.Data, pooling), norm)}, nil
	}
	vecs := make([][]float32, hid.Rows)
	for i := range vecs {
		vecs[i] = Normalize(slices.Clone(hid.Row(i)), norm)
	}
	return vecs, nil
}

// Pool makes one vector of a sequence's rows (rows × cols, row-major).
func Pool(rows, cols int, data []float32, how string) []float32 {
	switch how {
	case PoolingLast:
		return append([]float32(nil), data[(rows-1)*cols:rows*cols]...)
	case PoolingCLS:
		return append([]float32(nil), data[:cols]...)
	}
	sum := make([]float64, cols)
	for r := range rows {
		for c, x := range data[r*cols : (r+1)*cols] {
			sum[c] += float64(x)
		}
	}
	out := make([]float32, cols)
	for c, v := range sum {
		out[c] = float32(v / float64(rows))
	}
	return out
}

// Normalize scales v as llama.cpp's embd_normalize does: -1 leaves it,
// 0 scales the largest magnitude to 32760, 1 divides by the sum of
// magnitudes, 2 by the euclidean norm, p > 2 by the p-norm. A zero vector
// stays zero.
func Normalize(v []float32, norm int) []float32 {
	var d float64
	switch {
	case norm < 0:
		return v
	case norm == 0:
		for _, x := range v {
			d = math.Max(d, math.Abs(float64(x)))
		}
		d /= 32760
	default:
		p := float64(norm)
		for _, x := range v {
			d += math.Pow(math.Abs(float64(x)), p)
		}
		d = math.Pow(d, 1/p)
	}
	if d == 0 {
		return v
	}
	for i, x := range v {
		v[i] = float32(float64(x) / d)
	}
	return v
}
