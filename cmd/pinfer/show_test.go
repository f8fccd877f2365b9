package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinfer/pinfer/internal/fixtures"
)

// showRows reads show's "    key   value" rows.
func showRows(out string) map[string]string {
	rows := map[string]string{}
	re := regexp.MustCompile(`^    (\S.*?)\s{2,}(\S.*)$`)
	for _, l := range strings.Split(out, "\n") {
		if m := re.FindStringSubmatch(l); m != nil {
			rows[m[1]] = m[2]
		}
	}
	return rows
}

// stories260K is llama2.c's model, whose shape its README gives: dim 64,
// 5 layers, 8 heads, 4 KV heads, hidden 172, vocabulary 512. Its tensors
// then hold 2·512·64 + 64 + 5·(64·64·2 + 64·32·2 + 3·64·172 + 2·64) =
// 292,800 parameters, which ollama writes as 293K.
func TestShowStories(t *testing.T) {
	path := fixtures.Path(t, "stories260K", "stories260K.gguf")
	out, stderr, code := pinfer(t, "show", "-m", path, "-v")
	require.Zero(t, code, stderr)
	rows := showRows(out)
	for k, v := range map[string]string{
		"architecture": "llama", "parameters": "293K", "embedding length": "64",
		"feed-forward length": "172", "block count": "5", "quantization": "F32",
		"sparse FFNs":                "none: every FFN runs dense",
		"llama.attention.head_count": "8", "llama.attention.head_count_kv": "4",
		"tokenizer.ggml.tokens": `[512]: ["<unk>", "<s>", "</s>", ...]`,
	} {
		require.Equal(t, v, rows[k], k)
	}
	require.Contains(t, out, "Tensors (48)") // 3 + 5 layers of 9
	require.Regexp(t, `(?m)^    blk\.4\.ffn_gate\.weight\s+F32\s+\[64, 172\]$`, out)
}

// The Shakespeare model's config.json (the Hugging Face checkpoint it was
// converted from) gives 6 layers of 1024 ReLU neurons; it has no
// predictor, and a generated PowerInfer file has one of the asked rank.
func TestShowSparse(t *testing.T) {
	out, stderr, code := pinfer(t, "show")
	require.Zero(t, code, stderr)
	rows := showRows(out)
	require.Equal(t, "6, 1024 neurons each", rows["sparse FFNs"])
	require.Equal(t, "relu", rows["activation"])
	require.Contains(t, rows["predictor"], "none in the file")
	require.Contains(t, rows["graph"], "relu-llama")

	path := filepath.Join(t.TempDir(), "g.gguf")
	_, stderr, code = pinfer(t, "gen", "--n-embd", "128", "--n-ff", "256", "--n-layer", "2", "--n-head", "4", "--vocab", "512", "--rank", "32", "--type", "q8_0", "-o", path)
	require.Zero(t, code, stderr)
	out, stderr, code = pinfer(t, "show", "-m", path)
	require.Zero(t, code, stderr)
	rows = showRows(out)
	require.Equal(t, "2, 256 neurons each", rows["sparse FFNs"])
	require.Contains(t, rows["predictor"], "mlp (fc1/fc2 of rank 32")
	require.Contains(t, rows["down rows"], "ffn_down_t")
	require.Equal(t, "Q8_0", rows["quantization"])
	require.Equal(t, "128", rows["embedding length"])

	_, stderr, code = pinfer(t, "show", "-m", path, "--license")
	require.NotZero(t, code)
	require.Contains(t, stderr, "general.license")
	_, stderr, code = pinfer(t, "show", "-m", filepath.Join(t.TempDir(), "none.gguf"))
	require.NotZero(t, code)
	require.Contains(t, stderr, "none.gguf")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, stderr)
}
