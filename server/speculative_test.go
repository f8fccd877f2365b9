package server

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/quantize"
	"github.com/stretchr/testify/require"
)

// draftOf is a copy of the built-in model quantized to typ, as a draft for
// it (llama.cpp's usual -md: a smaller file of the same vocabulary).
func draftOf(t *testing.T, typ ops.DType) *engine.Model {
	t.Helper()
	out := filepath.Join(t.TempDir(), fmt.Sprintf("draft-%s.gguf", typ))
	_, err := quantize.File(builtin(t).Path, out, quantize.Options{Type: typ, Threads: 2})
	require.NoError(t, err)
	d, err := engine.Load(out, "")
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func timingsOf(out map[string]any) map[string]any { return out["timings"].(map[string]any) }

// With a q8_0 or q4_0 copy drafting, greedy requests of the reference
// prompts' ids still give PyTorch's greedy ids, on /completion and the
// OpenAI side; timings count the drafted tokens and those picked
// (llama-server's draft_n, draft_n_accepted), and a pass per token not
// drafted right.
func TestSpeculativeGreedyMatchesReference(t *testing.T) {
	ref := loadReference(t)
	for _, typ := range []ops.DType{ops.Q8_0, ops.Q4_0} {
		_, url := start(t, Config{Draft: draftOf(t, typ), DraftMax: 6, DraftPMin: engine.DefaultDraftPMin})
		drafted, accepted, tokens := 0, 0, 0
		for _, p := range ref.Prompts {
			n := len(p.GreedyIDs)
			code, out := post(t, url+"/completion", mustJSON(map[string]any{"prompt": p.IDs, "n_predict": n, "temperature": 0, "return_tokens": true}))
			require.Equal(t, 200, code, out)
			require.Equal(t, p.GreedyIDs, ints(t, out["tokens"]), "%s draft, prompt %q", typ, p.Text)
			require.Equal(t, "limit", out["stop_type"])
			tm := timingsOf(out)
			dn, acc := int(tm["draft_n"].(float64)), int(tm["draft_n_accepted"].(float64))
			require.Positive(t, acc, "%s draft, prompt %q: nothing drafted right", typ, p.Text)
			require.LessOrEqual(t, acc, dn)
			require.Equal(t, float64(n-1-acc), tm["predicted_runs"], "a pass per token not drafted right")
			drafted, accepted, tokens = drafted+dn, accepted+acc, tokens+n

			code, oai := post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": p.IDs, "max_tokens": n, "temperature": 0}))
			require.Equal(t, 200, code, oai)
			require.Equal(t, out["content"], completionText(t, oai))
			require.Positive(t, timingsOf(oai)["draft_n"])
		}
		t.Logf("%s draft: %d tokens, %d drafted, %d accepted", typ, tokens, drafted, accepted)
	}
}

// specCase is one request of TestSpeculativeSameTextAsPlain, and what of
// its answer must be the same with a draft as without.
type specCase struct {
	path, body string
	stream     bool
	check      func(t *testing.T, plain, spec map[string]any, msg string)
}

func sameOAI(t *testing.T, plain, spec map[string]any, msg string) {
	require.Equal(t, completionText(t, plain), completionText(t, spec), msg)
	require.Equal(t, choice0(t, plain)["finish_reason"], choice0(t, spec)["finish_reason"], msg)
	require.Equal(t, plain["usage"].(map[string]any)["completion_tokens"], spec["usage"].(map[string]any)["completion_tokens"], msg)
}

func sameNative(t *testing.T, plain, spec map[string]any, msg string) {
	for _, k := range []string{"content", "tokens", "stop_type", "stopping_word", "tokens_predicted", "truncated"} {
		require.Equal(t, plain[k], spec[k], "%s: %s", msg, k)
	}
	pp, _ := plain["completion_probabilities"].([]any)
	sp, _ := spec["completion_probabilities"].([]any)
	require.Len(t, sp, len(pp), msg)
	for i := range pp {
		a, b := pp[i].(map[string]any), sp[i].(map[string]any)
		require.Equal(t, a["id"], b["id"], msg)
		require.InDelta(t, a["logprob"], b["logprob"], 1e-4, msg)
		at, bt := a["top_logprobs"].([]any), b["top_logprobs"].([]any)
		require.Len(t, bt, len(at), msg)
		for k := range at {
			require.Equal(t, at[k].(map[string]any)["id"], bt[k].(map[string]any)["id"], msg)
			require.InDelta(t, at[k].(map[string]any)["logprob"], bt[k].(map[string]any)["logprob"], 1e-4, msg)
		}
	}
}

// streamNative joins a /completion stream's events into the answer's
// fields the comparison reads: the content, the tokens and the last
// event's summary.
func streamNative(t *testing.T, url, body string) map[string]any {
	events := nativeStream(t, url, body)
	var text strings.Builder
	toks, probs := []any{}, []any{}
	for _, ev := range events {
		text.WriteString(ev["content"].(string))
		toks = append(toks, ev["tokens"].([]any)...)
		if p, ok := ev["completion_probabilities"].([]any); ok {
			probs = append(probs, p...)
		}
	}
	last := events[len(events)-1]
	last["content"], last["tokens"], last["completion_probabilities"] = text.String(), toks, probs
	return last
}

// Concurrent requests on 2 to 4 slots, more than the slots so that some
// queue and the rest decode together, give the same answers with a q4_0
// draft as without: greedy and seeded sampling, a repeat penalty, stop
// strings, max_tokens ending where a draft would go on, logprobs (within
// 1e-4: a row of a longer pass sums in another order), a JSON schema and
// a grammar, a context shift, streamed and not, on /completion and the
// OpenAI endpoints. The drafts were mostly right, and counted in /metrics.
func TestSpeculativeSameTextAsPlain(t *testing.T) {
	ref := loadReference(t)
	p := func(i int) string { return ref.Prompts[i%len(ref.Prompts)].Text }
	// A stop string from the middle of a greedy text, so that it is hit.
	_, plain1 := start(t, Config{})
	code, out := post(t, plain1+"/v1/completions", mustJSON(map[string]any{"prompt": p(3), "max_tokens": 40, "temperature": 0}))
	require.Equal(t, 200, code, out)
	greedy := completionText(t, out)
	stop := strings.TrimSpace(greedy[len(greedy)/2 : len(greedy)/2+4])
	require.NotEmpty(t, stop)

	schema := map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer"}}, "required": []string{"name", "age"}}
	cases := []specCase{
		{"/v1/completions", mustJSON(map[string]any{"prompt": p(0), "max_tokens": 60, "temperature": 0}), false, sameOAI},
		{"/v1/completions", mustJSON(map[string]any{"prompt": p(1), "max_tokens": 60, "temperature": 0.9, "seed": 11}), false, sameOAI},
		{"/v1/completions", mustJSON(map[string]any{"prompt": p(2), "max_tokens": 50, "temperature": 0.7, "seed": 5, "repeat_penalty": 1.3, "repeat_last_n": 16}), true, sameOAI},
		{"/v1/completions", mustJSON(map[string]any{"prompt": p(3), "max_tokens": 40, "temperature": 0, "stop": []string{stop}}), false, func(t *testing.T, plain, spec map[string]any, msg string) {
			require.Equal(t, "stop", choice0(t, spec)["finish_reason"], msg)
			sameOAI(t, plain, spec, msg)
		}},
		{"/completion", mustJSON(map[string]any{"prompt": p(1), "n_predict": 60, "temperature": 0.8, "seed": 3, "stop": []string{"\n\n", "the"}, "return_tokens": true}), false, sameNative},
		{"/completion", mustJSON(map[string]any{"prompt": p(0), "n_predict": 5, "temperature": 0, "return_tokens": true}), false, sameNative},
		{"/completion", mustJSON(map[string]any{"prompt": p(2), "n_predict": 9, "temperature": 0, "n_probs": 3}), false, sameNative},
		{"/completion", mustJSON(map[string]any{"prompt": p(3), "n_predict": 30, "temperature": 0.6, "seed": 8, "n_probs": 2, "stream": true}), true, sameNative},
		{"/v1/completions", mustJSON(map[string]any{"prompt": p(1), "max_tokens": 30, "temperature": 0, "logprobs": 3}), false, func(t *testing.T, plain, spec map[string]any, msg string) {
			sameOAI(t, plain, spec, msg)
			requireLegacyClose(t, asLegacy(t, choice0(t, plain)["logprobs"]), asLegacy(t, choice0(t, spec)["logprobs"]), msg)
		}},
		{"/v1/chat/completions", mustJSON(map[string]any{"messages": []any{map[string]any{"role": "user", "content": p(0)}}, "max_tokens": 40, "temperature": 0, "logprobs": true, "top_logprobs": 2}), false, func(t *testing.T, plain, spec map[string]any, msg string) {
			sameOAI(t, plain, spec, msg)
			a := choice0(t, plain)["logprobs"].(map[string]any)["content"].([]any)
			b := choice0(t, spec)["logprobs"].(map[string]any)["content"].([]any)
			require.Len(t, b, len(a), msg)
			for i := range a {
				require.Equal(t, a[i].(map[string]any)["token"], b[i].(map[string]any)["token"], msg)
				require.InDelta(t, a[i].(map[string]any)["logprob"], b[i].(map[string]any)["logprob"], 1e-4, msg)
			}
		}},
		{"/completion", mustJSON(map[string]any{"prompt": p(2), "n_predict": 48, "temperature": 0, "json_schema": schema}), false, sameNative},
		{"/v1/completions", mustJSON(map[string]any{"prompt": p(0), "max_tokens": 24, "temperature": 0.5, "seed": 2, "grammar": `root ::= [A-Z]+ ":" ("\n" [a-z ,]+)+`}), false, sameOAI},
		{"/v1/completions", mustJSON(map[string]any{"prompt": p(2), "max_tokens": 200, "temperature": 0, "n_keep": 3}), false, sameOAI},
		{"/completion", mustJSON(map[string]any{"prompt": p(1), "n_predict": 150, "temperature": 0.8, "seed": 21}), false, sameNative},
		// To a full context, where a draft fills what is left of it.
		{"/completion", mustJSON(map[string]any{"prompt": p(0), "n_predict": -1, "temperature": 0, "return_tokens": true}), false, func(t *testing.T, plain, spec map[string]any, msg string) {
			require.Equal(t, float64(96-3+1), spec["tokens_predicted"], msg)
			sameNative(t, plain, spec, msg)
		}},
		{"/v1/completions", mustJSON(map[string]any{"prompt": p(2), "max_tokens": 96 - 5 + 1, "temperature": 0.4, "seed": 9}), true, sameOAI},
	}
	run := func(url string) []map[string]any {
		got := make([]map[string]any, len(cases))
		var wg sync.WaitGroup
		for i, c := range cases {
			wg.Go(func() {
				switch {
				case c.stream && c.path == "/completion":
					got[i] = streamNative(t, url+c.path, c.body)
				case c.stream:
					text, events := streamText(t, context.Background(), url+c.path, strings.TrimSuffix(c.body, "}")+`,"stream":true,"stream_options":{"include_usage":true}}`)
					last := events[len(events)-1]
					var finish any
					for _, ev := range events {
						for _, ch := range ev["choices"].([]any) {
							if f := ch.(map[string]any)["finish_reason"]; f != nil {
								finish = f
							}
						}
					}
					got[i] = map[string]any{"choices": []any{map[string]any{"text": text, "finish_reason": finish}}, "usage": last["usage"]}
				default:
					code, out := post(t, url+c.path, c.body)
					require.Equal(t, 200, code, "%s %s: %v", c.path, c.body, out)
					got[i] = out
				}
			})
		}
		wg.Wait()
		return got
	}
	d := draftOf(t, ops.Q4_0)
	for _, np := range []int{2, 3, 4} {
		cfg := Config{Slots: np, Ctx: 96, ContextShift: true}
		_, plain := start(t, cfg)
		cfg.Draft, cfg.DraftMax, cfg.DraftPMin = d, 8, 0.5
		_, spec := start(t, cfg)
		want, got := run(plain), run(spec)
		for i, c := range cases {
			c.check(t, want[i], got[i], fmt.Sprintf("-np %d: %s %s", np, c.path, c.body))
		}
		m, pm := metricsOf(t, spec), metricsOf(t, plain)
		t.Logf("-np %d: %v tokens, %v drafted, %v accepted, %v steps (%v without the draft)", np, m["pinfer_tokens_predicted_total"],
			m["pinfer_draft_tokens_total"], m["pinfer_draft_tokens_accepted_total"], m["pinfer_decode_steps_total"], pm["pinfer_decode_steps_total"])
		require.Greater(t, m["pinfer_draft_tokens_accepted_total"], m["pinfer_draft_tokens_total"]/3)
		require.Less(t, m["pinfer_decode_steps_total"], pm["pinfer_decode_steps_total"])
		_, ok := pm["pinfer_draft_tokens_total"]
		require.False(t, ok, "no draft model, no draft counters")
	}
}

// After each request, however it ended (max_tokens, a stop string inside
// a draft, the end of text a grammar asks for, a context shift), the
// slot's cache holds the prompt and the text as the slot's without a
// draft does, none of the draft's positions past them; so the next
// request reuses as much of it (tokens_cached) and gives the same text.
func TestSpeculativeCacheHoldsText(t *testing.T) {
	ref := loadReference(t)
	cfg := Config{Ctx: 160, ContextShift: true}
	plainSrv, plain := start(t, cfg)
	cfg.Draft, cfg.DraftMax, cfg.DraftPMin = draftOf(t, ops.Q4_0), 16, 0
	specSrv, spec := start(t, cfg)
	held := func(s *Server) []int { return slices.Clone(s.slots[0].sess.Tokens()) }

	p0 := ref.Prompts[1]
	body := func(prompt []int, extra map[string]any) string {
		m := map[string]any{"prompt": prompt, "temperature": 0, "return_tokens": true}
		for k, v := range extra {
			m[k] = v
		}
		return mustJSON(m)
	}
	steps := []struct {
		name  string
		extra map[string]any
	}{
		{"max_tokens", map[string]any{"n_predict": 40}},
		{"a stop string", map[string]any{"n_predict": 40, "stop": []string{"the", "\n"}}},
		{"the grammar's end", map[string]any{"n_predict": 40, "grammar": `root ::= " And " [a-z]{1,8} " " [a-z]{1,8} "."`}},
		{"sampled", map[string]any{"n_predict": 30, "temperature": 0.8, "seed": 4}},
		{"a context shift", map[string]any{"n_predict": 150, "n_keep": 2}},
	}
	prompt, last := p0.IDs, []int(nil)
	for i, st := range steps {
		code, a := post(t, plain+"/completion", body(prompt, st.extra))
		require.Equal(t, 200, code, a)
		code, b := post(t, spec+"/completion", body(prompt, st.extra))
		require.Equal(t, 200, code, b)
		sameNative(t, a, b, st.name)
		require.Equal(t, a["tokens_cached"], b["tokens_cached"], st.name)
		require.Equal(t, timingsOf(a)["cache_n"], timingsOf(b)["cache_n"], st.name)
		require.Equal(t, held(plainSrv), held(specSrv), "%s: the slot's cache holds the prompt and the text only", st.name)
		require.Positive(t, timingsOf(b)["draft_n"], st.name)
		toks := ints(t, b["tokens"])
		switch st.name {
		case "max_tokens":
			// The last token is picked, never run.
			require.Equal(t, append(slices.Clone(prompt), toks[:len(toks)-1]...), held(specSrv))
		case "a stop string":
			require.Equal(t, "word", b["stop_type"])
			// The last request's prompt and text but its last token.
			require.Equal(t, float64(len(last)-1), b["tokens_cached"])
		case "the grammar's end":
			require.Equal(t, "eos", b["stop_type"])
			require.True(t, builtin(t).Tok.EndsText(toks[len(toks)-1]), "tokens end with the end of text")
		case "sampled":
			// The end of text was picked after the whole text ran: all
			// of it but the end token.
			require.Equal(t, float64(len(last)-1), b["tokens_cached"])
		case "a context shift":
			require.Equal(t, "limit", b["stop_type"])
			require.Equal(t, float64(150), b["tokens_predicted"])
		}
		last = append(slices.Clone(prompt), toks...)
		// The next prompt goes on from this text.
		prompt = append(slices.Clone(last), builtin(t).Tok.Encode("\nROMEO:", false)...)
		t.Logf("%d %s: %d tokens, %v drafted, %v accepted", i, st.name, len(toks), timingsOf(b)["draft_n"], timingsOf(b)["draft_n_accepted"])
	}
}

// A draft model of another vocabulary is refused at start with one line
// naming both files, as are a negative draft-max and a p-min past 1.
func TestSpeculativeRefusesOtherVocabulary(t *testing.T) {
	stories, err := engine.Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer stories.Close()
	m := builtin(t)
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Draft: stories, DraftPMin: 0.75}, "draft model " + stories.Path + ": a vocabulary of 512 tokens, where " + m.Path + " has 1024: a draft must share the model's vocabulary"},
		{Config{Draft: stories, DraftPMin: 0.75, Slots: 3, Ctx: 64}, "a draft must share the model's vocabulary"},
		{Config{Draft: m, DraftMax: -1}, "--draft-max -1: want at least 1 token"},
		{Config{Draft: m, DraftPMin: 2, Slots: 2}, "draft p-min 2: want a probability in [0, 1]"},
		{Config{Draft: m, DraftPMin: 0.75, Slots: 2}, ""},
	} {
		s, err := New(m, c.cfg)
		if c.want == "" {
			require.NoError(t, err)
			require.NotNil(t, s.slots[1].spec)
			s.Close()
			continue
		}
		require.Error(t, err)
		require.Contains(t, err.Error(), c.want)
		require.NotContains(t, err.Error(), "\n", "one line")
	}
}

