package server

import (
	"context"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ints reads a JSON array of numbers.
func ints(t *testing.T, v any) []int {
	t.Helper()
	arr, ok := v.([]any)
	require.True(t, ok, "not an array: %v", v)
	out := make([]int, len(arr))
	for i, x := range arr {
		out[i] = int(x.(float64))
	}
	return out
}

// nativeStream posts a streaming /completion and returns its events; the
// stream must end without "[DONE]", as llama-server's native one does.
func nativeStream(t *testing.T, url, body string) []map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), "POST", url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events, done := sseEvents(t, resp.Body)
	require.False(t, done, "llama-server's native stream has no [DONE]")
	require.NotEmpty(t, events)
	for i, ev := range events {
		require.Equal(t, i == len(events)-1, ev["stop"], "event %d: only the last has stop: true", i)
	}
	return events
}

// With token ids for the prompt (used as they are, without a BOS added)
// and temperature 0, /completion gives PyTorch's greedy continuation,
// and the text /v1/completions gives for the same request; a text prompt,
// the same text in a list, and a mixed prompt of BOS and the text get the
// same tokens, BOS being put before a prompt that starts with a text.
func TestNativeGreedyMatchesReference(t *testing.T) {
	ref := loadReference(t)
	_, url := start(t, Config{})
	tok := builtin(t).Tok
	for _, p := range ref.Prompts {
		n := len(p.GreedyIDs)
		code, out := post(t, url+"/completion", mustJSON(map[string]any{"prompt": p.IDs, "n_predict": n, "temperature": 0, "return_tokens": true}))
		require.Equal(t, 200, code, out)
		require.Equal(t, p.GreedyIDs, ints(t, out["tokens"]), "prompt %q", p.Text)
		require.Equal(t, p.GreedyText, strings.TrimPrefix(out["content"].(string), " "))
		code, oai := post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": p.IDs, "max_tokens": n, "temperature": 0}))
		require.Equal(t, 200, code, oai)
		require.Equal(t, completionText(t, oai), out["content"])

		require.Equal(t, true, out["stop"])
		require.Equal(t, "limit", out["stop_type"])
		require.Equal(t, "", out["stopping_word"])
		require.Equal(t, false, out["truncated"])
		require.Equal(t, float64(n), out["tokens_predicted"])
		require.Equal(t, float64(len(p.IDs)), out["tokens_evaluated"])
		require.Equal(t, float64(0), out["id_slot"])
		require.Equal(t, tok.Piece(p.IDs[0])+p.Text, out["prompt"], "the prompt with BOS written out")
		require.Equal(t, "shakespeare-relu-6m-f16", out["model"])
		require.Equal(t, strings.Contains(out["content"].(string), "\n"), out["has_new_line"])
		require.Nil(t, out["completion_probabilities"])
		tm := out["timings"].(map[string]any)
		require.Equal(t, float64(n), tm["predicted_n"])
		require.Equal(t, float64(len(p.IDs)), tm["prompt_n"].(float64)+tm["cache_n"].(float64))
		require.Equal(t, tm["cache_n"], out["tokens_cached"])
		for _, k := range []string{"prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_ms", "predicted_per_token_ms", "predicted_per_second"} {
			require.Greater(t, tm[k].(float64), 0.0, k)
		}
		gs := out["generation_settings"].(map[string]any)
		require.Equal(t, float64(n), gs["n_predict"])
		require.Equal(t, 0.0, gs["temperature"])
		require.Equal(t, float64(512), gs["n_ctx"])

		for _, prompt := range []any{p.Text, []any{p.Text}, []any{p.IDs[0], p.Text}, map[string]any{"prompt_string": p.Text}} {
			code, out := post(t, url+"/completions", mustJSON(map[string]any{"prompt": prompt, "n_predict": n, "temperature": 0, "return_tokens": true}))
			require.Equal(t, 200, code, out)
			require.Equal(t, p.GreedyIDs, ints(t, out["tokens"]), "prompt %v", prompt)
			require.Equal(t, float64(len(p.IDs)), out["tokens_evaluated"], "prompt %v", prompt)
		}
	}
}

