package engine

import (
	"fmt"

	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/sample"
)

// GenerateIDs runs a prompt given as token ids, for models without a
// tokenizer and for scripted checks against a reference, and samples up to
// opt.N tokens (stopping at EOS). opt.Prompt, OnText and TopLogits are not
// used; Result.Text is the decoded continuation.
func (m *Model) GenerateIDs(prompt []int, opt Options) (*Result, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("no prompt ids")
	}
	for _, id := range prompt {
		if id < 0 || id >= m.Prog.Vocab {
			return nil, fmt.Errorf("prompt id %d is outside the vocabulary of %d", id, m.Prog.Vocab)
		}
	}
	nctx := opt.Ctx
	if nctx <= 0 {
		nctx = min(max(m.ContextLength(), 1), 4096)
	}
	if len(prompt) >= nctx {
		return nil, fmt.Errorf("the prompt has %d tokens but the context is %d (raise -c)", len(prompt), nctx)
	}
	pool := opt.Pool
	if pool == nil {
		pool = ops.NewPool(opt.Threads)
		defer pool.Close()
	}
	sess := m.NewSession(nctx, pool)
	sess.SetPredictor(opt.Predictor)
	smp := sample.New(opt.Sample)
	for _, id := range prompt {
		smp.Accept(id)
	}
	res := &Result{PromptTokens: append([]int(nil), prompt...), Tokens: []int{}, StopReason: "length"}
	logits, err := sess.Forward(prompt, false)
	if err != nil {
		return nil, err
	}
	res.LastLogits = append([]float32(nil), logits.Data...)
	for n := 0; opt.N < 0 || n < opt.N; n++ {
		id := smp.Sample(logits.Data)
		if id == m.Tok.EOS() {
			res.StopReason = "eos"
			break
		}
		res.Tokens = append(res.Tokens, id)
		smp.Accept(id)
		if sess.Pos() >= nctx {
			res.StopReason = "context"
			break
		}
		if n == opt.N-1 {
			break
		}
		if logits, err = sess.Forward([]int{id}, false); err != nil {
			return nil, err
		}
	}
	res.Text = m.Tok.Decode(res.Tokens)
	return res, nil
}
