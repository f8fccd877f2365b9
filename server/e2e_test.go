package server

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// pinferBinary builds cmd/pinfer once into a temporary directory.
func pinferBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pinfer-serve-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "pinfer")
		if out, err := exec.Command("go", "build", "-o", binPath, "../cmd/pinfer").CombinedOutput(); err != nil {
			binErr = &buildError{string(out)}
		}
	})
	require.NoError(t, binErr)
	return binPath
}

type buildError struct{ out string }

func (e *buildError) Error() string { return "go build ./cmd/pinfer: " + e.out }

// The Node tests (server/e2e) drive `pinfer serve` with the official openai
// package (chat, streaming, completion, 8 concurrent streams, an abort, tool
// calls) and its ollama API with the official ollama package.
func TestE2EOpenAIClient(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed for the end-to-end tests: %v", tool, err)
		}
	}
	bin := pinferBinary(t)
	_, errOpenAI := os.Stat("e2e/node_modules/openai")
	if _, err := os.Stat("e2e/node_modules/ollama"); err != nil || errOpenAI != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = "e2e"
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm ci in server/e2e:\n%s", out)
	}
	cmd := exec.Command("node", "--test", "serve.test.mjs")
	cmd.Dir = "e2e"
	cmd.Env = append(os.Environ(), "PINFER_BIN="+bin)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "node --test serve.test.mjs:\n%s", out)
	t.Logf("%s", lastLines(string(out), 8))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// serveProcess starts the binary and returns it with its base URL.
func serveProcess(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(pinferBinary(t), append([]string{"serve", "--host", "127.0.0.1", "--port", "0", "-t", "2"}, args...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	re := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)`)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, stderr)
			return cmd, m[1]
		}
	}
	t.Fatal("pinfer serve printed no address")
	return nil, ""
}

func exitCode(t *testing.T, cmd *exec.Cmd, within time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		require.NoError(t, err)
		return 0
	case <-time.After(within):
		t.Fatalf("pinfer serve did not exit within %v", within)
		return -1
	}
}

func openStream(t *testing.T, url string, maxTokens int) io.ReadCloser {
	t.Helper()
	body := `{"prompt":"ROMEO:","max_tokens":` + strconv.Itoa(maxTokens) + `,"stream":true}`
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	buf := make([]byte, 32)
	_, err = resp.Body.Read(buf) // generation has begun
	require.NoError(t, err)
	return resp.Body
}

// SIGTERM stops new connections, lets a stream in flight finish, and exits 0.
func TestE2EGracefulShutdownFinishesStreams(t *testing.T) {
	cmd, url := serveProcess(t, "-np", "2")
	body := openStream(t, url, 120)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	rest, err := io.ReadAll(body)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(string(rest), "data: [DONE]\n\n"), "stream did not finish: ...%s", lastLines(string(rest), 3))
	require.Contains(t, string(rest), `"finish_reason":"length"`)
	require.Equal(t, 0, exitCode(t, cmd, 10*time.Second))
	_, err = http.Get(url + "/health")
	require.Error(t, err, "still accepting after shutdown")
}

// When the grace period runs out, the streams left are cancelled with an
// error event and the server still exits 0. The stream asks for far more
// tokens than the grace period lets through (the fixture decodes ~3000 a
// second here): with 500 tokens and 200 ms, a faster decode finished first.
func TestE2EGracefulShutdownCancelsAfterTimeout(t *testing.T) {
	cmd, url := serveProcess(t, "--shutdown-timeout", "50ms", "-c", "2048")
	body := openStream(t, url, 2000)
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	rest, err := io.ReadAll(body)
	require.NoError(t, err)
	require.Contains(t, string(rest), `"error":{"message":"the server is shutting down"`)
	require.Equal(t, 0, exitCode(t, cmd, 10*time.Second))
	require.Less(t, time.Since(start), 5*time.Second)
}