// llama-server's per-request fields: speculative.n_max 0 drafts nothing
// (and the timings say nothing of drafts, as without -md), a smaller n_max
// holds each draft to it, a p_min past 1 stops every draft before its
// first token, n_min is held to n_max; generation_settings shows them,
// the server's defaults where unset; a field of the wrong type is a 400
// naming it. The text is the same whatever they say.
func TestSpeculativeRequestFields(t *testing.T) {
	_, url := start(t, Config{Draft: draftOf(t, ops.Q8_0), DraftMax: 7, DraftPMin: 0.6})
	base := map[string]any{"prompt": "ROMEO:", "n_predict": 40, "temperature": 0, "return_tokens": true}
	ask := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		code, out := post(t, url+"/completion", mustJSON(m))
		require.Equal(t, 200, code, out)
		return out
	}
	def := ask(nil)
	gs := def["generation_settings"].(map[string]any)
	require.Equal(t, float64(7), gs["speculative.n_max"])
	require.Equal(t, float64(0), gs["speculative.n_min"])
	require.Equal(t, 0.6, gs["speculative.p_min"])
	require.Positive(t, timingsOf(def)["draft_n"])

	off := ask(map[string]any{"speculative.n_max": 0})
	require.Equal(t, def["tokens"], off["tokens"])
	require.NotContains(t, timingsOf(off), "draft_n")
	require.NotContains(t, timingsOf(off), "draft_n_accepted")
	require.Equal(t, float64(39), timingsOf(off)["predicted_runs"])

	two := ask(map[string]any{"speculative.n_max": 2, "speculative.p_min": 0})
	require.Equal(t, def["tokens"], two["tokens"])
	tm := timingsOf(two)
	require.LessOrEqual(t, tm["draft_n"], 2*tm["predicted_runs"].(float64))
	require.Greater(t, tm["draft_n"], tm["predicted_runs"], "p_min 0 drafts every pass")

	sure := ask(map[string]any{"speculative.p_min": 1.5})
	require.Equal(t, def["tokens"], sure["tokens"])
	require.NotContains(t, timingsOf(sure), "draft_n")

	clamped := ask(map[string]any{"speculative.n_min": 20, "speculative.n_max": 5, "speculative.p_min": 0})
	require.Equal(t, def["tokens"], clamped["tokens"])
	gs = clamped["generation_settings"].(map[string]any)
	require.Equal(t, float64(5), gs["speculative.n_max"])
	require.Equal(t, float64(5), gs["speculative.n_min"])
	require.Equal(t, 0.0, gs["speculative.p_min"])

	neg := ask(map[string]any{"speculative.n_max": -3, "speculative.n_min": -2})
	require.Equal(t, def["tokens"], neg["tokens"])
	require.NotContains(t, timingsOf(neg), "draft_n")

	code, out := post(t, url+"/v1/chat/completions", mustJSON(map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Speak."}}, "max_tokens": 16, "temperature": 0, "speculative.n_max": 3}))
	require.Equal(t, 200, code, out)
	require.LessOrEqual(t, timingsOf(out)["draft_n"], 3*timingsOf(out)["predicted_runs"].(float64))

	code, out = post(t, url+"/v1/completions", `{"prompt":"ROMEO:","max_tokens":4,"speculative.n_max":"many"}`)
	require.Equal(t, 400, code, out)
	e := out["error"].(map[string]any)
	require.Equal(t, "speculative.n_max", e["param"])
	require.Contains(t, e["message"], "speculative.n_max")
	code, out = post(t, url+"/completion", `{"prompt":"ROMEO:","n_predict":4,"speculative.p_min":"high"}`)
	require.Equal(t, 400, code, out)
	require.Contains(t, out["error"].(map[string]any)["message"], "speculative.p_min")
}
