package server

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// id_slot, as llama-server's: a request that names a slot runs there (and
// waits for it while it is busy), and every answer says which slot ran it,
// which /slots/{id} actions then name.
func TestNativeIDSlot(t *testing.T) {
	_, url := start(t, Config{Slots: 2})
	const prompt = `"prompt":"ROMEO: Is the day so young?","n_predict":4,"temperature":0`
	code, out := post(t, url+"/completion", `{`+prompt+`,"id_slot":1}`)
	require.Equal(t, 200, code, "%v", out)
	require.Equal(t, float64(1), out["id_slot"])
	require.Equal(t, float64(0), out["tokens_cached"])
	// Unpinned, the request goes where its prompt is cached.
	code, out = post(t, url+"/completion", `{`+prompt+`}`)
	require.Equal(t, 200, code, "%v", out)
	require.Equal(t, float64(1), out["id_slot"])
	require.Greater(t, out["tokens_cached"], float64(0))
	// Pinned to the other slot, it runs there, from nothing.
	code, out = post(t, url+"/completion", `{`+prompt+`,"id_slot":0}`)
	require.Equal(t, 200, code, "%v", out)
	require.Equal(t, float64(0), out["id_slot"])
	require.Equal(t, float64(0), out["tokens_cached"])

	// Many at once pinned to slot 0 wait their turn there (deferred while
	// it is busy), while the others go to either slot.
	type answer struct {
		code int
		out  map[string]any
		pin  bool
	}
	answers := make(chan answer, 8)
	for i := range 8 {
		pin := i%2 == 0
		body := `{"prompt":"JULIET:","n_predict":24,"temperature":0}`
		if pin {
			body = `{"prompt":"JULIET:","n_predict":24,"temperature":0,"id_slot":0}`
		}
		go func() {
			code, out := post(t, url+"/completion", body)
			answers <- answer{code, out, pin}
		}()
	}
	var texts []string
	for range 8 {
		a := <-answers
		require.Equal(t, 200, a.code, "%v", a.out)
		if a.pin {
			require.Equal(t, float64(0), a.out["id_slot"])
		} else {
			require.Contains(t, []any{float64(0), float64(1)}, a.out["id_slot"])
		}
		texts = append(texts, a.out["content"].(string))
	}
	for _, x := range texts {
		require.Equal(t, texts[0], x, "greedy: the same text on either slot")
	}
}
