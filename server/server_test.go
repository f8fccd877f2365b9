package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// runText is what `pinfer run --temp 0 -n N -p PROMPT` prints after the prompt.
func runText(t *testing.T, prompt string, n int) string {
	t.Helper()
	res, err := builtin(t).Generate(engine.Options{Prompt: prompt, N: n, Threads: 2, Sample: sample.Params{Temp: 0, RepeatPenalty: 1}})
	require.NoError(t, err)
	return res.Text
}

// At temperature 0 a completion is PyTorch's greedy continuation and the
// text pinfer run prints, with usage and llama.cpp's timings.
func TestCompletionGreedyMatchesReferenceAndRun(t *testing.T) {
	ref := loadReference(t)
	_, url := start(t, Config{})
	for _, p := range ref.Prompts {
		n := len(p.GreedyIDs)
		code, out := post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": p.Text, "max_tokens": n, "temperature": 0}))
		require.Equal(t, 200, code, out)
		text := completionText(t, out)
		// The reference decodes the continuation alone, which drops
		// SentencePiece's leading space; after a prompt it stays.
		require.Equal(t, p.GreedyText, strings.TrimPrefix(text, " "), "prompt %q", p.Text)
		require.Equal(t, runText(t, p.Text, n), text)
		require.Equal(t, "text_completion", out["object"])
		require.Equal(t, "length", out["choices"].([]any)[0].(map[string]any)["finish_reason"])
		u := out["usage"].(map[string]any)
		require.Equal(t, float64(len(p.IDs)), u["prompt_tokens"])
		require.Equal(t, float64(n), u["completion_tokens"])
		require.Equal(t, float64(len(p.IDs)+n), u["total_tokens"])
		tm := out["timings"].(map[string]any)
		// What the prompt shares with the slot's last text (BOS at least,
		// after the first) is not run again.
		cached := u["prompt_tokens_details"].(map[string]any)["cached_tokens"]
		require.Equal(t, tm["cache_n"], cached)
		require.Equal(t, float64(len(p.IDs)), tm["prompt_n"].(float64)+tm["cache_n"].(float64))
		require.Equal(t, float64(n), tm["predicted_n"])
		// The first token comes from the prompt's pass, so n-1 passes
		// follow; the speed is llama-server's, over the n tokens.
		require.Equal(t, float64(n-1), tm["predicted_runs"])
		require.InDelta(t, tm["predicted_ms"].(float64)/float64(n), tm["predicted_per_token_ms"], 1e-9)
		require.InDelta(t, 1000*float64(n)/tm["predicted_ms"].(float64), tm["predicted_per_second"], 1e-6)
		for _, k := range []string{"prompt_ms", "prompt_per_second", "predicted_ms", "predicted_per_second"} {
			require.Greater(t, tm[k].(float64), 0.0, k)
		}
	}
}

// A chat at temperature 0 is run's text for the templated prompt (the
// built-in model has no template: the default one).
func TestChatGreedyMatchesRunOnTemplatedPrompt(t *testing.T) {
	_, url := start(t, Config{})
	code, out := post(t, url+"/v1/chat/completions", `{"model":"shakespeare-relu-6m-f16","messages":[{"role":"system","content":"Speak."},{"role":"user","content":"Who art thou?"}],"max_tokens":40,"temperature":0}`)
	require.Equal(t, 200, code, out)
	require.Equal(t, "chat.completion", out["object"])
	msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	require.Equal(t, "assistant", msg["role"])
	want := runText(t, "system: Speak.\nuser: Who art thou?\nassistant:", 40)
	require.Equal(t, want, msg["content"])
	require.NotEmpty(t, want)
}

