package main

import (
	"fmt"
	"io"
	"os"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/internal/outpath"
	"github.com/pinfer/pinfer/ops"
	"github.com/spf13/cobra"
)

func perplexityCmd() *cobra.Command {
	var mf modelFlags
	var file, kldBase string
	var nctx, chunks, stride int
	var kld bool
	c := &cobra.Command{
		Use:   "perplexity -f TEXT",
		Short: "Perplexity of a text, strided perplexity, and KL divergence against a base run, as llama.cpp's llama-perplexity computes them",
		Long: `Perplexity of a text, computed as llama.cpp's llama-perplexity does, on the
path the predictor gives (mlp when the file has fc1/fc2, as run).

Standard mode: the text (BOS first) is cut into chunks of -c tokens, each run
with BOS in place of its first token, and the second half of each is scored;
the running perplexity "[1]x,[2]y,..." and "Final estimate: PPL = x +/- y".

--ppl-stride N: llama-perplexity's strided perplexity. As there, the context
grows by N/2; windows of that size start every N tokens and each scores the N
tokens it adds at its end, so that every scored prediction rests on at least
-c - N/2 tokens (N/2 rounded up). The windows run as the text has them (only the
first begins with BOS), as llama-perplexity's do. Recent llama.cpp rounds its
context up to a multiple of 256: its windows are these where -c + N/2 is one
(-c 448 --ppl-stride 128: windows of 512).

KL divergence, to see how far a sparse path's distribution drifts from the
dense one's (or a quantized file's from the f16 one's):

  pinfer perplexity -m F --predictor dense -f T --kl-divergence-base base.kld
  pinfer perplexity -m F -f T --kl-divergence-base base.kld --kl-divergence

The first run computes the perplexity as usual and writes the log-probabilities
of every scored token to base.kld, in llama-perplexity's format (either tool
reads the other's file); the second runs the same chunks on the path asked for
(here the sparse one, the default) and prints llama-perplexity's per-chunk
table and statistics: mean KLD with its uncertainty and its percentiles,
PPL(Q)/PPL(base), the change in the scored token's probability (Δp), and how
often both rank the same token first ("Same top p"). With --kl-divergence the
chunks and their size come from the file; -f is then optional, and when given
its tokens must be the file's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctxGiven := cmd.Flags().Changed("ctx-size")
			switch {
			case kld && kldBase == "":
				return fmt.Errorf("perplexity: --kl-divergence needs --kl-divergence-base FILE, the base run's log-probabilities")
			case cmd.Flags().Changed("ppl-stride") && stride <= 0:
				return fmt.Errorf("perplexity: --ppl-stride %d: want a stride of at least 1 token", stride)
			case stride > 0 && kldBase != "":
				return fmt.Errorf("perplexity: --ppl-stride with --kl-divergence-base: the base file holds the standard chunks' log-probabilities; leave one out")
			case file == "" && !kld:
				return fmt.Errorf("perplexity: -f TEXT is required")
			case nctx < 0:
				return fmt.Errorf("perplexity: -c %d: want a window size, or 0 for the model's", nctx)
			case chunks == 0:
				return fmt.Errorf("perplexity: --chunks 0: want a number of chunks to score, or -1 for all")
			}
			if kld {
				return klDivergence(&mf, file, kldBase, nctx, ctxGiven, chunks)
			}
			if kldBase != "" {
				// Before the run: the base file must be writable and must
				// not be the model, the text or another input.
				model, err := modelPath(mf.model)
				if err != nil {
					return err
				}
				ins := []input{{Name: "-m", Path: model}, {Name: "-f", Path: file}, {Name: "-g", Path: mf.graph}, {Name: "--stats", Path: mf.stats}}
				if err := checkOutput("perplexity", "--kl-divergence-base", kldBase, ins...); err != nil {
					return err
				}
			}
			run, err := mf.openText(file)
			if err != nil {
				return err
			}
			defer run.Close()
			// The predictor run would use (mlp when the file has fc1/fc2), so
			// that a sparse model is scored on its sparse path.
			pred, err := run.m.Predictor(mf.predictor)
			if err != nil {
				return err
			}
			nctx = run.m.Context(nctx)
			window := nctx
			if stride > 0 {
				// llama-perplexity's main adds half the stride to the
				// context; its perplexity_v2 then scores from position
				// window-stride-1, which must exist.
				if stride > 2*(nctx-1) {
					return fmt.Errorf("perplexity: --ppl-stride %d: past the %d that -c %d allows (the window, -c plus half the stride, must hold a token before the stride's)", stride, 2*(nctx-1), nctx)
				}
				window = nctx + stride/2
				fmt.Fprintf(os.Stderr, "strided perplexity: the context goes from %d to %d (--ppl-stride %d adds half of it), as llama-perplexity's\n", nctx, window, stride)
			}
			if err := run.m.CheckContext(window, 1); err != nil {
				return fmt.Errorf("perplexity: -c %d: %v", window, err)
			}
			if w := run.m.PastTraining(window); w != "" {
				fmt.Fprintln(os.Stderr, w)
			}
			sess := run.m.NewSession(window, run.pool)
			sess.SetPredictor(pred)
			tokens := run.m.Encode(run.text)
			// As llama-perplexity: the running perplexity after each chunk,
			// "[1]x,[2]y,...", then the final estimate with its uncertainty.
			var r *engine.Perplexity
			if kldBase != "" {
				r, err = writeBase(run.m, sess, tokens, chunks, kldBase)
			} else {
				r, err = run.m.Score(sess, tokens, engine.ScoreOptions{Chunks: chunks, Stride: stride, Log: os.Stdout})
			}
			if err != nil {
				return fmt.Errorf("%s: %v", file, err)
			}
			if stride > 0 {
				fmt.Printf("%d chunks of %d tokens, stride %d, %d of %d tokens scored\n", len(r.Windows), window, stride, r.Scored, r.Tokens)
			} else {
				fmt.Printf("%d chunks of %d tokens, %d of %d tokens scored\n", len(r.Windows), nctx, r.Scored, r.Tokens)
			}
			fmt.Printf("Final estimate: PPL = %.4f +/- %.5f\n", r.PPL, r.StdErr)
			return nil
		},
	}
	mf.add(c)
	c.Flags().StringVarP(&file, "file", "f", "", "text file to score")
	c.Flags().IntVarP(&nctx, "ctx-size", "c", 512, "window size in tokens (0: the model's context, at most 4096); with --kl-divergence, the base file's unless given")
	c.Flags().IntVar(&chunks, "chunks", -1, "score only the first N chunks (windows), as llama-perplexity's --chunks (-1: all)")
	c.Flags().IntVar(&stride, "ppl-stride", 0, "strided perplexity, as llama-perplexity's: windows of -c plus half the stride, N tokens apart, each scoring the N it adds (0: the standard chunks)")
	c.Flags().StringVar(&kldBase, "kl-divergence-base", "", "alone: write the scored tokens' log-probabilities to FILE (llama-perplexity's format); with --kl-divergence: read them back as the base")
	c.Flags().BoolVar(&kld, "kl-divergence", false, "compare this run's predictions with the base file's: KL divergence, Δp, same top token, PPL ratio")
	return c
}

// writeBase runs the standard chunks and writes the base file, through a
// temporary file renamed at the end: a failed run leaves no half file and
// no changed one.
func writeBase(m *engine.Model, sess *graph.Session, tokens []int, chunks int, path string) (*engine.Perplexity, error) {
	var r *engine.Perplexity
	err := outpath.Replace(path, func(w io.Writer) (err error) {
		r, err = m.WriteKLDBase(sess, tokens, chunks, false, os.Stdout, w)
		return err
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "wrote the log-probabilities of %d scored tokens (%d chunks of %d) to %s\n", r.Scored, len(r.Windows), sess.NCtx(), path)
	return r, nil
}

// klDivergence is perplexity --kl-divergence: the base file's chunks run on
// the path the flags give, compared with the base's predictions.
func klDivergence(mf *modelFlags, file, basePath string, nctx int, ctxGiven bool, chunks int) error {
	base, closer, err := engine.OpenKLDBase(basePath)
	if err != nil {
		return err
	}
	defer closer.Close()
	var text []byte
	if file != "" {
		if text, err = os.ReadFile(file); err != nil {
			return err
		}
	}
	m, err := mf.load()
	if err != nil {
		return err
	}
	defer m.Close()
	if err := base.CheckVocab(m); err != nil {
		return err
	}
	if ctxGiven {
		if c := m.Context(nctx); c != base.NCtx {
			return fmt.Errorf("%s: written with a context of %d; -c %d differs (leave -c out to use the file's)", basePath, base.NCtx, c)
		}
	}
	if file != "" {
		if err := base.CheckTokens(m.Encode(string(text)), file); err != nil {
			return err
		}
	}
	pred, err := m.Predictor(mf.predictor)
	if err != nil {
		return err
	}
	if err := m.CheckContext(base.NCtx, 1); err != nil {
		return fmt.Errorf("%s: a context of %d: %v", basePath, base.NCtx, err)
	}
	if w := m.PastTraining(base.NCtx); w != "" {
		fmt.Fprintln(os.Stderr, w)
	}
	pool := ops.NewPool(mf.threads)
	defer pool.Close()
	sess := m.NewSession(base.NCtx, pool)
	sess.SetPredictor(pred)
	s, err := m.KLDivergence(sess, base, chunks, false, os.Stdout)
	if err != nil {
		return err
	}
	fmt.Println()
	if s.Count() < engine.KLDMinTokens {
		fmt.Fprintf(os.Stderr, "%d predictions compared: too few for statistics (llama-perplexity wants %d)\n", s.Count(), engine.KLDMinTokens)
		return nil
	}
	s.Summary().Write(os.Stdout)
	return nil
}
