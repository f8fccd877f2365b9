package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinfer/pinfer/internal/fixtures"
)

// serve takes llama-server's speculative flags: -md, --draft-max (also
// --draft and --draft-n) and --draft-p-min. A q4_0 copy of the built-in
// model drafts for it: a greedy request's timings count what it drafted
// and what was picked. A draft of another vocabulary, or bad values, are
// refused with one line before the server listens.
func TestServeModelDraft(t *testing.T) {
	for in, want := range map[string]string{
		"serve -md d.gguf --draft 4":        "serve --model-draft d.gguf --draft-max 4",
		"serve --draft-n=3 -md=d.gguf":      "serve --draft-max=3 --model-draft=d.gguf",
		"serve --draft-max 2 --draft-p-min": "serve --draft-max 2 --draft-p-min",
	} {
		args := strings.Fields(in)
		rewriteFlags(args)
		require.Equal(t, want, strings.Join(args, " "), in)
	}

	model := filepath.Join("..", "..", "models", "shakespeare-relu-6m-f16.gguf")
	draft := filepath.Join(t.TempDir(), "draft.gguf")
	_, stderr, code := pinfer(t, "quantize", model, draft, "q4_0")
	require.Zero(t, code, stderr)

	for args, want := range map[string]string{
		"-md " + fixtures.Path(t, "stories260K", "stories260K.gguf"): "a vocabulary of 512 tokens, where ",
		"-md " + draft + " --draft-max 0":                            "--draft-max 0: want at least 1 token",
		"-md " + draft + " --draft-p-min 2":                          "--draft-p-min 2: want a probability in [0, 1]",
		"-md " + filepath.Join(t.TempDir(), "none.gguf"):             "--model-draft: ",
	} {
		_, stderr, code := pinfer(t, append([]string{"serve", "--port", "0", "-np", "2"}, strings.Fields(args)...)...)
		require.NotZero(t, code, args)
		require.Contains(t, stderr, want, args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
	}

	cmd := exec.Command(binary, "serve", "--port", "0", "-np", "2", "-c", "128", "-md", draft, "--draft", "5", "--draft-p-min", "0.5")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
	errs, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(errs)
	var url string
	for url == "" && sc.Scan() {
		if m := regexp.MustCompile(`serving \S+ on (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	require.NotEmpty(t, url, "no serving line")
	go func() {
		for sc.Scan() {
		}
	}()
	resp, err := http.Post(url+"/completion", "application/json", strings.NewReader(`{"prompt":"ROMEO:","n_predict":32,"temperature":0}`))
	require.NoError(t, err)
	var out struct {
		Timings         map[string]float64 `json:"timings"`
		TokensPredicted int                `json:"tokens_predicted"`
		Settings        map[string]any     `json:"generation_settings"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	resp.Body.Close()
	require.Equal(t, 32, out.TokensPredicted)
	require.Positive(t, out.Timings["draft_n_accepted"])
	require.LessOrEqual(t, out.Timings["draft_n"], 5*out.Timings["predicted_runs"])
	require.Equal(t, 5.0, out.Settings["speculative.n_max"])
	require.Equal(t, 0.5, out.Settings["speculative.p_min"])
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
}