// Streaming gives the same text in deltas: a role chunk first, a last chunk
// with finish_reason and timings, a usage chunk when asked, then [DONE].
func TestStreamEqualsWhole(t *testing.T) {
	_, url := start(t, Config{})
	for _, ep := range []string{"/v1/chat/completions", "/v1/completions"} {
		body := `{"messages":[{"role":"user","content":"Speak, friend."}],"prompt":"JULIET:","max_tokens":30,"temperature":0`
		code, whole := post(t, url+ep, body+`}`)
		require.Equal(t, 200, code)
		text, events := streamText(t, context.Background(), url+ep, body+`,"stream":true,"stream_options":{"include_usage":true}}`)
		require.Equal(t, completionText(t, whole), text, ep)
		last := events[len(events)-2]
		require.Equal(t, "length", last["choices"].([]any)[0].(map[string]any)["finish_reason"])
		require.NotNil(t, last["timings"])
		u := events[len(events)-1]
		require.Empty(t, u["choices"])
		// The same prompt again: all of it but the last token is cached.
		want := whole["usage"].(map[string]any)
		want["prompt_tokens_details"] = map[string]any{"cached_tokens": want["prompt_tokens"].(float64) - 1}
		require.Equal(t, want, u["usage"])
		if ep == "/v1/chat/completions" {
			require.Equal(t, "chat.completion.chunk", events[0]["object"])
			require.Equal(t, "assistant", events[0]["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)["role"])
		}
	}
}

// Eight concurrent requests (four prompts, streamed and not) on four slots,
// so that some wait in the queue and the rest decode in one batch, each get
// the text the prompt gets alone.
func TestConcurrentGreedyEqualsAlone(t *testing.T) {
	ref := loadReference(t)
	_, url := start(t, Config{Slots: 4})
	before := metricsOf(t, url)
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := ref.Prompts[i%len(ref.Prompts)]
			body := fmt.Sprintf(`{"prompt":%s,"max_tokens":%d,"temperature":0,"seed":%d`, mustJSON(p.Text), len(p.GreedyIDs), i)
			if i%2 == 0 {
				got[i], _ = streamText(t, context.Background(), url+"/v1/completions", body+`,"stream":true}`)
			} else {
				_, out := post(t, url+"/v1/completions", body+`}`)
				got[i] = completionText(t, out)
			}
		}()
	}
	wg.Wait()
	after := metricsOf(t, url)
	steps := after["pinfer_decode_steps_total"] - before["pinfer_decode_steps_total"]
	rows := after["pinfer_decode_rows_total"] - before["pinfer_decode_rows_total"]
	require.Greater(t, rows/steps, 2.0, "slots were not decoded together")
	require.Equal(t, 0.0, after["pinfer_queue_length"])
	for i, g := range got {
		require.Equal(t, ref.Prompts[i%len(ref.Prompts)].GreedyText, strings.TrimPrefix(g, " "), "request %d", i)
		require.Equal(t, got[i%len(ref.Prompts)], g, "request %d", i)
	}
}

