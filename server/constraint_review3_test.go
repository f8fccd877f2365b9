package server

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// review3Grammars are request grammars that Parse takes (or tries to)
// and that then end the whole server process:
//   - explode: no left recursion, but its start state alone holds 2^13
//     stacks, more than the matcher's 4096: automaton.start returns nil,
//     NewMatcher keeps it, and the first Pick in prefill dereferences it
//     (a nil-pointer panic on the scheduler goroutine, which has no
//     recover).
//   - deep: a million nested groups (2 MB, inside the 4 MiB body limit):
//     Parse's recursion overflows the 1 GB goroutine stack, a fatal
//     error no recover could catch.
func review3Grammars() map[string]string {
	var b strings.Builder
	b.WriteString("root ::= r13\nr0 ::= \"x\"\n")
	for k := 1; k <= 13; k++ {
		fmt.Fprintf(&b, "r%d ::= r%d r%d | \"\"\n", k, k-1, k-1)
	}
	const d = 1000000
	return map[string]string{
		"explode": b.String(),
		"deep":    "root ::= " + strings.Repeat("(", d) + `"a"` + strings.Repeat(")", d),
	}
}

// A request's grammar is refused (400) or fails its own request (500),
// and the server answers the next request: it never brings the process
// down. Each grammar is sent by a child process, whose crash is this
// test's failure rather than the end of the package's tests.
func TestReview3BadGrammarCannotKillServer(t *testing.T) {
	if name := os.Getenv("PINFER_REVIEW3_GRAMMAR"); name != "" {
		_, url := start(t, Config{})
		body, _ := json.Marshal(map[string]any{"prompt": "ROMEO:", "max_tokens": 4, "grammar": review3Grammars()[name]})
		code, out := post(t, url+"/v1/completions", string(body))
		require.Contains(t, []int{400, 500}, code, "%v", out)
		code, out = post(t, url+"/v1/completions", `{"prompt":"ROMEO:","max_tokens":2}`)
		require.Equal(t, 200, code, "%v", out)
		fmt.Println("REVIEW3 SERVER ALIVE")
		return
	}
	for name := range review3Grammars() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestReview3BadGrammarCannotKillServer$", "-test.v")
			cmd.Env = append(os.Environ(), "PINFER_REVIEW3_GRAMMAR="+name)
			out, err := cmd.CombinedOutput()
			head := string(out)
			if i := strings.Index(head, "goroutine "); i > 0 {
				head = head[:min(len(head), i+400)]
			}
			require.NoError(t, err, "the %s grammar ended the server process:\n%s", name, head)
			require.Contains(t, string(out), "REVIEW3 SERVER ALIVE")
		})
	}
}

// The explosive grammar is refused where the request is read, as any
// grammar the matcher cannot follow should be (a 400 naming "grammar"),
// rather than compiled and left to fail when a slot samples.
func TestReview3ConstraintRefusesGrammarTooAmbiguousToStart(t *testing.T) {
	src := review3Grammars()["explode"]
	g, e := constraint(&samplingFields{Grammar: &src})
	require.True(t, g == nil, "compiled a grammar whose start state the matcher cannot hold")
	require.NotNil(t, e)
	require.Equal(t, 400, e.Status)
	require.NotNil(t, e.Param)
	require.Equal(t, "grammar", *e.Param)
}
