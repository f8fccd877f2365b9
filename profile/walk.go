// Package profile records, over a calibration text, how often each FFN
// neuron fires, counted on the real gate; `place` and the static predictor
// read the result.
package profile

import (
	"fmt"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
)

// Walk runs tokens through the model in windows of nctx positions, each on
// a fresh sequence that starts with BOS,
// with predictor p (nil: dense) and observe as the sparse FFN hook. progress,
// if set, is told the tokens done so far and the total. It returns how many
// positions ran: every token once, plus one BOS per later window.
func Walk(m *engine.Model, tokens []int, nctx int, pool *ops.Pool, p predictors.Predictor,
	observe func(l *predictors.Layer, in predictors.Input, active []int32), progress func(done, total int)) (int, error) {
	if nctx < 2 {
		return 0, fmt.Errorf("a context of %d tokens is too small", nctx)
	}
	if len(tokens) == 0 {
		return 0, fmt.Errorf("the text has no tokens")
	}
	bos := m.Tok.BOS()
	sess := m.NewSession(nctx, pool)
	sess.SetPredictor(p)
	sess.Runner().Observe = observe
	ran := 0
	for i := 0; i < len(tokens); {
		win := tokens[i:min(i+nctx, len(tokens))]
		if win[0] != bos {
			// A window cut mid-text gets the start every sequence has.
			win = append([]int{bos}, tokens[i:min(i+nctx-1, len(tokens))]...)
			i--
		}
		i += len(win)
		if err := forward(sess, win); err != nil {
			return ran, err
		}
		ran += len(win)
		if progress != nil {
			progress(i, len(tokens))
		}
	}
	return ran, nil
}

func forward(sess *graph.Session, win []int) error {
	sess.Reset()
	_, err := sess.Forward(win, false)
	return err
}
