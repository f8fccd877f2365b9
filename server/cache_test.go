package server

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func cachedTokens(out map[string]any) int {
	return int(out["usage"].(map[string]any)["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64))
}

func chatBody(msgs [][2]string, extra string) string {
	body := `{"temperature":0,"max_tokens":24` + extra + `,"messages":[`
	for i, m := range msgs {
		if i > 0 {
			body += ","
		}
		body += fmt.Sprintf(`{"role":%q,"content":%q}`, m[0], m[1])
	}
	return body + "]}"
}

// A chat's next turn repeats the last turn's prompt and reply: the slot
// keeps them and runs only the new tokens, and the reply is the one the
// whole templated prompt gets from pinfer run.
func TestChatTurnReusesCache(t *testing.T) {
	_, url := start(t, Config{})
	turn1 := [][2]string{{"user", "Who art thou?"}}
	code, out := post(t, url+"/v1/chat/completions", chatBody(turn1, ""))
	require.Equal(t, 200, code, out)
	reply := completionText(t, out)
	require.NotEmpty(t, reply)
	first := int(out["usage"].(map[string]any)["prompt_tokens"].(float64))

	turn2 := append(turn1, [2]string{"assistant", reply}, [2]string{"user", "Speak again."})
	code, out = post(t, url+"/v1/chat/completions", chatBody(turn2, ""))
	require.Equal(t, 200, code, out)
	prompt := int(out["usage"].(map[string]any)["prompt_tokens"].(float64))
	tm := out["timings"].(map[string]any)
	cached := cachedTokens(out)
	require.GreaterOrEqual(t, cached, first, "the first turn's prompt is kept")
	require.Equal(t, float64(cached), tm["cache_n"])
	require.Equal(t, float64(prompt-cached), tm["prompt_n"])
	want := runText(t, "user: Who art thou?\nassistant:"+reply+"\nuser: Speak again.\nassistant:", 24)
	require.Equal(t, want, completionText(t, out))

	// cache_prompt false runs the whole prompt, to the same text.
	code, out = post(t, url+"/v1/chat/completions", chatBody(turn2, `,"cache_prompt":false`))
	require.Equal(t, 200, code, out)
	require.Equal(t, 0, cachedTokens(out))
	require.Equal(t, float64(prompt), out["timings"].(map[string]any)["prompt_n"])
	require.Equal(t, want, completionText(t, out))
}

// Two conversations on two slots each come back to their own slot, so
// neither's cache is lost to the other.
func TestSlotsKeepTheirConversations(t *testing.T) {
	_, url := start(t, Config{Slots: 2})
	a := [][2]string{{"user", "ROMEO, what news?"}}
	b := [][2]string{{"user", "Good morrow, cousin."}}
	for round := range 3 {
		for _, conv := range []*[][2]string{&a, &b} {
			code, out := post(t, url+"/v1/chat/completions", chatBody(*conv, ""))
			require.Equal(t, 200, code, out)
			if round > 0 {
				require.Greater(t, cachedTokens(out), 10, "round %d: the conversation's slot kept it", round)
			}
			*conv = append(*conv, [2]string{"assistant", completionText(t, out)}, [2]string{"user", "And then?"})
		}
	}
}