// A stream's events carry the text and its tokens piece by piece, with
// stop: false; the last has stop: true, the summary and no text, and
// nothing follows it. The text is the whole answer's, the tokens the
// reference's.
func TestNativeStreamEqualsWhole(t *testing.T) {
	ref := loadReference(t)
	p := ref.Prompts[1]
	_, url := start(t, Config{})
	body := mustJSON(map[string]any{"prompt": p.IDs, "n_predict": len(p.GreedyIDs), "temperature": 0})
	code, whole := post(t, url+"/completion", body)
	require.Equal(t, 200, code, whole)
	require.Equal(t, []any{}, whole["tokens"], "tokens only with return_tokens")
	events := nativeStream(t, url+"/completion", strings.TrimSuffix(body, "}")+`,"stream":true}`)
	var text strings.Builder
	var ids []int
	for _, ev := range events[:len(events)-1] {
		text.WriteString(ev["content"].(string))
		ids = append(ids, ints(t, ev["tokens"])...)
		require.Equal(t, float64(len(ids)), ev["tokens_predicted"])
		require.Equal(t, float64(len(p.IDs)), ev["tokens_evaluated"])
		require.Nil(t, ev["completion_probabilities"])
	}
	require.Equal(t, whole["content"], text.String())
	require.Equal(t, p.GreedyIDs, ids)
	last := events[len(events)-1]
	require.Equal(t, "", last["content"])
	require.Equal(t, []any{}, last["tokens"])
	require.Equal(t, "limit", last["stop_type"])
	require.Equal(t, float64(len(p.GreedyIDs)), last["tokens_predicted"])
	require.NotNil(t, last["timings"])
	require.NotNil(t, last["generation_settings"])
	// The same prompt again: all of it but the last token is cached.
	require.Equal(t, float64(len(p.IDs)-1), last["tokens_cached"])
}

// n_probs gives each token's log-probability and the n likeliest at its
// position, in llama-server's shape: at the first step, the float64
// log-softmax of PyTorch's logits at the prompt's last position.
func TestNativeProbsMatchPyTorch(t *testing.T) {
	ref := loadReference(t)
	logits := refLogits(t)
	_, url := start(t, Config{})
	tok := builtin(t).Tok
	const k = 10
	for i, p := range ref.Prompts {
		want := logSoftmax64(logits[i])
		order := make([]int, len(want))
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool { return want[order[a]] > want[order[b]] })
		body := mustJSON(map[string]any{"prompt": p.IDs, "n_predict": 3, "temperature": 0, "n_probs": k})
		code, out := post(t, url+"/completion", body)
		require.Equal(t, 200, code, out)
		probs := out["completion_probabilities"].([]any)
		require.Len(t, probs, 3)
		events := nativeStream(t, url+"/completion", strings.TrimSuffix(body, "}")+`,"stream":true}`)
		var streamed []any
		for _, ev := range events[:len(events)-1] {
			streamed = append(streamed, ev["completion_probabilities"].([]any)...)
		}
		require.Nil(t, events[len(events)-1]["completion_probabilities"])
		// The stream's are the answer's (up to the rounding of a prompt
		// run in two parts, the second request's cache holding the first).
		require.Len(t, streamed, len(probs))
		for s := range probs {
			a, b := probs[s].(map[string]any), streamed[s].(map[string]any)
			require.Equal(t, a["id"], b["id"])
			require.InDelta(t, a["logprob"], b["logprob"], 1e-4)
			require.Len(t, b["top_logprobs"], k)
		}

		first := probs[0].(map[string]any)
		id := p.GreedyIDs[0]
		require.Equal(t, float64(id), first["id"])
		require.Equal(t, tok.Piece(id), first["token"])
		require.Len(t, first["bytes"], len(tok.Piece(id)))
		require.InDelta(t, want[id], first["logprob"], 1e-3)
		top := first["top_logprobs"].([]any)
		require.Len(t, top, k)
		// The k-1 best (the k-th may tie with the next within the error).
		for r, wantID := range order[:k-1] {
			e := top[r].(map[string]any)
			require.Equal(t, float64(wantID), e["id"], "prompt %d rank %d", i, r)
			require.Equal(t, tok.Piece(wantID), e["token"])
			require.InDelta(t, want[wantID], e["logprob"], 1e-3, "prompt %d token %d", i, wantID)
		}
		// Greedy: each step's token is its own best.
		for s, pr := range probs {
			e := pr.(map[string]any)
			require.Equal(t, float64(p.GreedyIDs[s]), e["id"])
			require.Equal(t, e["id"], e["top_logprobs"].([]any)[0].(map[string]any)["id"])
		}
	}
}

