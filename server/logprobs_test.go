package server

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// logSoftmax64 is the reference: log-softmax in float64, written out
// independently of the server's.
func logSoftmax64(logits []float32) []float64 {
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	var z float64
	for _, l := range logits {
		z += math.Exp(float64(l) - mx)
	}
	out := make([]float64, len(logits))
	for i, l := range logits {
		out[i] = float64(l) - mx - math.Log(z)
	}
	return out
}

// refLogits is reference.json's PyTorch logits at each prompt's last position.
func refLogits(t *testing.T) [][]float32 {
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	var ref struct {
		Prompts []struct {
			LastLogits []float32 `json:"last_logits"`
		} `json:"prompts"`
	}
	require.NoError(t, json.Unmarshal(b, &ref))
	out := make([][]float32, len(ref.Prompts))
	for i, p := range ref.Prompts {
		out[i] = p.LastLogits
	}
	return out
}

// engineLogits runs ids through a session of the model with every
// position's logits, outside the server.
func engineLogits(t *testing.T, ids []int) [][]float32 {
	pool := ops.NewPool(2)
	defer pool.Close()
	sess := builtin(t).NewSession(len(ids)+8, pool)
	logits, err := sess.Forward(ids, true)
	require.NoError(t, err)
	out := make([][]float32, len(ids))
	for i := range ids {
		out[i] = append([]float32(nil), logits.Row(i)...)
	}
	return out
}

func choice0(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	return out["choices"].([]any)[0].(map[string]any)
}

// legacy is a decoded completions logprobs object.
type legacy struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

func asLegacy(t *testing.T, v any) legacy {
	t.Helper()
	require.NotNil(t, v, "no logprobs")
	var l legacy
	require.NoError(t, json.Unmarshal([]byte(mustJSON(v)), &l))
	n := len(l.Tokens)
	require.Len(t, l.TokenLogprobs, n)
	require.Len(t, l.TopLogprobs, n)
	require.Len(t, l.TextOffset, n)
	return l
}

func (l *legacy) append(m legacy) {
	l.Tokens = append(l.Tokens, m.Tokens...)
	l.TokenLogprobs = append(l.TokenLogprobs, m.TokenLogprobs...)
	l.TopLogprobs = append(l.TopLogprobs, m.TopLogprobs...)
	l.TextOffset = append(l.TextOffset, m.TextOffset...)
}

type chatLP struct {
	Token       string  `json:"token"`
	Logprob     float64 `json:"logprob"`
	Bytes       []int   `json:"bytes"`
	TopLogprobs []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	} `json:"top_logprobs"`
}

