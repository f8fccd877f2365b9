package server

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// ollama answers GET and HEAD / with 200 "Ollama is running" (its
// server/routes.go), which its clients probe to find a server; no key is
// asked, as ollama asks none.
func TestOllamaRootProbeReview2(t *testing.T) {
	_, url := start(t, Config{APIKey: "sekret"})
	resp, err := http.Get(url + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, string(body))
	require.Equal(t, "Ollama is running", string(body))
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")

	resp, err = http.Head(url + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)

	// Other paths are still unknown.
	resp, err = http.Get(url + "/nothing-here")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 404, resp.StatusCode)
}

// docs/api.md, "Unload a model": an empty prompt (or no messages) with
// keep_alive 0 is answered done with done_reason "unload". keep_alive is
// seconds as a number or a duration string.
func TestOllamaKeepAliveUnloadReview2(t *testing.T) {
	_, url := start(t, Config{})
	m := `"model":"` + ollamaModelName + `"`
	for _, c := range []struct{ path, body, reason string }{
		{"/api/generate", `{` + m + `,"keep_alive":0}`, "unload"},
		{"/api/generate", `{` + m + `,"keep_alive":"0s"}`, "unload"},
		{"/api/chat", `{` + m + `,"messages":[],"keep_alive":0}`, "unload"},
		{"/api/chat", `{` + m + `,"messages":[],"keep_alive":"0"}`, "unload"},
		{"/api/generate", `{` + m + `,"keep_alive":-1}`, "load"},
		{"/api/chat", `{` + m + `,"messages":[],"keep_alive":"10m"}`, "load"},
	} {
		code, out := post(t, url+c.path, c.body)
		require.Equal(t, 200, code, "%s: %v", c.body, out)
		require.Equal(t, true, out["done"], c.body)
		require.Equal(t, c.reason, out["done_reason"], c.body)
	}
	// The model is still there to answer.
	code, out := post(t, url+"/api/generate", `{`+m+`,"prompt":"ROMEO:","stream":false,"options":{"num_predict":2}}`)
	require.Equal(t, 200, code, out)
	require.Equal(t, 2.0, out["eval_count"])
}

// ollama reads options from a map of JSON values (api.Options.FromMap): an
// integer option takes any number, truncated (Python clients send
// 2048.0), and a value of the wrong type is refused with
// `option "NAME" must be of type integer` (or float32 for a number).
func TestOllamaOptionsTypesReview2(t *testing.T) {
	_, url := start(t, Config{})
	m := `"model":"` + ollamaModelName + `","prompt":"ROMEO:","stream":false,`
	for _, opts := range []string{
		`{"num_predict":3.0,"num_ctx":2048.0,"seed":42.0,"top_k":40.0,"repeat_last_n":64.0,"temperature":0}`,
		`{"num_predict":3.9,"temperature":0,"stop":null,"top_p":null}`, // truncated to 3; null leaves an option unset
	} {
		code, out := post(t, url+"/api/generate", `{`+m+`"options":`+opts+`}`)
		require.Equal(t, 200, code, "%s: %v", opts, out)
		require.Equal(t, 3.0, out["eval_count"], opts)
	}
	for _, c := range []struct{ opts, msg string }{
		{`{"num_predict":"5"}`, `option "num_predict" must be of type integer`},
		{`{"num_ctx":true}`, `option "num_ctx" must be of type integer`},
		{`{"temperature":"hot"}`, `option "temperature" must be of type float32`},
		{`{"top_p":[1]}`, `option "top_p" must be of type float32`},
	} {
		code, out := post(t, url+"/api/generate", `{`+m+`"options":`+c.opts+`}`)
		require.Equal(t, 400, code, "%s: %v", c.opts, out)
		require.Len(t, out, 1)
		require.Contains(t, out["error"], c.msg, c.opts)
	}
}

// parameter_size is written as ollama's format.HumanNumber writes it; the
// cases are ollama's own (format/format_test.go), and the fixture's count
// is reference.json's "params".
func TestOllamaParameterSizeReview2(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want string
	}{
		{0, "0"}, {999, "999"}, {1000, "1K"}, {1001, "1K"}, {1000000, "1M"}, {125000000, "125M"},
		{500500000, "500.50M"}, {500550000, "500.55M"}, {1000000000, "1B"}, {2800000000, "2.8B"},
		{2850000000, "2.9B"}, {1000000000000, "1000B"},
	} {
		require.Equal(t, c.want, gguf.HumanCount(c.n), "%d", c.n)
	}
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	var ref struct {
		Params uint64 `json:"params"`
	}
	require.NoError(t, json.Unmarshal(b, &ref))
	require.Equal(t, uint64(6425856), ref.Params)

	_, url := start(t, Config{})
	resp, err := http.Get(url + "/api/tags")
	require.NoError(t, err)
	defer resp.Body.Close()
	var tags struct {
		Models []struct {
			Details ollamaDetails `json:"details"`
		} `json:"models"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tags))
	require.Len(t, tags.Models, 1)
	require.Equal(t, "6.43M", tags.Models[0].Details.ParameterSize)
	require.Equal(t, "F16", tags.Models[0].Details.QuantizationLevel)
}
