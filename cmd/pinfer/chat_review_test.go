package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pinferStdinCode is pinferStdin that also returns a failing exit code.
func pinferStdinCode(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return o.String(), e.String(), code
}

// sampled is pinfer run's text for a whole prompt, drawn with seed.
func sampled(t *testing.T, prompt string, n int, seed int) string {
	out, stderr, code := pinfer(t, "run", "--json", "--temp", "0.8", "--seed", strconv.Itoa(seed), "--predictor", "dense", "-n", strconv.Itoa(n), "-p", prompt)
	require.Equal(t, 0, code, stderr)
	var res struct{ Text string }
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	return res.Text
}

// replies splits a conversation's standard output into its replies, the
// "> " of each turn (an ignored empty line's included) dropped.
func replies(t *testing.T, out, first string) []string {
	t.Helper()
	require.True(t, strings.HasPrefix(out, "> "+first+"\n"), out)
	var rs []string
	for _, p := range strings.Split(strings.TrimPrefix(out, "> "+first+"\n"), "\n> ") {
		if p != "" {
			rs = append(rs, strings.TrimSuffix(p, "\n"))
		}
	}
	return rs
}

// Reply k of a conversation drawn with --seed S is what run draws with seed
// S+k for the conversation so far, whatever empty lines the user typed
// between turns: an empty line is no turn (it was counted as one, so the
// reply after it drew with S+2).
func TestConversationEmptyLineKeepsTheSeedsReview(t *testing.T) {
	out, stderr, code := pinferStdinCode(t, "\n\nSpeak again.\n", "run", "-cnv", "-p", "Who art thou?", "-n", "12", "--temp", "0.8", "--seed", "7", "--predictor", "dense")
	require.Equal(t, 0, code, stderr)
	rs := replies(t, out, "Who art thou?")
	require.Len(t, rs, 2, out)
	conv := "user: Who art thou?\nassistant:"
	require.Equal(t, sampled(t, conv, 12, 7), rs[0])
	conv += rs[0] + "\nuser: Speak again.\nassistant:"
	require.Equal(t, sampled(t, conv, 12, 8), rs[1])
}

// A turn too long for what is left of the context is refused, and the
// conversation goes on without it: the next turn's reply is run's for the
// conversation without the long turn. (It ended the whole conversation with
// an error and no timings, where a reply that fills the context ends it
// with the timings.)
func TestConversationTurnTooLongIsDroppedReview(t *testing.T) {
	long := strings.Repeat("and what say you to the king of England now, ", 12)
	out, stderr, code := pinferStdinCode(t, long+"\nSpeak again.\n", "run", "-cnv", "-p", "Who art thou?", "-c", "64", "-n", "8", "--temp", "0", "--predictor", "dense")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "does not fit")
	require.Contains(t, stderr, "prompt eval", "the timings close the conversation")
	rs := replies(t, out, "Who art thou?")
	require.Len(t, rs, 2, out)
	conv := "user: Who art thou?\nassistant:"
	require.Equal(t, greedy(t, conv, 8), rs[0])
	conv += rs[0] + "\nuser: Speak again.\nassistant:"
	require.Equal(t, greedy(t, conv, 8), rs[1])
}

// llama-cli renders the system prompt with the chat template as it starts;
// a template that refuses a system message fails there, before the user
// has typed a turn (it failed only after the first turn was typed).
func TestConversationTemplateRefusesSystemAtStartReview(t *testing.T) {
	tpl := t.TempDir() + "/nosys.jinja"
	require.NoError(t, os.WriteFile(tpl, []byte(`{% for message in messages %}{% if message['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{{ message['role'] + ': ' + message['content'] + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}`), 0o644))
	out, stderr, code := pinferStdinCode(t, "hello\n", "run", "-cnv", "-sys", "Be brief.", "--chat-template-file", tpl, "-n", "4", "--temp", "0")
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "System role not supported")
	require.NotContains(t, out, ">", "no turn was asked for")

	// Without a system message the same template serves.
	out, stderr, code = pinferStdinCode(t, "hello\n", "run", "-cnv", "--chat-template-file", tpl, "-n", "4", "--temp", "0", "--predictor", "dense")
	require.Equal(t, 0, code, stderr)
	require.Len(t, strings.Split(out, "\n> "), 3, out)
}