// Generation stops before the first stop string, whichever of many
// (llama-server takes any number), says stop_type "word" and which one.
func TestNativeStopWords(t *testing.T) {
	ref := loadReference(t)
	p := ref.Prompts[0]
	_, url := start(t, Config{})
	full := p.GreedyText
	stop := "model of"
	cut := strings.Index(full, stop)
	require.Greater(t, cut, 0)
	later := full[cut+len(stop) : cut+len(stop)+6]
	require.NotContains(t, full[:cut+len(stop)], later)
	stops := []string{"zzz", later, "qqq", stop, "xyzzy", "", "\x00"}
	body := mustJSON(map[string]any{"prompt": p.Text, "n_predict": len(p.GreedyIDs), "temperature": 0, "stop": stops})
	code, out := post(t, url+"/completion", body)
	require.Equal(t, 200, code, out)
	require.Equal(t, full[:cut], out["content"])
	require.Equal(t, "word", out["stop_type"])
	require.Equal(t, stop, out["stopping_word"])
	require.Equal(t, false, out["truncated"])
	events := nativeStream(t, url+"/completion", strings.TrimSuffix(body, "}")+`,"stream":true}`)
	var text strings.Builder
	for _, ev := range events {
		text.WriteString(ev["content"].(string))
	}
	require.Equal(t, full[:cut], text.String())
	require.Equal(t, "word", events[len(events)-1]["stop_type"])
	require.Equal(t, stop, events[len(events)-1]["stopping_word"])
}

// n_predict: a limit (stop_type "limit"), 0 the prompt alone, -1 until the
// context is full (stop_type "limit", truncated), as are the default and a
// limit past the context; a negative temperature is greedy, as llama.cpp's.
func TestNativeNPredict(t *testing.T) {
	ref := loadReference(t)
	p := ref.Prompts[0]
	_, url := start(t, Config{Ctx: 64})
	code, out := post(t, url+"/completion", mustJSON(map[string]any{"prompt": p.IDs, "n_predict": 5, "temperature": -1, "return_tokens": true}))
	require.Equal(t, 200, code, out)
	require.Equal(t, p.GreedyIDs[:5], ints(t, out["tokens"]))
	require.Equal(t, "limit", out["stop_type"])
	require.Equal(t, false, out["truncated"])

	code, out = post(t, url+"/completion", mustJSON(map[string]any{"prompt": p.IDs, "n_predict": 0}))
	require.Equal(t, 200, code, out)
	require.Equal(t, "", out["content"])
	require.Equal(t, float64(0), out["tokens_predicted"])
	require.Equal(t, "limit", out["stop_type"])

	most := 64 - len(p.IDs) + 1 // the last token is sampled from the last position
	for _, np := range []any{-1, nil, 1000} {
		body := map[string]any{"prompt": p.IDs, "temperature": 0, "return_tokens": true}
		if np != nil {
			body["n_predict"] = np
		}
		code, out := post(t, url+"/completion", mustJSON(body))
		require.Equal(t, 200, code, out)
		require.Equal(t, "limit", out["stop_type"], "n_predict %v", np)
		require.Equal(t, true, out["truncated"], "n_predict %v", np)
		require.Equal(t, float64(most), out["tokens_predicted"])
		require.Equal(t, p.GreedyIDs[:most], ints(t, out["tokens"]))
		if np == nil {
			gs := out["generation_settings"].(map[string]any)
			require.Equal(t, float64(-1), gs["n_predict"])
		}
	}
}

