package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/server"
	"github.com/spf13/cobra"
)

func serveCmd() *cobra.Command {
	var mf modelFlags
	var cfg server.Config
	var g gpuFlags
	var df draftFlags
	var host string
	var port int
	var grace time.Duration
	var templateFile string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the model over OpenAI's HTTP API (chat, completions, streaming)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLengths(cfg.DefaultMaxTokens, cfg.Ctx); err != nil {
				return err
			}
			if cfg.DefaultMaxTokens == 0 {
				return errors.New("-n 0: want a count of at least 1, or -1 for until the context is full")
			}
			if cfg.Slots < 1 {
				return fmt.Errorf("--parallel %d: want at least 1 slot", cfg.Slots)
			}
			if grace < 0 {
				return fmt.Errorf("--shutdown-timeout %v: want 0 or more", grace)
			}
			if err := df.check(cfg.Lookup); err != nil {
				return err
			}
			m, pred, err := mf.loadPredicted()
			if err != nil {
				return err
			}
			defer m.Close()
			release, err := attachGPU(m, &mf, &g)
			if err != nil {
				return err
			}
			defer release()
			cfg.Threads = mf.threads
			// The same predictor as run's, on the runner all slots share.
			cfg.Prepare = func(r *graph.Runner) error { r.Predictor = pred; return nil }
			if cfg.ChatTemplate, err = readTemplate(templateFile); err != nil {
				return err
			}
			if df.path != "" {
				d, dpred, err := df.load(mf.noRepack)
				if err != nil {
					return err
				}
				defer d.Close()
				cfg.Draft, cfg.DraftPredictor, cfg.DraftMax, cfg.DraftPMin = d, dpred, df.max, df.pmin
			}
			srv, err := server.New(m, cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			if w := m.PastTraining(srv.NCtx()); w != "" {
				fmt.Fprintln(os.Stderr, w)
			}
			// Catch the signals before anyone can connect: a SIGTERM that
			// arrives first would otherwise kill a stream in flight.
			sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				return err
			}
			hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
			served := make(chan error, 1)
			go func() { served <- hs.Serve(ln) }()
			fmt.Fprintf(os.Stderr, "pinfer: serving %s on http://%s (%d slots, context %d per slot)\n",
				srv.ModelName(), ln.Addr(), max(cfg.Slots, 1), srv.NCtx())
			select {
			case err := <-served:
				return err
			case <-sig.Done():
			}
			// Graceful: stop accepting, let the streams in flight finish for
			// up to the grace period, then cancel what is left.
			fmt.Fprintln(os.Stderr, "pinfer: shutting down")
			srv.Drain()
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			if err := hs.Shutdown(ctx); err != nil {
				srv.CancelAll()
				ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel2()
				if err := hs.Shutdown(ctx2); err != nil {
					hs.Close()
				}
			}
			if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	mf.add(c)
	g.add(c)
	df.add(c)
	fl := c.Flags()
	fl.StringVar(&host, "host", "127.0.0.1", "address to listen on")
	fl.IntVar(&port, "port", 8080, "port to listen on (0: any free port, printed at start)")
	fl.IntVar(&cfg.Lookup, "lookup", 0, "prompt lookup decoding, as run --lookup: each slot drafts up to N tokens a step from where its text's last tokens occurred before, checked in the step's pass (the text is the same)")
	fl.IntVar(&cfg.Slots, "parallel", 1, "slots: requests decoded together; more wait in a queue (also -np)")
	fl.IntVarP(&cfg.Ctx, "ctx-size", "c", 0, "context size of each slot (default: the model's, at most 4096)")
	fl.IntVarP(&cfg.DefaultMaxTokens, "n-predict", "n", -1, "tokens to generate when a request sets no max_tokens (-1: until the context is full)")
	fl.StringVar(&cfg.APIKey, "api-key", "", "require \"Authorization: Bearer KEY\" on every endpoint but /health")
	fl.StringVar(&cfg.ModelName, "alias", "", "model id served in /v1/models (default: the file name without .gguf)")
	fl.StringVar(&templateFile, "chat-template-file", "", "a Jinja chat template to use instead of the model's tokenizer.chat_template")
	fl.BoolVar(&cfg.ContextShift, "context-shift", false, "a request whose max_tokens (num_predict) runs past its slot's context goes on, the older half of what follows the prompt's first n_keep tokens dropped (llama-server's --context-shift); without it such a request is refused")
	fl.StringVar(&cfg.SlotSavePath, "slot-save-path", "", "directory of the slot files that POST /slots/{id}?action=save|restore writes and reads (llama-server's; made if missing); without it slot actions get a 501")
	fl.StringVar(&cfg.Pooling, "pooling", server.PoolingMean, "how /v1/embeddings and /api/embed pool a text's hidden states: mean, last or cls (the first token's)")
	fl.DurationVar(&grace, "shutdown-timeout", 10*time.Second, "on SIGTERM/SIGINT, how long streams in flight may run before they are cancelled")
	return c
}

// llamaFlags are llama.cpp's multi-letter flags after one dash, by command:
// pflag cannot declare them, so they are rewritten to pinfer's names.
var llamaFlags = map[string]map[string]string{
	"serve": {"-np": "--parallel", "-ctk": "--kv-type", "-md": "--model-draft", "--draft": "--draft-max", "--draft-n": "--draft-max"},
	"run":   {"-ctk": "--kv-type", "-cnv": "--conversation", "-sys": "--system-prompt", "-md": "--model-draft", "--draft": "--draft-max", "--draft-n": "--draft-max"},
	"bench": {"-ctk": "--kv-type"},
}

// rewriteLlamaFlags rewrites os.Args' llama.cpp flags (rewriteFlags).
func rewriteLlamaFlags() {
	rewriteFlags(os.Args[1:])
}

func rewriteFlags(args []string) {
	// The command is the first word that is not a flag or the value of
	// the root's one flag, which may come first.
	cmd := ""
	for i := 0; i < len(args) && cmd == ""; i++ {
		switch a := args[i]; {
		case a == "--cpuprofile":
			i++
		case !strings.HasPrefix(a, "-"):
			cmd = a
		}
	}
	names := llamaFlags[cmd]
	for i, a := range args {
		name, v, eq := strings.Cut(a, "=")
		if to, ok := names[name]; ok {
			args[i] = to
			if eq {
				args[i] += "=" + v
			}
		}
	}
}
