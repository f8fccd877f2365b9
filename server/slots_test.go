package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

func slotPost(t *testing.T, url string, id, action, body string) (int, map[string]any) {
	t.Helper()
	return post(t, url+"/slots/"+id+"?action="+action, body)
}

func errorOf(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	e, ok := out["error"].(map[string]any)
	require.True(t, ok, "no error object: %v", out)
	return e
}

// A conversation's slot saved to a file, erased, and restored into the
// other slot: the next request that continues it goes to that slot, not to
// the one least recently used, runs only its new token (timings.cache_n),
// and goes on to PyTorch's greedy text.
func TestSlotSaveEraseRestore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "slots") // made by the server
	_, url := start(t, Config{Slots: 2, SlotSavePath: dir})
	p := loadReference(t).Prompts[1]

	// Slot 0 runs the prompt and 7 tokens, slot 1 another text.
	code, out := post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": p.Text, "max_tokens": 7, "temperature": 0}))
	require.Equal(t, 200, code, out)
	first := completionText(t, out)
	code, out = post(t, url+"/v1/completions", `{"prompt":"Good morrow, cousin.","max_tokens":4,"temperature":0}`)
	require.Equal(t, 200, code, out)

	held := len(p.IDs) + 6 // the last token generated never ran
	code, out = slotPost(t, url, "0", "save", `{"filename":"romeo.bin"}`)
	require.Equal(t, 200, code, out)
	st, err := os.Stat(filepath.Join(dir, "romeo.bin"))
	require.NoError(t, err)
	require.Equal(t, float64(0), out["id_slot"])
	require.Equal(t, "romeo.bin", out["filename"])
	require.Equal(t, float64(held), out["n_saved"])
	require.Equal(t, float64(st.Size()), out["n_written"])
	require.Contains(t, out["timings"], "save_ms")

	code, out = slotPost(t, url, "0", "erase", "")
	require.Equal(t, 200, code, out)
	require.Equal(t, map[string]any{"id_slot": float64(0), "n_erased": float64(held)}, out)

	code, out = slotPost(t, url, "1", "restore", `{"filename":"romeo.bin"}`)
	require.Equal(t, 200, code, out)
	require.Equal(t, float64(1), out["id_slot"])
	require.Equal(t, "romeo.bin", out["filename"])
	require.Equal(t, float64(held), out["n_restored"])
	require.Equal(t, float64(st.Size()), out["n_read"])
	require.Contains(t, out["timings"], "restore_ms")

	// Slot 0 is empty and the least recently used: only slot 1's cache
	// can give the prompt's tokens.
	prompt := append(append([]int(nil), p.IDs...), p.GreedyIDs[:7]...)
	n := len(p.GreedyIDs) - 7
	code, out = post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": prompt, "max_tokens": n, "temperature": 0}))
	require.Equal(t, 200, code, out)
	tm := out["timings"].(map[string]any)
	require.Equal(t, float64(held), tm["cache_n"])
	require.Equal(t, float64(1), tm["prompt_n"])
	require.Equal(t, held, cachedTokens(out))
	require.Equal(t, p.GreedyText, strings.TrimPrefix(first+completionText(t, out), " "))
}