// Defaults are llama-server's: temperature 0.8, top_k 40, top_p 0.95,
// min_p 0.05, repeat_penalty 1, repeat_last_n 64, n_predict -1.
func TestNativeDefaults(t *testing.T) {
	_, url := start(t, Config{})
	code, out := post(t, url+"/completion", `{"prompt":"ROMEO:","n_predict":4,"seed":7}`)
	require.Equal(t, 200, code, out)
	gs := out["generation_settings"].(map[string]any)
	for k, v := range map[string]float64{"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1, "repeat_last_n": 64, "seed": 7, "n_probs": 0} {
		require.Equal(t, v, gs[k], k)
	}
	require.Equal(t, []any{"penalties", "top_k", "top_p", "min_p", "temperature"}, gs["samplers"])
	require.Equal(t, []any{}, gs["stop"])
	require.Equal(t, true, gs["cache_prompt"])
	// The same seed, the same text; llama-server's default sampler order
	// is pinfer's, so naming it changes nothing, and leaving top_k out
	// turns it off.
	_, again := post(t, url+"/completion", `{"prompt":"ROMEO:","n_predict":4,"seed":7,"samplers":["dry","top_k","typ_p","top_p","min_p","xtc","temperature"]}`)
	require.Equal(t, out["content"], again["content"])
	_, again = post(t, url+"/completion", `{"prompt":"ROMEO:","n_predict":4,"seed":7,"samplers":"edskypmxt"}`)
	require.Equal(t, out["content"], again["content"])
	code, again = post(t, url+"/completion", `{"prompt":"ROMEO:","n_predict":4,"seed":7,"samplers":["top_p","temperature"]}`)
	require.Equal(t, 200, code, again)
	gs = again["generation_settings"].(map[string]any)
	require.Equal(t, 0.0, gs["top_k"])
	require.Equal(t, 0.0, gs["min_p"])
	require.Equal(t, []any{"top_p", "temperature"}, gs["samplers"])
}

