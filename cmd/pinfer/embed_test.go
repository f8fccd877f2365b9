package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/models"
	"github.com/pinfer/pinfer/ops"
)

// hiddenRows are the built-in model's final-norm rows for text, from
// graph.Session.Hidden (whose logits graph's tests pin to PyTorch's).
func hiddenRows(t *testing.T, text string) [][]float64 {
	path, err := models.DefaultModelPath()
	require.NoError(t, err)
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	pool := ops.NewPool(1)
	defer pool.Close()
	hid, err := m.NewSession(64, pool).Hidden(m.Encode(text))
	require.NoError(t, err)
	rows := make([][]float64, hid.Rows)
	for r := range rows {
		for _, x := range hid.Row(r) {
			rows[r] = append(rows[r], float64(x))
		}
	}
	return rows
}

// hiddenMean is the mean of text's hidden rows, and the last row.
func hiddenMean(t *testing.T, text string) (mean, last []float64) {
	rows := hiddenRows(t, text)
	mean = make([]float64, len(rows[0]))
	for _, row := range rows {
		for c, x := range row {
			mean[c] += x / float64(len(rows))
		}
	}
	return mean, rows[len(rows)-1]
}

func unitF(v []float64) []float64 {
	var n float64
	for _, x := range v {
		n += x * x
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x / math.Sqrt(n)
	}
	return out
}

func TestEmbed(t *testing.T) {
	texts := []string{"ROMEO: What say you?", "JULIET:", "Good night, good night!"}
	out, stderr, code := pinfer(t, "embed", "-p", strings.Join(texts, "\n"), "--embd-output-format", "json+")
	require.Zero(t, code, stderr)
	var res struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Cosine [][]float64 `json:"cosineSimilarity"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Data, 3)
	for i, text := range texts {
		mean, _ := hiddenMean(t, text)
		require.Equal(t, i, res.Data[i].Index)
		require.InDeltaSlice(t, unitF(mean), res.Data[i].Embedding, 1e-5, text)
	}
	for i := range texts {
		for j := range texts {
			var dot float64
			for k, x := range res.Data[i].Embedding {
				dot += x * res.Data[j].Embedding[k]
			}
			require.InDelta(t, dot, res.Cosine[i][j], 1e-5)
		}
	}

	// Last-token pooling, not normalized, as an array; a separator of
	// llama.cpp's escapes.
	out, stderr, code = pinfer(t, "embed", "-p", "JULIET:<#>ROMEO: What say you?", "--embd-separator", "<#>", "--pooling", "last", "--embd-normalize", "-1", "--embd-output-format", "array")
	require.Zero(t, code, stderr)
	var arr [][]float64
	require.NoError(t, json.Unmarshal([]byte(out), &arr))
	require.Len(t, arr, 2)
	_, last := hiddenMean(t, "ROMEO: What say you?")
	require.InDeltaSlice(t, last, arr[1], 1e-5)

	// cls pooling: the first row, the BOS's, whatever follows it.
	out, stderr, code = pinfer(t, "embed", "-p", "JULIET:\nROMEO: What say you?", "--pooling", "cls", "--embd-normalize", "-1", "--embd-output-format", "array")
	require.Zero(t, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &arr))
	require.Len(t, arr, 2)
	bos := hiddenRows(t, "")[0]
	require.InDeltaSlice(t, bos, arr[0], 1e-5)
	require.InDeltaSlice(t, bos, arr[1], 1e-5)

	// none: every token's row, part after part, each normalized.
	out, stderr, code = pinfer(t, "embed", "-p", "JULIET:\nROMEO: What say you?", "--pooling", "none", "--embd-output-format", "array")
	require.Zero(t, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &arr))
	want := append(hiddenRows(t, "JULIET:"), hiddenRows(t, "ROMEO: What say you?")...)
	require.Len(t, arr, len(want))
	for i := range want {
		require.InDeltaSlice(t, unitF(want[i]), arr[i], 1e-5, "token %d", i)
	}

	// The text form: a line per vector, then the similarities.
	out, stderr, code = pinfer(t, "embed", "-p", "JULIET:\nROMEO:")
	require.Zero(t, code, stderr)
	lines := strings.Split(out, "\n")
	require.Len(t, lines, 7, out)
	for i := range 2 {
		f := strings.Fields(lines[i])
		require.Equal(t, []string{"embedding", strconv.Itoa(i) + ":"}, f[:2])
		require.Len(t, f, 2+256)
		for _, x := range f[2:] {
			require.Regexp(t, `^-?\d\.\d{6}$`, x)
		}
	}
	require.Equal(t, []string{"", "cosine similarity matrix:"}, lines[2:4])
	require.Regexp(t, `^ +1\.00 +\d\.\d\d$`, lines[4])
	require.Regexp(t, `^ +\d\.\d\d +1\.00$`, lines[5])

	for args, want := range map[string][]string{
		"no text":      {"embed"},
		"both":         {"embed", "-p", "a", "-f", "b"},
		"pooling":      {"embed", "-p", "a", "--pooling", "rank"},
		"format":       {"embed", "-p", "a", "--embd-output-format", "xml"},
		"too long":     {"embed", "-p", strings.Repeat("ROMEO: ", 40), "-c", "16"},
		"no such file": {"embed", "-f", "/nonexistent/x.txt"},
	} {
		_, stderr, code := pinfer(t, want...)
		require.NotZero(t, code, args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "%s: %s", args, stderr)
	}
}

// An empty part of a model that adds no BOS has no tokens: one line
// naming the part, where the others still embed.
func TestEmbedEmptyPartWithoutBOS(t *testing.T) {
	src, err := gguf.Open(fixtures.Path(t, "stories260K", "stories260K.gguf"))
	require.NoError(t, err)
	defer src.Close()
	w, err := gguf.CopyOf(src)
	require.NoError(t, err)
	require.NoError(t, w.Set("tokenizer.ggml.add_bos_token", false))
	path := filepath.Join(t.TempDir(), "nobos.gguf")
	require.NoError(t, w.WriteFile(path, nil))

	out, stderr, code := pinfer(t, "embed", "-m", path, "-p", "Once<#>upon", "--embd-separator", "<#>", "--embd-output-format", "array")
	require.Zero(t, code, stderr)
	var arr [][]float64
	require.NoError(t, json.Unmarshal([]byte(out), &arr))
	require.Len(t, arr, 2)
	_, stderr, code = pinfer(t, "embed", "-m", path, "-p", "Once<#><#>upon", "--embd-separator", "<#>")
	require.NotZero(t, code)
	require.Equal(t, "pinfer: part 1 of the text has no tokens", strings.TrimSpace(stderr))
}
