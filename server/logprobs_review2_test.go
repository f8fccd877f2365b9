package server

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// lm-evaluation-harness's local-completions scores a continuation by
// sending context+continuation with echo, logprobs 1 and max_tokens 1 and
// summing token_logprobs[ctxlen:-1], where ctxlen counts the context's
// tokens in its own tokenization, which has no BOS (tok_encode's
// add_special_tokens is off; OpenAI's tokens have none). With a text
// prompt the echo must then be the text's tokens alone: token k of the
// client's tokenization at index k, the one generated token last. The
// tokenization and the per-position top tokens are reference.json's,
// from the HF tokenizer and PyTorch.
func TestLogprobsEchoHarnessAlignmentReview2(t *testing.T) {
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	var ref struct {
		BOS     int `json:"bos_id"`
		Prompts []struct {
			Text       string    `json:"text"`
			IDs        []int     `json:"ids"`
			Top5       [][]int   `json:"first_token_logits_top5"`
			LastLogits []float64 `json:"last_logits"`
			LastTop10  struct {
				IDs []int `json:"ids"`
			} `json:"last_top10"`
		} `json:"prompts"`
	}
	require.NoError(t, json.Unmarshal(b, &ref))
	tok := builtin(t).Tok
	_, url := start(t, Config{})
	for _, p := range ref.Prompts {
		require.Equal(t, ref.BOS, p.IDs[0])
		toks := p.IDs[1:] // the harness's tokens of the text: no BOS
		code, out := post(t, url+"/v1/completions", mustJSON(map[string]any{
			"prompt": p.Text, "echo": true, "logprobs": 5, "max_tokens": 1, "temperature": 0}))
		require.Equal(t, 200, code, out)
		l := asLegacy(t, choice0(t, out)["logprobs"])
		require.Len(t, l.Tokens, len(toks)+1, "%q: the text's tokens and the generated one: %q", p.Text, l.Tokens)
		for k, id := range toks {
			require.Equal(t, tokenString(tok, id), l.Tokens[k], "%q token %d", p.Text, k)
		}
		require.Nil(t, l.TokenLogprobs[0], "the first token: nothing before it in the text")
		// Token k (k >= 1) is predicted at position k of the sequence with
		// BOS, whose PyTorch top token is among the 5 given for it.
		for k := 1; k < len(toks) && k < len(p.Top5); k++ {
			require.Contains(t, l.TopLogprobs[k], tokenString(tok, p.Top5[k][0]), "%q token %d", p.Text, k)
		}
		// The generated token is the last position's greedy choice, with
		// PyTorch's log-softmax.
		last := len(toks)
		best := p.LastTop10.IDs[0]
		require.Equal(t, tokenString(tok, best), l.Tokens[last])
		mx, z := math.Inf(-1), 0.0
		for _, v := range p.LastLogits {
			mx = math.Max(mx, v)
		}
		for _, v := range p.LastLogits {
			z += math.Exp(v - mx)
		}
		require.InDelta(t, p.LastLogits[best]-mx-math.Log(z), *l.TokenLogprobs[last], 2e-3, "%q", p.Text)
		// The harness's slice with the context being all but the last
		// token of the text: exactly that last token.
		ctxlen := len(toks) - 1
		sl := l.TokenLogprobs[ctxlen : len(l.TokenLogprobs)-1]
		require.Len(t, sl, 1)
		require.Equal(t, tokenString(tok, toks[len(toks)-1]), l.Tokens[ctxlen])
	}

	// A prompt of ids is echoed as sent: BOS too when the client sent it
	// (the harness with add_bos_token counts it in ctxlen).
	p := ref.Prompts[0]
	code, out := post(t, url+"/v1/completions", mustJSON(map[string]any{
		"prompt": [][]int{p.IDs}, "echo": true, "logprobs": 1, "max_tokens": 1, "temperature": 0}))
	require.Equal(t, 200, code, out)
	l := asLegacy(t, choice0(t, out)["logprobs"])
	require.Len(t, l.Tokens, len(p.IDs)+1)
	require.Equal(t, tokenString(tok, ref.BOS), l.Tokens[0])
}