func asChat(t *testing.T, v any) []chatLP {
	t.Helper()
	require.NotNil(t, v, "no logprobs")
	var c struct {
		Content []chatLP `json:"content"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustJSON(v)), &c))
	require.NotNil(t, c.Content)
	return c.Content
}

func maxOf(m map[string]float64) float64 {
	best := math.Inf(-1)
	for _, v := range m {
		best = math.Max(best, v)
	}
	return best
}

// At the last prompt position the reported top 20 are the log-softmax of
// PyTorch's logits there, and the greedy token is PyTorch's.
func TestLogprobsMatchPyTorchAtLastPosition(t *testing.T) {
	ref := loadReference(t)
	logits := refLogits(t)
	_, url := start(t, Config{})
	tok := builtin(t).Tok
	for i, p := range ref.Prompts {
		want := logSoftmax64(logits[i])
		code, out := post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": p.IDs, "max_tokens": 1, "temperature": 0, "logprobs": 20}))
		require.Equal(t, 200, code, out)
		l := asLegacy(t, choice0(t, out)["logprobs"])
		require.Len(t, l.Tokens, 1)
		require.Equal(t, tokenString(tok, p.GreedyIDs[0]), l.Tokens[0])
		require.InDelta(t, want[p.GreedyIDs[0]], *l.TokenLogprobs[0], 1e-3)
		top := l.TopLogprobs[0]
		require.Len(t, top, 20) // the chosen token is among the 20
		order := make([]int, len(want))
		for k := range order {
			order[k] = k
		}
		sort.SliceStable(order, func(a, b int) bool { return want[order[a]] > want[order[b]] })
		// The 19 best: the 20th may tie with the 21st within the error.
		for _, id := range order[:19] {
			got, ok := top[tokenString(tok, id)]
			require.True(t, ok, "prompt %d: token %d (%q) not in top_logprobs", i, id, tok.Piece(id))
			require.InDelta(t, want[id], got, 1e-3, "prompt %d token %d", i, id)
		}
		require.InDelta(t, want[order[0]], maxOf(top), 1e-3)
	}
}

// Greedy tokens are the likeliest at their position: their logprob is the
// best of top_logprobs, in both shapes, and the tokens spell the text.
func TestLogprobsGreedyTokensAreTop(t *testing.T) {
	ref := loadReference(t)
	_, url := start(t, Config{})
	tok := builtin(t).Tok
	p := ref.Prompts[0]
	n := 20
	code, out := post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": p.Text, "max_tokens": n, "temperature": 0, "logprobs": 3}))
	require.Equal(t, 200, code, out)
	text := completionText(t, out)
	l := asLegacy(t, choice0(t, out)["logprobs"])
	require.Len(t, l.Tokens, n)
	require.Equal(t, text, strings.Join(l.Tokens, ""))
	for k := range n {
		require.Equal(t, tokenString(tok, p.GreedyIDs[k]), l.Tokens[k])
		require.GreaterOrEqual(t, len(l.TopLogprobs[k]), 3)
		require.Equal(t, maxOf(l.TopLogprobs[k]), *l.TokenLogprobs[k], "token %d", k)
		require.Equal(t, *l.TokenLogprobs[k], l.TopLogprobs[k][l.Tokens[k]])
		require.Less(t, *l.TokenLogprobs[k], 0.0)
	}
	// Offsets count characters from the start of the prompt.
	off := utf8.RuneCountInString(p.Text)
	for k := range n {
		require.Equal(t, off, l.TextOffset[k], "token %d", k)
		off += utf8.RuneCountInString(l.Tokens[k])
	}

	body := mustJSON(map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Speak, friend."}},
		"max_tokens": n, "temperature": 0, "logprobs": true, "top_logprobs": 5})
	code, out = post(t, url+"/v1/chat/completions", body)
	require.Equal(t, 200, code, out)
	content := asChat(t, choice0(t, out)["logprobs"])
	var joined strings.Builder
	for k, c := range content {
		joined.WriteString(c.Token)
		require.Len(t, c.TopLogprobs, 5)
		require.Equal(t, c.Token, c.TopLogprobs[0].Token, "token %d", k)
		require.Equal(t, c.Logprob, c.TopLogprobs[0].Logprob, "token %d", k)
		for j := 1; j < 5; j++ {
			require.LessOrEqual(t, c.TopLogprobs[j].Logprob, c.TopLogprobs[j-1].Logprob)
		}
		require.Equal(t, []byte(c.Token), bytesOf(c.Bytes))
	}
	require.Equal(t, completionText(t, out), joined.String())

	// logprobs without top_logprobs: the token's alone.
	code, out = post(t, url+"/v1/chat/completions", strings.Replace(body, `"top_logprobs":5`, `"top_logprobs":0`, 1))
	require.Equal(t, 200, code, out)
	for _, c := range asChat(t, choice0(t, out)["logprobs"]) {
		require.Empty(t, c.TopLogprobs)
	}
}

func bytesOf(b []int) []byte {
	out := make([]byte, len(b))
	for i, v := range b {
		out[i] = byte(v)
	}
	return out
}

// echo with max_tokens 0 scores the prompt, as lm-evaluation-harness asks:
// the first token null, each other the log-softmax of the model's logits
// one position before, as a run of the model with every position's
// logits gives them. A repeated request gets the same (no cache reuse).
func TestLogprobsEchoScoresPrompt(t *testing.T) {
	_, url := start(t, Config{})
	tok := builtin(t).Tok
	prompt := "ROMEO: But, soft! what light through yonder window breaks?"
	ids := builtin(t).Encode(prompt)
	rows := engineLogits(t, ids)
	for round := range 2 {
		code, out := post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": prompt, "echo": true, "logprobs": 1, "max_tokens": 0}))
		require.Equal(t, 200, code, out)
		require.Equal(t, prompt, completionText(t, out))
		ch := choice0(t, out)
		require.Equal(t, "length", ch["finish_reason"])
		u := out["usage"].(map[string]any)
		require.Equal(t, float64(len(ids)), u["prompt_tokens"])
		require.Equal(t, 0.0, u["completion_tokens"])
		require.Equal(t, 0.0, u["prompt_tokens_details"].(map[string]any)["cached_tokens"], "round %d", round)
		// The echo is the text's tokens, without the BOS the server put
		// before them (review2_test.go says why): token k is ids[k+1].
		l := asLegacy(t, ch["logprobs"])
		require.Len(t, l.Tokens, len(ids)-1)
		require.Nil(t, l.TokenLogprobs[0])
		require.Nil(t, l.TopLogprobs[0])
		for i := 1; i < len(ids); i++ {
			want := logSoftmax64(rows[i-1])
			k := i - 1
			require.Equal(t, tokenString(tok, ids[i]), l.Tokens[k])
			rs := []rune(prompt)
			if k == 0 {
				require.Equal(t, 0, l.TextOffset[0])
				continue
			}
			require.InDelta(t, want[ids[i]], *l.TokenLogprobs[k], 1e-4, "token %d", i)
			best := 0
			for k := range want {
				if want[k] > want[best] {
					best = k
				}
			}
			require.InDelta(t, want[best], maxOf(l.TopLogprobs[k]), 1e-4, "token %d", i)
			require.Contains(t, l.TopLogprobs[k], l.Tokens[k])
			// The offset indexes the echoed text.
			require.True(t, strings.HasPrefix(string(rs[l.TextOffset[k]:]), l.Tokens[k]),
				"token %d %q at %d", i, l.Tokens[k], l.TextOffset[k])
		}
	}

	// lm-evaluation-harness's newer request: one token generated after the
	// scored prompt, which continues the list, then a plain request that
	// reuses the slot's cache as before.
	code, out := post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": prompt, "echo": true, "logprobs": 1, "max_tokens": 1, "temperature": 0}))
	require.Equal(t, 200, code, out)
	l := asLegacy(t, choice0(t, out)["logprobs"])
	require.Len(t, l.Tokens, len(ids)-1+1)
	last := logSoftmax64(rows[len(ids)-1])
	best := math.Inf(-1)
	for _, v := range last {
		best = math.Max(best, v)
	}
	require.InDelta(t, best, *l.TokenLogprobs[len(ids)-1], 1e-4) // greedy: the likeliest
	require.True(t, strings.HasPrefix(completionText(t, out), prompt))
	code, out = post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": prompt, "max_tokens": 1}))
	require.Equal(t, 200, code, out)
	require.Equal(t, float64(len(ids)-1), out["usage"].(map[string]any)["prompt_tokens_details"].(map[string]any)["cached_tokens"])

	// echo without logprobs: the text alone, and the prompt by ids.
	code, out = post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": ids, "echo": true, "max_tokens": 0}))
	require.Equal(t, 200, code, out)
	require.Equal(t, tok.Decode(ids), completionText(t, out))
	require.Nil(t, choice0(t, out)["logprobs"])

	// lm-evaluation-harness's tokenized request: a batch of one list of
	// ids, scored as the text's.
	code, out = post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": [][]int{ids}, "echo": true, "logprobs": 1, "max_tokens": 0}))
	require.Equal(t, 200, code, out)
	l2 := asLegacy(t, choice0(t, out)["logprobs"])
	require.Len(t, l2.TokenLogprobs, len(ids))
	for i := 1; i < len(ids); i++ {
		require.InDelta(t, logSoftmax64(rows[i-1])[ids[i]], *l2.TokenLogprobs[i], 1e-4)
	}
	code, out = post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": [][]int{ids, ids}}))
	require.Equal(t, 400, code, out)

	// An empty prompt is BOS alone, which the server put there: no token
	// of the text to echo.
	code, out = post(t, url+"/v1/completions", `{"prompt":"","echo":true,"logprobs":1,"max_tokens":0}`)
	require.Equal(t, 200, code, out)
	require.Equal(t, "", completionText(t, out))
	l = asLegacy(t, choice0(t, out)["logprobs"])
	require.Empty(t, l.Tokens)
	require.Empty(t, l.TokenLogprobs)
	require.Empty(t, l.TextOffset)
	// BOS sent as an id is the client's, and echoed.
	code, out = post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": []int{tok.BOS()}, "echo": true, "logprobs": 1, "max_tokens": 0}))
	require.Equal(t, 200, code, out)
	l = asLegacy(t, choice0(t, out)["logprobs"])
	require.Equal(t, []string{tokenString(tok, tok.BOS())}, l.Tokens)
	require.Equal(t, []*float64{nil}, l.TokenLogprobs)
	require.Equal(t, []int{0}, l.TextOffset)
}

// A stream's chunks carry their tokens' logprobs, which join to the whole
// answer's; the same with echo, and for chat.
func TestLogprobsStreamEqualsWhole(t *testing.T) {
	_, url := start(t, Config{})
	cases := []struct{ ep, body string }{
		{"/v1/completions", `{"prompt":"JULIET:","max_tokens":24,"temperature":0,"logprobs":4`},
		{"/v1/completions", `{"prompt":"JULIET:","max_tokens":24,"temperature":0,"logprobs":2,"echo":true`},
		{"/v1/completions", `{"prompt":"JULIET:","max_tokens":24,"temperature":0,"logprobs":2,"stop":["doves"]`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Speak, friend."}],"max_tokens":24,"temperature":0,"logprobs":true,"top_logprobs":3`},
	}
	for _, c := range cases {
		code, whole := post(t, url+c.ep, c.body+`}`)
		require.Equal(t, 200, code, whole)
		text, events := streamText(t, context.Background(), url+c.ep, c.body+`,"stream":true}`)
		require.Equal(t, completionText(t, whole), text, c.body)
		if c.ep == "/v1/chat/completions" {
			var got []chatLP
			for _, ev := range events {
				if ch := ev["choices"].([]any); len(ch) > 0 && ch[0].(map[string]any)["logprobs"] != nil {
					got = append(got, asChat(t, ch[0].(map[string]any)["logprobs"])...)
				}
			}
			want := asChat(t, choice0(t, whole)["logprobs"])
			require.Len(t, got, len(want))
			for k := range want {
				require.Equal(t, want[k].Token, got[k].Token)
				require.Equal(t, want[k].Bytes, got[k].Bytes)
				require.InDelta(t, want[k].Logprob, got[k].Logprob, 1e-4)
				require.Len(t, got[k].TopLogprobs, len(want[k].TopLogprobs))
				for j, a := range want[k].TopLogprobs {
					require.Equal(t, a.Token, got[k].TopLogprobs[j].Token)
					require.InDelta(t, a.Logprob, got[k].TopLogprobs[j].Logprob, 1e-4)
				}
			}
			continue
		}
		var got legacy
		chunks := 0
		for _, ev := range events {
			if ch := ev["choices"].([]any); len(ch) > 0 && ch[0].(map[string]any)["logprobs"] != nil {
				got.append(asLegacy(t, ch[0].(map[string]any)["logprobs"]))
				chunks++
			}
		}
		require.Greater(t, chunks, 1)
		if strings.Contains(c.body, "stop") {
			// A token is reported when some of its text is in the answer:
			// " do" of " do"+"ves" is, up to its space.
			l := asLegacy(t, choice0(t, whole)["logprobs"])
			require.True(t, strings.HasSuffix(text, " than "), text)
			require.Equal(t, " do", l.Tokens[len(l.Tokens)-1])
		}
		requireLegacyClose(t, asLegacy(t, choice0(t, whole)["logprobs"]), got, c.body)
	}
}

// Requests decoded together in one batch get the logprobs each gets alone.
func TestLogprobsBatchedEqualAlone(t *testing.T) {
	ref := loadReference(t)
	_, url := start(t, Config{Slots: 4})
	body := func(i int) string {
		p := ref.Prompts[i%len(ref.Prompts)]
		return mustJSON(map[string]any{"prompt": p.Text, "max_tokens": 16, "temperature": 0, "logprobs": 3, "echo": i%2 == 1})
	}
	alone := make([]legacy, 8)
	for i := range alone {
		code, out := post(t, url+"/v1/completions", body(i))
		require.Equal(t, 200, code, out)
		alone[i] = asLegacy(t, choice0(t, out)["logprobs"])
	}
	got := make([]legacy, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, out := post(t, url+"/v1/completions", body(i))
			require.Equal(t, 200, code, out)
			got[i] = asLegacy(t, choice0(t, out)["logprobs"])
		}()
	}
	wg.Wait()
	for i := range got {
		requireLegacyClose(t, alone[i], got[i], "request %d", i)
	}
}

// requireLegacyClose compares two legacy logprobs: the tokens and offsets
// exactly, the values within 1e-4 (a prompt run whole or a token at a time
// sums in another order).
func requireLegacyClose(t *testing.T, want, got legacy, msg ...any) {
	t.Helper()
	require.Equal(t, want.Tokens, got.Tokens, msg...)
	require.Equal(t, want.TextOffset, got.TextOffset, msg...)
	for k, v := range want.TokenLogprobs {
		if v == nil {
			require.Nil(t, got.TokenLogprobs[k], msg...)
			require.Nil(t, got.TopLogprobs[k], msg...)
			continue
		}
		require.InDelta(t, *v, *got.TokenLogprobs[k], 1e-4, msg...)
		require.Len(t, got.TopLogprobs[k], len(want.TopLogprobs[k]), msg...)
		for tok, x := range want.TopLogprobs[k] {
			require.Contains(t, got.TopLogprobs[k], tok, msg...)
			require.InDelta(t, x, got.TopLogprobs[k][tok], 1e-4, msg...)
		}
	}
}

// Values out of range and fields on the wrong endpoint get a 400.
func TestLogprobsRefused(t *testing.T) {
	_, url := start(t, Config{})
	const (
		chat = "/v1/chat/completions"
		cmpl = "/v1/completions"
		msgs = `"messages":[{"role":"user","content":"hi"}],"max_tokens":2`
		prm  = `"prompt":"ROMEO:","max_tokens":2`
	)
	for _, c := range []struct{ path, fields, param, code, text string }{
		{cmpl, `"logprobs":21`, "logprobs", "invalid_value", "between 0 and 20"},
		{cmpl, `"logprobs":-1`, "logprobs", "invalid_value", "between 0 and 20"},
		{cmpl, `"logprobs":true`, "logprobs", "invalid_type", "integer"},
		{cmpl, `"top_logprobs":3`, "top_logprobs", "unsupported_value", "not supported"},
		{chat, `"logprobs":true,"top_logprobs":21`, "top_logprobs", "invalid_value", "between 0 and 20"},
		{chat, `"logprobs":true,"top_logprobs":-1`, "top_logprobs", "invalid_value", "between 0 and 20"},
		{chat, `"top_logprobs":2`, "top_logprobs", "invalid_value", "logprobs set to true"},
		{chat, `"logprobs":3`, "logprobs", "invalid_type", "boolean"},
		{chat, `"echo":true`, "echo", "unsupported_value", "not supported"},
		{cmpl, `"max_tokens":0`, "max_tokens", "invalid_value", "at least 1"},
		{cmpl, `"max_tokens":-1,"echo":true`, "max_tokens", "invalid_value", "at least 1"},
		{chat, `"max_tokens":0`, "max_tokens", "invalid_value", "at least 1"},
	} {
		base := map[string]string{chat: msgs, cmpl: prm}[c.path]
		body := "{" + base + "," + c.fields + "}"
		if strings.Contains(c.fields, "max_tokens") {
			body = "{" + strings.Replace(base, `,"max_tokens":2`, "", 1) + "," + c.fields + "}"
		}
		code, out := post(t, url+c.path, body)
		require.Equal(t, 400, code, "%s %s: %v", c.path, c.fields, out)
		e := out["error"].(map[string]any)
		require.Equal(t, c.param, e["param"], c.fields)
		require.Equal(t, c.code, e["code"], c.fields)
		require.Contains(t, e["message"], c.text, c.fields)
	}
}

// The log-softmax and the top-n selection against the reference, ties
// going to the lower id.
func TestLogprobOf(t *testing.T) {
	logits := []float32{1, 3, -2, 3, 0.5, -1e30, 2}
	want := logSoftmax64(logits)
	lp := logprobOf(logits, 4, 3)
	require.InDelta(t, want[4], lp.logprob, 1e-12)
	require.Len(t, lp.top, 3)
	for k, id := range []int{1, 3, 6} {
		require.Equal(t, id, lp.top[k].id)
		require.InDelta(t, want[id], lp.top[k].logprob, 1e-12)
	}
	require.Empty(t, logprobOf(logits, 0, 0).top)
	require.Equal(t, -9999.0, finite(math.Inf(-1)))
	require.Equal(t, -9999.0, finite(math.NaN()))
}
