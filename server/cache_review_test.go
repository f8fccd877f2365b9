package server

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Review of the prompt cache's slot choice (freeSlot), failing as written
// (server/scheduler.go is not changed here).
//
// llama-server picks the free slot whose cached tokens the prompt shares
// most of, if the shared prefix is more than --slot-prompt-similarity (0.5)
// of THE SLOT'S CACHED TOKENS (server.cpp get_available_slot:
// cur_similarity = cur_lcs_len / slot.cache_tokens.size()). pinfer divides
// by the new prompt's length instead (2*n <= len(j.prompt) in freeSlot), so
// a conversation's next turn whose new part is at least as long as what
// came before (a pasted paragraph) is not given its own slot: it goes to
// the least recently used one, runs its whole prompt again, and evicts the
// other conversation cached there, whose next turn then runs in full too.
//
// The fix: in freeSlot, compare n with the slot's cached token count,
// sl.sess.Pos() (its token list is as long), as "2*n <= sl.sess.Pos()",
// keeping the largest n first.
func TestCacheReviewSlotChosenByShareOfItsOwnCache(t *testing.T) {
	_, url := start(t, Config{Slots: 2})
	chat := func(conv [][2]string) (reply string, prompt, cached int) {
		t.Helper()
		code, out := post(t, url+"/v1/chat/completions", chatBody(conv, ""))
		require.Equal(t, 200, code, out)
		return completionText(t, out), int(out["usage"].(map[string]any)["prompt_tokens"].(float64)), cachedTokens(out)
	}
	a := [][2]string{{"user", "ROMEO, what news?"}}
	b := [][2]string{{"user", "Good morrow, cousin."}}

	ra, _, _ := chat(a) // slot 0
	rb, _, _ := chat(b) // slot 1, the least recently used
	a = append(a, [2]string{"assistant", ra}, [2]string{"user", "And then?"})
	ra, promptA2, _ := chat(a) // slot 0 again: it holds most of the prompt
	// A long turn: the new tokens outnumber those slot 0 holds.
	long := strings.Repeat("Tell me of the king, the queen, the duke and all the court of fair Verona. ", 5)
	a = append(a, [2]string{"assistant", ra}, [2]string{"user", long})
	_, promptA3, cachedA3 := chat(a)
	require.Greater(t, promptA3-promptA2, promptA2, "the test needs a turn longer than the conversation before it")
	require.GreaterOrEqual(t, cachedA3, promptA2,
		"conversation A's slot holds all of its last prompt: its long turn should run only the new tokens")

	// Conversation B's slot was not taken, so its cache is still there.
	b = append(b, [2]string{"assistant", rb}, [2]string{"user", "And then?"})
	_, _, cachedB2 := chat(b)
	require.Greater(t, cachedB2, 10, "conversation B's slot kept its first turn")
}