func metricsOf(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
	b, _ := io.ReadAll(resp.Body)
	m := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(line, "#") {
			require.Regexp(t, `^# (HELP|TYPE) pinfer_\w+ .+$`, line)
			continue
		}
		f := strings.Fields(line)
		require.Len(t, f, 2, line)
		v, err := strconv.ParseFloat(f[1], 64)
		require.NoError(t, err, line)
		m[f[0]] = v
	}
	return m
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A client that leaves mid-stream frees its slot at once: with one slot,
// the next request is answered, and generation stopped long before
// max_tokens. A client that leaves while queued leaves the queue.
func TestDisconnectFreesSlot(t *testing.T) {
	_, url := start(t, Config{Slots: 1})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(`{"prompt":"ROMEO:","max_tokens":500,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	buf := make([]byte, 64)
	_, err = resp.Body.Read(buf) // generation is under way
	require.NoError(t, err)
	require.Equal(t, 1.0, metricsOf(t, url)["pinfer_slots_busy"])

	// A second request waits for the only slot; its client gives up.
	qctx, qcancel := context.WithCancel(context.Background())
	qdone := make(chan struct{})
	go func() {
		defer close(qdone)
		qreq, _ := http.NewRequestWithContext(qctx, "POST", url+"/v1/completions", strings.NewReader(`{"prompt":"x","max_tokens":5}`))
		if r, err := http.DefaultClient.Do(qreq); err == nil {
			r.Body.Close()
		}
	}()
	waitFor(t, "the queued request", func() bool { return metricsOf(t, url)["pinfer_queue_length"] == 1 })
	qcancel()
	<-qdone
	waitFor(t, "the queue to empty", func() bool { return metricsOf(t, url)["pinfer_queue_length"] == 0 })

	cancel()
	resp.Body.Close()
	waitFor(t, "the slot to free", func() bool { return metricsOf(t, url)["pinfer_slots_busy"] == 0 })
	predicted := metricsOf(t, url)["pinfer_tokens_predicted_total"]
	require.Less(t, predicted, 500.0)

	start := time.Now()
	code, out := post(t, url+"/v1/completions", `{"prompt":"ROMEO:","max_tokens":8,"temperature":0}`)
	require.Equal(t, 200, code, out)
	require.Less(t, time.Since(start), 3*time.Second)
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, predicted+8, metricsOf(t, url)["pinfer_tokens_predicted_total"], "the abandoned request kept generating")
}

// Generation stops before the first stop string, even one split across
// tokens, and says finish_reason "stop".
func TestStopStrings(t *testing.T) {
	ref := loadReference(t)
	p := ref.Prompts[0]
	_, url := start(t, Config{})
	full := p.GreedyText
	stop := "model of"
	cut := strings.Index(full, stop)
	require.Greater(t, cut, 0)
	body := mustJSON(map[string]any{"prompt": p.Text, "max_tokens": len(p.GreedyIDs), "temperature": 0, "stop": []string{"zzz", stop}})
	_, out := post(t, url+"/v1/completions", body)
	require.Equal(t, full[:cut], completionText(t, out))
	require.Equal(t, "stop", out["choices"].([]any)[0].(map[string]any)["finish_reason"])
	text, _ := streamText(t, context.Background(), url+"/v1/completions", strings.TrimSuffix(body, "}")+`,"stream":true}`)
	require.Equal(t, full[:cut], text)
}

func TestStopperHoldsBackPrefixes(t *testing.T) {
	s := stopper{stops: stopWords{words: []string{"END", "\n\n"}}}
	var got []string
	for _, piece := range []string{"a", "b E", "N", "x\n", "y", "\n", "\nEN", "D tail"} {
		out, hit := s.add(piece)
		got = append(got, out)
		if hit {
			break
		}
	}
	require.Equal(t, []string{"a", "b ", "", "ENx", "\ny", "", ""}, got)
}

func TestAPIKey(t *testing.T) {
	_, url := start(t, Config{APIKey: "sekret"})
	resp, err := http.Get(url + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, "/health needs no key")
	code, out := post(t, url+"/v1/completions", `{"prompt":"a","max_tokens":2}`, "Authorization", "Bearer sekret")
	require.Equal(t, 200, code, out)
	code, out = post(t, url+"/tokenize", `{"content":"a"}`, "Authorization", "Bearer sekret")
	require.Equal(t, 200, code, out)
}

// /tokenize gives SentencePiece's ids (the reference's), BOS only with
// add_special; /detokenize turns them back.
func TestTokenizeDetokenize(t *testing.T) {
	ref := loadReference(t)
	_, url := start(t, Config{})
	for _, p := range ref.Prompts {
		code, out := post(t, url+"/tokenize", mustJSON(map[string]any{"content": p.Text, "add_special": true}))
		require.Equal(t, 200, code)
		require.Equal(t, mustJSON(p.IDs), mustJSON(out["tokens"]))
		_, out = post(t, url+"/tokenize", mustJSON(map[string]any{"content": p.Text}))
		require.Equal(t, mustJSON(p.IDs[1:]), mustJSON(out["tokens"]))
		_, out = post(t, url+"/detokenize", mustJSON(map[string]any{"tokens": p.IDs}))
		require.Equal(t, p.Text, out["content"])
	}
}

func TestModelsAndHealth(t *testing.T) {
	_, url := start(t, Config{ModelName: "bard"})
	resp, err := http.Get(url + "/v1/models")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(b), `"id":"bard"`)
	require.Contains(t, string(b), `"object":"list"`)
	resp, err = http.Get(url + "/v1/models/bard")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}

// Drain refuses new generations with 503; CancelAll ends a stream in flight
// with an error event; Close then returns.
func TestShutdownCancelsStreams(t *testing.T) {
	s, url := start(t, Config{Slots: 1})
	req, _ := http.NewRequest("POST", url+"/v1/completions", strings.NewReader(`{"prompt":"ROMEO:","max_tokens":500,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	buf := make([]byte, 16)
	_, err = resp.Body.Read(buf)
	require.NoError(t, err)
	s.Drain()
	code, out := post(t, url+"/v1/completions", `{"prompt":"a","max_tokens":2}`)
	require.Equal(t, 503, code)
	require.Equal(t, "shutting_down", out["error"].(map[string]any)["code"])
	s.CancelAll()
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(rest), `"error":{"message":"the server is shutting down"`)
	require.NotContains(t, string(rest), "[DONE]")
	s.Close()
}

// As llama-server's, /tokenize reads special tokens' text unless
// parse_special is false: "</s>" is EOS between the two texts, each
// encoded on its own as a text that follows a special token is.
func TestTokenizeParseSpecial(t *testing.T) {
	_, url := start(t, Config{})
	ids := func(body string) []any {
		code, out := post(t, url+"/tokenize", body)
		require.Equal(t, 200, code, out)
		return out["tokens"].([]any)
	}
	eos := float64(builtin(t).Tok.Vocab().EOS)
	require.Equal(t, "</s>", builtin(t).Tok.Vocab().Tokens[int(eos)])
	want := append(append(ids(`{"content":"ROMEO"}`), eos), ids(`{"content":"Speak"}`)...)
	require.Equal(t, want, ids(`{"content":"ROMEO</s>Speak"}`))
	plain := ids(`{"content":"ROMEO</s>Speak","parse_special":false}`)
	require.NotContains(t, plain, eos)
	require.Greater(t, len(plain), len(want))
}