// An action on a slot that is generating waits until it is free, as
// llama-server defers it: the file then holds the whole request.
func TestSlotSaveWaitsForBusySlot(t *testing.T) {
	_, url := start(t, Config{SlotSavePath: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 300
	body := mustJSON(map[string]any{"prompt": "ROMEO:", "max_tokens": n, "temperature": 0, "stream": true})
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n') // the first event: the request holds the slot
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "data: "), line)

	type result struct {
		code int
		body []byte
		err  error
	}
	saved := make(chan result, 1)
	go func() {
		resp, err := http.Post(url+"/slots/0?action=save", "application/json", strings.NewReader(`{"filename":"busy.bin"}`))
		if err != nil {
			saved <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		saved <- result{resp.StatusCode, b, err}
	}()
	events, done := sseEvents(t, br)
	require.True(t, done)
	require.NotEmpty(t, events)
	r := <-saved
	require.NoError(t, r.err)
	require.Equal(t, 200, r.code, "%s", r.body)
	var out map[string]any
	require.NoError(t, json.Unmarshal(r.body, &out))
	require.Equal(t, float64(3+n-1), out["n_saved"], "saved after the request, not in the middle of it")
}

// Without --slot-save-path the actions are a 501; bad slot ids, actions and
// file names a 400; a file that is not there a 404; a file of another
// model, a truncated one and one of something else a 400 saying so.
func TestSlotActionErrors(t *testing.T) {
	_, bare := start(t, Config{})
	code, out := slotPost(t, bare, "0", "save", `{"filename":"a.bin"}`)
	require.Equal(t, 501, code, out)
	require.Equal(t, "not_supported_error", errorOf(t, out)["type"])
	require.Contains(t, errorOf(t, out)["message"], "--slot-save-path")

	dir := t.TempDir()
	_, url := start(t, Config{SlotSavePath: dir})
	for _, c := range []struct {
		id, action, body string
		status           int
		param, want      string
	}{
		{"1", "save", `{"filename":"a.bin"}`, 400, "id_slot", "invalid slot id"},
		{"x", "erase", ``, 400, "id_slot", "invalid slot id"},
		{"-1", "erase", ``, 400, "id_slot", "invalid slot id"},
		{"0", "dump", `{"filename":"a.bin"}`, 400, "action", "invalid action"},
		{"0", "", `{"filename":"a.bin"}`, 400, "action", "invalid action"},
		{"0", "save", `{}`, 400, "filename", "filename is required"},
		{"0", "save", `{"filename":"../a.bin"}`, 400, "filename", "invalid filename"},
		{"0", "save", `{"filename":"sub/a.bin"}`, 400, "filename", "invalid filename"},
		{"0", "restore", `{"filename":"a\\b.bin"}`, 400, "filename", "invalid filename"},
		{"0", "restore", `{"filename":".."}`, 400, "filename", "invalid filename"},
		{"0", "restore", `{"filename":""}`, 400, "filename", "invalid filename"},
		{"0", "restore", `{"filename":".hidden"}`, 400, "filename", "invalid filename"},
		{"0", "restore", `{"filename":"a\nb"}`, 400, "filename", "invalid filename"},
		{"0", "restore", `{"filename":"missing.bin"}`, 404, "", "missing.bin"},
		{"0", "save", `{"filename":7}`, 400, "filename", "invalid type"},
	} {
		code, out := slotPost(t, url, c.id, c.action, c.body)
		require.Equal(t, c.status, code, "%+v: %v", c, out)
		e := errorOf(t, out)
		require.Contains(t, e["message"], c.want, "%+v", c)
		if c.param != "" {
			require.Equal(t, c.param, e["param"], "%+v", c)
		}
	}
	require.NoFileExists(t, filepath.Join(filepath.Dir(dir), "a.bin"))

	// A state of another model (stories260K's).
	other, err := engine.Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer other.Close()
	sess := other.NewSession(16, nil)
	_, err = sess.Forward([]int{1, 403, 407}, false)
	require.NoError(t, err)
	_, err = sess.SaveStateFile(filepath.Join(dir, "stories.bin"))
	require.NoError(t, err)
	// A good file cut short, and one of something else.
	_, out = post(t, url+"/v1/completions", `{"prompt":"ROMEO:","max_tokens":2,"temperature":0}`)
	code, out = slotPost(t, url, "0", "save", `{"filename":"good.bin"}`)
	require.Equal(t, 200, code, out)
	good, err := os.ReadFile(filepath.Join(dir, "good.bin"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "short.bin"), good[:len(good)-10], 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "junk.bin"), []byte("GGUF, not a slot"), 0o644))
	for file, want := range map[string]string{"stories.bin": "model mismatch", "short.bin": "truncated", "junk.bin": "not a pinfer state file"} {
		code, out := slotPost(t, url, "0", "restore", `{"filename":"`+file+`"}`)
		require.Equal(t, 400, code, "%s: %v", file, out)
		require.Contains(t, errorOf(t, out)["message"], want, file)
		require.NotContains(t, errorOf(t, out)["message"], "\n")
	}
	// The good file still restores.
	code, out = slotPost(t, url, "0", "restore", `{"filename":"good.bin"}`)
	require.Equal(t, 200, code, out)
	require.Equal(t, float64(3+1), out["n_restored"])
}
