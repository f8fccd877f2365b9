package server

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// openStream starts a streaming /completion and returns once its first
// event came; the request runs until ctx is cancelled.
func openStreamR5(t *testing.T, ctx context.Context, url, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/completion", strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			break
		}
	}
	go func() {
		<-ctx.Done()
		resp.Body.Close()
	}()
}

func waitForR5(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A request waiting for a slot (queued, or pinned with id_slot) must run
// once the request in that slot is cancelled by its client, even when no
// other request arrives to wake the scheduler. Here slot 0 runs A, then B
// (pinned) after A's client left, and C must run after B's client left.
func TestWaitingRequestRunsAfterCancelledSlot(t *testing.T) {
	for _, pin := range []bool{true, false} {
		t.Run(map[bool]string{true: "id_slot", false: "queued"}[pin], func(t *testing.T) {
			s, url := start(t, Config{Slots: 1, ContextShift: true})
			t.Cleanup(s.Close) // before the HTTP server's, which waits for a hung handler
			long := `{"prompt":"ROMEO:","n_predict":100000,"stream":true,"id_slot":0}`
			ctxA, cancelA := context.WithCancel(context.Background())
			defer cancelA()
			openStreamR5(t, ctxA, url, long)

			ctxB, cancelB := context.WithCancel(context.Background())
			defer cancelB()
			bStarted := make(chan struct{})
			go func() {
				openStreamR5(t, ctxB, url, long)
				close(bStarted)
			}()
			type answer struct {
				code int
				out  map[string]any
			}
			cDone := make(chan answer, 1)
			body := `{"prompt":"JULIET:","n_predict":4,"temperature":0}`
			if pin {
				body = `{"prompt":"JULIET:","n_predict":4,"temperature":0,"id_slot":0}`
			}
			waitForR5(t, "B queued", func() bool { return s.metrics.requests.Load() == 2 })
			go func() {
				code, out := post(t, url+"/completion", body)
				cDone <- answer{code, out}
			}()
			// B and C wait (deferred or queued) behind A.
			waitForR5(t, "C queued", func() bool { return s.metrics.requests.Load() == 3 })
			time.Sleep(50 * time.Millisecond)
			cancelA()
			select {
			case <-bStarted:
			case <-time.After(20 * time.Second):
				t.Fatal("B did not start after A's client left")
			}
			cancelB()
			select {
			case a := <-cDone:
				require.Equal(t, 200, a.code, "%v", a.out)
				require.Equal(t, float64(0), a.out["id_slot"])
			case <-time.After(20 * time.Second):
				t.Fatal("C never ran after B's client left: the scheduler waits for a wake-up that does not come")
			}
		})
	}
}
