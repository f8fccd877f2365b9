package server

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// hiddenRows is the built-in model's final-norm output for every position
// of ids, from graph.Session.Hidden outside the server (whose logits
// graph's TestHiddenGivesPyTorchLogits pins to PyTorch's).
func hiddenRows(t *testing.T, ids []int) [][]float64 {
	pool := ops.NewPool(2)
	defer pool.Close()
	sess := builtin(t).NewSession(len(ids)+8, pool)
	hid, err := sess.Hidden(ids)
	require.NoError(t, err)
	out := make([][]float64, hid.Rows)
	for i := range out {
		for _, x := range hid.Row(i) {
			out[i] = append(out[i], float64(x))
		}
	}
	return out
}

func unit(v []float64) []float64 {
	var n float64
	for _, x := range v {
		n += x * x
	}
	n = math.Sqrt(n)
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x / n
	}
	return out
}

func meanOf(rows [][]float64) []float64 {
	out := make([]float64, len(rows[0]))
	for _, r := range rows {
		for i, x := range r {
			out[i] += x / float64(len(rows))
		}
	}
	return out
}

func floats(t *testing.T, v any) []float64 {
	t.Helper()
	l, ok := v.([]any)
	require.True(t, ok, "not an array: %v", v)
	out := make([]float64, len(l))
	for i, x := range l {
		out[i] = x.(float64)
	}
	return out
}

func norm2(v []float64) float64 {
	var n float64
	for _, x := range v {
		n += x * x
	}
	return math.Sqrt(n)
}

// embeddingsOf posts to /v1/embeddings and returns data[*].embedding.
func embeddingsOf(t *testing.T, url string, input any) ([][]float64, map[string]any) {
	t.Helper()
	code, out := post(t, url+"/v1/embeddings", mustJSON(map[string]any{"input": input}))
	require.Equal(t, 200, code, out)
	var vecs [][]float64
	for i, d := range out["data"].([]any) {
		m := d.(map[string]any)
		require.Equal(t, "embedding", m["object"])
		require.Equal(t, float64(i), m["index"])
		vecs = append(vecs, floats(t, m["embedding"]))
	}
	return vecs, out
}

// An embedding is the mean (or last, or first) of the hidden rows,
// L2-normalized.
func TestEmbeddingsArePooledHiddenRows(t *testing.T) {
	ref := loadReference(t)
	_, mean := start(t, Config{})
	_, last := start(t, Config{Pooling: PoolingLast})
	_, cls := start(t, Config{Pooling: PoolingCLS})
	for _, p := range ref.Prompts {
		rows := hiddenRows(t, p.IDs)
		require.Len(t, rows, len(p.IDs))
		for _, c := range []struct {
			url  string
			want []float64
		}{{mean, unit(meanOf(rows))}, {last, unit(rows[len(rows)-1])}, {cls, unit(rows[0])}} {
			vecs, out := embeddingsOf(t, c.url, p.IDs)
			require.Len(t, vecs, 1)
			require.Len(t, vecs[0], len(rows[0]))
			require.InDelta(t, 1, norm2(vecs[0]), 1e-5)
			require.InDeltaSlice(t, c.want, vecs[0], 1e-5)
			require.Equal(t, "list", out["object"])
			require.Equal(t, ollamaModelName, out["model"])
			u := out["usage"].(map[string]any)
			require.Equal(t, float64(len(p.IDs)), u["prompt_tokens"])
			require.Equal(t, float64(len(p.IDs)), u["total_tokens"])
			// The text tokenizes to the reference's ids (BOS first).
			byText, _ := embeddingsOf(t, c.url, p.Text)
			require.InDeltaSlice(t, vecs[0], byText[0], 1e-6)
		}
		// Without the BOS, cls pools the first token's row.
		if len(p.IDs) > 2 {
			vecs, _ := embeddingsOf(t, cls, p.IDs[1:])
			require.InDeltaSlice(t, unit(hiddenRows(t, p.IDs[1:])[0]), vecs[0], 1e-5)
		}
	}
}

