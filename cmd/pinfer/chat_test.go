package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func pinferStdin(t *testing.T, stdin string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	require.NoError(t, cmd.Run(), e.String())
	return o.String(), e.String()
}

// greedy is pinfer run's greedy text for a whole prompt.
func greedy(t *testing.T, prompt string, n int) string {
	out, stderr, code := pinfer(t, "run", "--json", "--temp", "0", "--predictor", "dense", "-n", strconv.Itoa(n), "-p", prompt)
	require.Equal(t, 0, code, stderr)
	var res struct{ Text string }
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	return res.Text
}

// Each reply of a conversation is what run gives the whole conversation so
// far, rendered by the chat template (the built-in model has none: the
// default "role: text" lines), though later turns run only their new
// tokens. Dense: with a predictor, the kept positions' FFNs ran on each
// token's own guess where a whole prompt's prefill runs their union, which
// may change the text as any sparse approximation does.
func TestConversationTurnsMatchRun(t *testing.T) {
	out, stderr := pinferStdin(t, "Speak \\\nagain.\n", "run", "-cnv", "-sys", "Be brief.", "-p", "Who art thou?", "-n", "16", "--temp", "0", "--predictor", "dense")
	parts := strings.Split(out, "\n> ")
	require.Len(t, parts, 3, out)
	require.True(t, strings.HasPrefix(parts[0], "> Who art thou?\n"), out)
	reply1 := strings.TrimSuffix(strings.TrimPrefix(parts[0], "> Who art thou?\n"), "\n")
	reply2 := strings.TrimSuffix(parts[1], "\n")
	require.Equal(t, "", parts[2], "the last prompt waits for a turn that never comes")

	conv := "system: Be brief.\nuser: Who art thou?\nassistant:"
	require.Equal(t, greedy(t, conv, 16), reply1)
	require.True(t, strings.HasPrefix(reply1, " "), "the template adds no space to a reply that has one")
	conv += reply1 + "\nuser: Speak \nagain.\nassistant:"
	require.Equal(t, greedy(t, conv, 16), reply2)

	m := regexp.MustCompile(`cached +=\s+(\d+) prompt tokens`).FindStringSubmatch(stderr)
	require.NotNil(t, m, stderr)
	cached, _ := strconv.Atoi(m[1])
	require.Greater(t, cached, 10, "the second turn kept the first's tokens")
}

func TestConversationRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-cnv", "--json"}, "--conversation prints the replies as they come"},
		{[]string{"run", "-cnv", "--prompt-ids", "1,2"}, "not --prompt-ids"},
		{[]string{"run", "-sys", "Be brief.", "-p", "x"}, "are for --conversation"},
		{[]string{"run", "-cnv", "--chat-template-file", "/nonexistent/t.jinja"}, "--chat-template-file: open /nonexistent/t.jinja"},
	} {
		_, stderr, code := pinfer(t, c.args...)
		require.NotEqual(t, 0, code, c.args)
		require.Contains(t, stderr, c.want, c.args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
	}
}