// EOS ends the text with stop_type "eos": here forced by logit_bias on it
// (llama-server's array form, and OpenAI's object form on /v1); ignore_eos
// bans it again. A banned token is replaced by the next best of PyTorch's
// logits.
func TestNativeEOSAndLogitBias(t *testing.T) {
	ref := loadReference(t)
	logits := refLogits(t)
	p := ref.Prompts[2]
	tok := builtin(t).Tok
	eos := tok.EOS()
	_, url := start(t, Config{})
	code, out := post(t, url+"/completion", mustJSON(map[string]any{"prompt": p.IDs, "n_predict": 8, "temperature": 0, "logit_bias": [][]any{{eos, 100}}, "return_tokens": true}))
	require.Equal(t, 200, code, out)
	require.Equal(t, "eos", out["stop_type"])
	require.Equal(t, "", out["content"])
	require.Equal(t, float64(0), out["tokens_predicted"])
	require.Equal(t, []int{eos}, ints(t, out["tokens"]), "the EOS sampled, as llama-server's tokens")
	code, out = post(t, url+"/completion", mustJSON(map[string]any{"prompt": p.IDs, "n_predict": len(p.GreedyIDs), "temperature": 0, "logit_bias": map[string]any{strconv.Itoa(eos): 100}, "ignore_eos": true, "return_tokens": true}))
	require.Equal(t, 200, code, out)
	require.Equal(t, "limit", out["stop_type"])
	require.Equal(t, p.GreedyIDs, ints(t, out["tokens"]))
	gs := out["generation_settings"].(map[string]any)
	require.Equal(t, true, gs["ignore_eos"])
	require.Equal(t, []any{map[string]any{"bias": nil, "token": float64(eos)}}, gs["logit_bias"])

	// The reference's second best at the first step, with a clear margin.
	want := logSoftmax64(logits[2])
	order := make([]int, len(want))
	for j := range order {
		order[j] = j
	}
	sort.SliceStable(order, func(a, b int) bool { return want[order[a]] > want[order[b]] })
	require.Equal(t, p.GreedyIDs[0], order[0])
	require.Greater(t, want[order[1]]-want[order[2]], 1e-2)
	code, out = post(t, url+"/completion", mustJSON(map[string]any{"prompt": p.IDs, "n_predict": 1, "temperature": 0, "logit_bias": [][]any{{order[0], false}}, "return_tokens": true, "n_probs": 1}))
	require.Equal(t, 200, code, out)
	require.Equal(t, []int{order[1]}, ints(t, out["tokens"]))
	// The log-probabilities stay the model's, without the bias.
	pr := out["completion_probabilities"].([]any)[0].(map[string]any)
	require.InDelta(t, want[order[1]], pr["logprob"], 1e-3)
	require.Equal(t, float64(order[0]), pr["top_logprobs"].([]any)[0].(map[string]any)["id"])
	// The shared code: /v1/completions takes OpenAI's logit_bias too.
	code, out = post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": p.IDs, "max_tokens": 1, "temperature": 0, "logit_bias": map[string]any{strconv.Itoa(order[0]): -100}}))
	require.Equal(t, 200, code, out)
	require.Equal(t, tok.Decode([]int{order[1]}), completionText(t, out))
}

// A second request sharing the prompt runs only what the slot's cache
// does not hold, and tokens_cached says how much it held.
func TestNativeCacheReuse(t *testing.T) {
	ref := loadReference(t)
	p := ref.Prompts[3]
	_, url := start(t, Config{})
	body := mustJSON(map[string]any{"prompt": p.Text, "n_predict": 4, "temperature": 0})
	code, first := post(t, url+"/completion", body)
	require.Equal(t, 200, code, first)
	require.Equal(t, float64(0), first["tokens_cached"])
	code, second := post(t, url+"/completion", body)
	require.Equal(t, 200, code, second)
	require.Equal(t, float64(len(p.IDs)-1), second["tokens_cached"])
	require.Equal(t, float64(1), second["timings"].(map[string]any)["prompt_n"])
	require.Equal(t, first["content"], second["content"])
	code, third := post(t, url+"/completion", mustJSON(map[string]any{"prompt": p.Text, "n_predict": 4, "temperature": 0, "cache_prompt": false}))
	require.Equal(t, 200, code, third)
	require.Equal(t, float64(0), third["tokens_cached"])
	require.Equal(t, false, third["generation_settings"].(map[string]any)["cache_prompt"])
}