func TestEmbeddingsBatchAndDeterminism(t *testing.T) {
	_, url := start(t, Config{})
	texts := []string{"ROMEO: hi", "To be, or not to be", "JULIET:", "ROMEO: hi"}
	batch, out := embeddingsOf(t, url, texts)
	require.Len(t, batch, len(texts))
	total := 0
	for i, text := range texts {
		alone, o := embeddingsOf(t, url, text)
		require.InDeltaSlice(t, alone[0], batch[i], 1e-6, "input %d keeps its place", i)
		total += int(o["usage"].(map[string]any)["prompt_tokens"].(float64))
	}
	require.Equal(t, float64(total), out["usage"].(map[string]any)["prompt_tokens"])
	require.Equal(t, batch[0], batch[3], "same text, same vector")
	var diff float64
	for i := range batch[0] {
		diff = math.Max(diff, math.Abs(batch[0][i]-batch[1][i]))
	}
	require.Greater(t, diff, 1e-3, "different texts, different vectors")
	// Lists of ids, in order.
	ids := [][]int{{1, 870, 983}, {1, 300}}
	byIDs, _ := embeddingsOf(t, url, ids)
	for i, one := range ids {
		alone, _ := embeddingsOf(t, url, one)
		require.InDeltaSlice(t, alone[0], byIDs[i], 1e-6)
	}
}

func TestEmbeddingsBase64AndNormalize(t *testing.T) {
	_, url := start(t, Config{})
	want, _ := embeddingsOf(t, url, "ROMEO:")
	code, out := post(t, url+"/v1/embeddings", mustJSON(map[string]any{"input": "ROMEO:", "encoding_format": "base64"}))
	require.Equal(t, 200, code, out)
	b, err := base64.StdEncoding.DecodeString(out["data"].([]any)[0].(map[string]any)["embedding"].(string))
	require.NoError(t, err)
	require.Len(t, b, 4*len(want[0]))
	for i, x := range want[0] {
		require.InDelta(t, x, float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))), 1e-7)
	}
	// embd_normalize -1: the raw mean, whose unit vector is the default's.
	code, out = post(t, url+"/v1/embeddings", mustJSON(map[string]any{"input": "ROMEO:", "embd_normalize": -1}))
	require.Equal(t, 200, code, out)
	raw := floats(t, out["data"].([]any)[0].(map[string]any)["embedding"])
	require.Greater(t, math.Abs(norm2(raw)-1), 1e-3)
	require.InDeltaSlice(t, want[0], unit(raw), 1e-5)
}

func TestEmbeddingsErrors(t *testing.T) {
	_, url := start(t, Config{Ctx: 16})
	long := strings.Repeat("ROMEO and JULIET ", 20)
	for _, c := range []struct{ body, param string }{
		{`{"input":"` + long + `"}`, "input"},
		{`{"input":["a","` + long + `"]}`, "input"},
		{`{}`, "input"},
		{`{"input":[]}`, "input"},
		{`{"input":[[]]}`, "input"},
		{`{"input":{"a":1}}`, "input"},
		{`{"input":[1, 99999]}`, "input"},
		{`{"input":[-1]}`, "input"},
		{`{"input":"a","encoding_format":"int8"}`, "encoding_format"},
		{`{"input":"a","dimensions":3}`, "dimensions"},
	} {
		code, out := post(t, url+"/v1/embeddings", c.body)
		require.Equal(t, 400, code, "%s: %v", c.body, out)
		e := out["error"].(map[string]any)
		require.Equal(t, c.param, e["param"], c.body)
	}
	code, out := post(t, url+"/v1/embeddings", `{"input":"a","model":"gpt-4"}`)
	require.Equal(t, 404, code, out)
	_, err := New(builtin(t), Config{Pooling: "rank"})
	require.ErrorContains(t, err, "--pooling")
	_, err = New(builtin(t), Config{Pooling: "none"})
	require.ErrorContains(t, err, "--pooling none")
}

