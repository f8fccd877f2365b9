package server

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkServe measures aggregate generation throughput over HTTP with 1,
// 4 and 8 concurrent clients, each on its own slot, each asking for 64
// tokens: tokens/s is all clients' completion tokens over the wall time.
func BenchmarkServe(b *testing.B) {
	const perClient = 64
	for _, clients := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			_, url := start(b, Config{Slots: clients})
			body := mustJSON(map[string]any{"prompt": "ROMEO:", "max_tokens": perClient, "temperature": 0.8, "seed": 1})
			var tokens int
			var elapsed time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				var wg sync.WaitGroup
				var mu sync.Mutex
				for range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						code, out := post(b, url+"/v1/completions", body)
						if code != 200 {
							b.Errorf("status %d: %v", code, out)
							return
						}
						mu.Lock()
						tokens += int(out["usage"].(map[string]any)["completion_tokens"].(float64))
						mu.Unlock()
					}()
				}
				wg.Wait()
				elapsed += time.Since(t0)
			}
			b.ReportMetric(float64(tokens)/elapsed.Seconds(), "tokens/s")
		})
	}
}