// What pinfer cannot honour is refused with a 400 naming the field, in
// llama-server's error shape; so is a prompt past the context, with the
// counts.
func TestNativeErrors(t *testing.T) {
	_, url := start(t, Config{Ctx: 64})
	for _, c := range []struct{ body, field string }{
		{`{}`, "prompt"},
		{`{"prompt":null}`, "prompt"},
		{`{"prompt":["a","b"]}`, "several prompts"},
		{`{"prompt":[[1,2],[3,4]]}`, "several prompts"},
		{`{"prompt":[]}`, "prompt"},
		{`{"prompt":[1,{"x":1}]}`, "several prompts"},
		{`{"prompt":[1, 99999]}`, "token id 99999"},
		{`{"prompt":{"prompt_string":"a","multimodal_data":["AAAA"]}}`, "multimodal_data"},
		{`{"prompt":"a","mirostat":2}`, "mirostat"},
		{`{"prompt":"a","n_indent":4}`, "n_indent"},
		{`{"prompt":"a","typical_p":0.5}`, "typical_p"},
		{`{"prompt":"a","dry_multiplier":0.8}`, "dry_multiplier"},
		{`{"prompt":"a","xtc_probability":0.5}`, "xtc_probability"},
		{`{"prompt":"a","dynatemp_range":0.5}`, "dynatemp_range"},
		{`{"prompt":"a","top_n_sigma":1}`, "top_n_sigma"},
		{`{"prompt":"a","post_sampling_probs":true}`, "post_sampling_probs"},
		{`{"prompt":"a","n_cmpl":2}`, "n_cmpl"},
		{`{"prompt":"a","lora":[{"id":0,"scale":1}]}`, "lora"},
		{`{"prompt":"a","response_fields":["content"]}`, "response_fields"},
		{`{"prompt":"a","presence_penalty":0.5}`, "presence_penalty"},
		{`{"prompt":"a","samplers":["temperature","top_k"]}`, "samplers"},
		{`{"prompt":"a","samplers":"tk"}`, "samplers"},
		{`{"prompt":"a","samplers":["top_k"]}`, "samplers"},
		{`{"prompt":"a","samplers":["infill","temperature"]}`, "samplers"},
		{`{"prompt":"a","logit_bias":[[99999,1]]}`, "logit_bias"},
		{`{"prompt":"a","logit_bias":[[1]]}`, "logit_bias"},
		{`{"prompt":"a","n_probs":21}`, "n_probs"},
		{`{"prompt":"a","n_predict":-2}`, "n_predict"},
		{`{"prompt":"a","id_slot":1}`, "id_slot"},
		{`{"prompt":"a","n_keep":2}`, "n_keep"},
		{`{"prompt":"a","grammar":"root ::= ("}`, "grammar"},
		{`{"prompt":"a","top_p":1.5}`, "top_p"},
		{`{"prompt":"a","n_predict":"x"}`, "n_predict"},
	} {
		code, out := post(t, url+"/completion", c.body)
		require.Equal(t, 400, code, "%s: %v", c.body, out)
		e := out["error"].(map[string]any)
		require.Equal(t, float64(400), e["code"], c.body)
		require.Equal(t, "invalid_request_error", e["type"], c.body)
		require.Contains(t, e["message"], c.field, c.body)
	}
	long := make([]int, 80)
	for i := range long {
		long[i] = 100
	}
	code, out := post(t, url+"/completion", mustJSON(map[string]any{"prompt": long}))
	require.Equal(t, 400, code, out)
	e := out["error"].(map[string]any)
	require.Equal(t, "exceed_context_size_error", e["type"])
	require.Equal(t, float64(80), e["n_prompt_tokens"])
	require.Equal(t, float64(64), e["n_ctx"])
}

// The API key is asked for as on the other endpoints, and a missing one
// is refused in llama-server's shape.
func TestNativeAPIKey(t *testing.T) {
	_, url := start(t, Config{APIKey: "sekret"})
	code, out := post(t, url+"/completion", `{"prompt":"a","n_predict":2}`)
	require.Equal(t, 401, code, out)
	e := out["error"].(map[string]any)
	require.Equal(t, float64(401), e["code"])
	require.Equal(t, "authentication_error", e["type"])
	code, out = post(t, url+"/completion", `{"prompt":"a","n_predict":2}`, "Authorization", "Bearer sekret")
	require.Equal(t, 200, code, out)
	require.Equal(t, float64(2), out["tokens_predicted"])
}

func TestValidPrefix(t *testing.T) {
	require.Equal(t, "ab", validPrefix("ab\xe2"))
	require.Equal(t, "", validPrefix("\xe2"))
	require.Equal(t, "é", validPrefix("é"))
	require.False(t, math.IsNaN(finite(math.Inf(-1))))
}