// ollama's /api/embed gives /v1/embeddings' vectors in its own shape; the
// legacy /api/embeddings gives the unnormalized mean.
func TestOllamaEmbed(t *testing.T) {
	_, url := start(t, Config{Ctx: 32})
	texts := []string{"ROMEO: hi", "JULIET:"}
	want, _ := embeddingsOf(t, url, texts)
	code, out := post(t, url+"/api/embed", mustJSON(map[string]any{"model": ollamaModelName, "input": texts}))
	require.Equal(t, 200, code, out)
	require.Equal(t, ollamaModelName, out["model"])
	got := out["embeddings"].([]any)
	require.Len(t, got, 2)
	n := 0
	for i := range texts {
		require.InDeltaSlice(t, want[i], floats(t, got[i]), 1e-6)
		n += len(builtin(t).Encode(texts[i]))
	}
	require.Equal(t, float64(n), out["prompt_eval_count"])
	require.Greater(t, out["total_duration"].(float64), 0.0)
	require.Contains(t, out, "load_duration")

	code, out = post(t, url+"/api/embed", mustJSON(map[string]any{"model": ollamaModelName + ":latest", "input": "ROMEO: hi"}))
	require.Equal(t, 200, code, out)
	require.Len(t, out["embeddings"].([]any), 1)
	require.InDeltaSlice(t, want[0], floats(t, out["embeddings"].([]any)[0]), 1e-6)

	code, out = post(t, url+"/api/embed", mustJSON(map[string]any{"model": ollamaModelName, "input": []string{}}))
	require.Equal(t, 200, code, out)
	require.Empty(t, out["embeddings"])

	code, out = post(t, url+"/api/embeddings", mustJSON(map[string]any{"model": ollamaModelName, "prompt": "ROMEO: hi"}))
	require.Equal(t, 200, code, out)
	legacy := floats(t, out["embedding"])
	require.InDeltaSlice(t, unit(meanOf(hiddenRows(t, builtin(t).Encode("ROMEO: hi")))), unit(legacy), 1e-5)

	long := strings.Repeat("ROMEO and JULIET ", 20)
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/api/embed", `{"input":"hi"}`, 400},
		{"/api/embed", `{"model":"llama3","input":"hi"}`, 404},
		{"/api/embed", `{"model":"` + ollamaModelName + `","input":"` + long + `"}`, 400},
		{"/api/embed", `{"model":"` + ollamaModelName + `","input":3}`, 400},
		{"/api/embeddings", `{"model":"` + ollamaModelName + `","prompt":"` + long + `"}`, 400},
		{"/api/embeddings", `{"prompt":"hi"}`, 400},
	} {
		code, out := post(t, url+c.path, c.body)
		require.Equal(t, c.status, code, "%s %s: %v", c.path, c.body, out)
		require.IsType(t, "", out["error"], "ollama's error shape")
	}
	code, out = post(t, url+"/api/embed", mustJSON(map[string]any{"model": ollamaModelName, "input": long, "truncate": true}))
	require.Equal(t, 200, code, out)
	require.Equal(t, 32.0, out["prompt_eval_count"])
}

// Embeddings run while every slot generates, through the same queue, and
// the generation's text is what it is alone.
func TestEmbeddingsBesideGeneration(t *testing.T) {
	_, url := start(t, Config{Slots: 1})
	body := mustJSON(map[string]any{"prompt": "ROMEO:", "max_tokens": 48, "temperature": 0, "cache_prompt": false})
	code, out := post(t, url+"/v1/completions", body)
	require.Equal(t, 200, code, out)
	want := completionText(t, out)
	alone, _ := embeddingsOf(t, url, "JULIET:")
	var wg sync.WaitGroup
	var text string
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, o := post(t, url+"/v1/completions", body)
		text = completionText(t, o)
	}()
	for range 4 {
		got, _ := embeddingsOf(t, url, "JULIET:")
		require.InDeltaSlice(t, alone[0], got[0], 1e-6)
	}
	wg.Wait()
	require.Equal(t, want, text)
}
