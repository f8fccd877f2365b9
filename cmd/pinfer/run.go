package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/models"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
	"github.com/pinfer/pinfer/sample"
	"github.com/spf13/cobra"
)

// modelFlags are shared by the commands that load a model.
type modelFlags struct {
	model, graph string
	threads      int
	predictor    string
	stats        string
	kvType       string
	noRepack     bool
}

func (f *modelFlags) add(c *cobra.Command) {
	f.addModel(c, nil)
	c.Flags().IntVarP(&f.threads, "threads", "t", runtime.NumCPU(), "CPU threads")
}

// addModel adds the flags other than -t (bench takes a list of them); with
// files, -m may be given again and again, each file going there.
func (f *modelFlags) addModel(c *cobra.Command, files *[]string) {
	if files != nil {
		c.Flags().StringArrayVarP(files, "model", "m", nil, "GGUF model file; give -m again for more, each measured in turn, as llama-bench (default: the built-in Shakespeare model)")
	} else {
		c.Flags().StringVarP(&f.model, "model", "m", "", "GGUF model file (default: the built-in Shakespeare model)")
	}
	c.Flags().StringVarP(&f.graph, "graph", "g", "", "TOML graph file (default: the built-in graph matching the model)")
	c.Flags().StringVar(&f.predictor, "predictor", "", "sparse FFN predictor: dense, oracle, mlp, static (static:RATE for a firing-rate floor other than 0.05), or a plugin's .go file (default: mlp if the file has one, else dense)")
	c.Flags().StringVar(&f.stats, "stats", "", "activation statistics from 'pinfer profile' (for static and plugins)")
	c.Flags().BoolVar(&f.noRepack, "no-repack", false, "keep q4_0 weights in the file's layout; by default, on AVX2 CPUs, the matrices read whole (attention, output, the predictors' fc1 and fc2) are repacked at load, eight rows interleaved, as llama.cpp does")
	c.Flags().StringVar(&f.kvType, "kv-type", "f32", "element type of the attention KV cache: f32, or f16 as llama.cpp keeps it (half the memory and half the reads of a long context)")
}

// modelPath is -m's file, or the built-in model's when -m is not given.
func modelPath(m string) (string, error) {
	if m != "" {
		return m, nil
	}
	return models.DefaultModelPath()
}

func (f *modelFlags) load() (*engine.Model, error) {
	kv, err := engine.ParseKVType(f.kvType)
	if err != nil {
		return nil, err
	}
	path, err := modelPath(f.model)
	if err != nil {
		return nil, err
	}
	ops.Repack = !f.noRepack
	m, err := engine.Load(path, f.graph)
	if err != nil {
		return nil, err
	}
	m.KVType = kv
	if f.stats != "" {
		if err := m.AttachStats(f.stats); err != nil {
			m.Close()
			return nil, err
		}
	}
	return m, nil
}

// textRun is what the commands that work through a text file share: the
// text, the model and a pool of -t threads.
type textRun struct {
	text string
	m    *engine.Model
	pool *ops.Pool
}

// openText reads path and loads the model.
func (f *modelFlags) openText(path string) (*textRun, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := f.load()
	if err != nil {
		return nil, err
	}
	return &textRun{text: string(text), m: m, pool: ops.NewPool(f.threads)}, nil
}

func (r *textRun) Close() {
	r.pool.Close()
	r.m.Close()
}

// loadPredicted loads the model and makes the predictor the flags name.
func (f *modelFlags) loadPredicted() (*engine.Model, predictors.Predictor, error) {
	m, err := f.load()
	if err != nil {
		return nil, nil, err
	}
	p, err := m.Predictor(f.predictor)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, p, nil
}

// checkLengths checks -n and -c, which run and serve share. -2 is
// llama.cpp's "until the context is full", where the end of text also
// stops: the same as -1 here.
func checkLengths(n, nctx int) error {
	if n < -2 {
		return fmt.Errorf("-n %d: want a count, or -1 (or -2) for until the end of text or a full context", n)
	}
	if nctx < 0 {
		return fmt.Errorf("-c %d: want a context size, or 0 for the model's", nctx)
	}
	return nil
}

func runCmd() *cobra.Command {
	var mf modelFlags
	var g gpuFlags
	var prompt, file, promptIDs string
	var n, nctx, topLogits int
	var asJSON bool
	var cnv bool
	var system, templateFile string
	var seed int64
	var gf grammarFlags
	var shift bool
	var keep, lookup int
	var df draftFlags
	var pc promptCache
	sp := sample.Defaults()
	c := &cobra.Command{
		Use:   "run",
		Short: "Generate text from a prompt",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLengths(n, nctx); err != nil {
				return err
			}
			if topLogits < 0 {
				return fmt.Errorf("--top-logits %d: want a count, or 0 for none", topLogits)
			}
			if topLogits > 0 && !asJSON {
				return fmt.Errorf("--top-logits %d: the logits are part of --json's output; add --json", topLogits)
			}
			var pe *sample.ParamError
			if errors.As(sp.Check(), &pe) {
				flag := map[string]string{"temperature": "temp"}[pe.Name]
				if flag == "" {
					flag = strings.ReplaceAll(pe.Name, "_", "-")
				}
				return fmt.Errorf("--%s %v: %s", flag, pe.Value, pe.Want)
			}
			if file != "" {
				b, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				prompt = string(b)
			}
			var ids []int
			if strings.TrimSpace(promptIDs) != "" {
				var err error
				if ids, err = intList("--prompt-ids", promptIDs); err != nil {
					return err
				}
			}
			given := 0
			for _, f := range []string{"prompt", "file", "prompt-ids"} {
				if cmd.Flags().Changed(f) {
					given++
				}
			}
			if given > 1 {
				return errors.New("-p, -f and --prompt-ids each give the whole prompt: use one of them")
			}
			switch {
			case cnv && asJSON:
				return errors.New("--conversation prints the replies as they come: it has no --json")
			case cnv && ids != nil:
				return errors.New("--conversation renders each turn with the chat template: give the first turn with -p, not --prompt-ids")
			case cnv && shift:
				return errors.New("--context-shift is for one text: a conversation re-reads its turns each time, and ends when they fill the context")
			case !cnv && (system != "" || templateFile != ""):
				return errors.New("--system-prompt and --chat-template-file are for --conversation (-cnv)")
			}
			if err := pc.check(cmd, cnv); err != nil {
				return err
			}
			if err := df.check(lookup); err != nil {
				return err
			}
			if keep < -1 {
				return fmt.Errorf("--keep %d: want a count of prompt tokens, or -1 for all of them", keep)
			}
			if cmd.Flags().Changed("keep") && !shift {
				return errors.New("--keep says what a context shift keeps: add --context-shift")
			}
			template, err := readTemplate(templateFile)
			if err != nil {
				return err
			}
			gram, err := gf.grammar(cmd)
			if err != nil {
				return err
			}
			switch {
			case seed == -1:
				sp.Seed = uint64(rand.Int64()) // 63 bits, so that --seed takes it back
			case seed < 0:
				return fmt.Errorf("--seed %d: want 0 or more, or -1 for a new one each run", seed)
			default:
				sp.Seed = uint64(seed)
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
			opt := engine.Options{Prompt: prompt, N: n, Ctx: nctx, Threads: mf.threads, Sample: sp, TopLogits: topLogits, Predictor: pred, PromptIDs: ids, Grammar: gram, ContextShift: shift && n != -2, Keep: keep, Lookup: lookup}
			if df.path != "" {
				pool := ops.NewPool(mf.threads)
				defer pool.Close()
				closeDraft, err := df.attach(m, &opt, pool, mf.noRepack)
				if err != nil {
					return err
				}
				defer closeDraft()
			}
			if cnv {
				return runConversation(m, opt, template, system, prompt, os.Stdin, os.Stdout)
			}
			if pc.path != "" {
				ctx := m.Context(nctx)
				if err := m.CheckContext(ctx, 1); err != nil {
					return err
				}
				pool := opt.Pool
				if pool == nil {
					pool = ops.NewPool(mf.threads)
					defer pool.Close()
				}
				opt.Session = m.NewSession(ctx, pool)
				if err := pc.load(opt.Session); err != nil {
					return err
				}
				if given == 0 && len(pc.loaded) > 0 {
					// No prompt: the saved tokens are it, as llama-cli's.
					ids = pc.loaded
					opt.PromptIDs = ids
				}
				opt.AfterPrompt = pc.afterPrompt
			}
			if !asJSON && ids != nil {
				prompt = m.Tok.Decode(ids)
			}
			// Once Generate's checks pass: an error starts its own line, and
			// no warning comes before it.
			opt.OnPrompt = func() {
				if w := m.PastTraining(m.Context(nctx)); w != "" {
					fmt.Fprintln(os.Stderr, w)
				}
				if !asJSON {
					fmt.Print(prompt)
				}
			}
			if !asJSON {
				opt.OnText = func(s string) { fmt.Print(s) }
			}
			res, err := m.Generate(opt)
			if err != nil {
				return err
			}
			if pc.path != "" {
				if err := pc.afterText(opt.Session); err != nil {
					return err
				}
				pc.report.Reused = res.Timings.CacheN
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				if pc.path != "" {
					return enc.Encode(struct {
						*engine.Result
						PromptCache *promptCacheReport `json:"prompt_cache"`
					}{res, &pc.report})
				}
				return enc.Encode(res)
			}
			fmt.Fprint(os.Stderr, "\n")
			printTimings(res.Timings, res.Seed)
			if pc.path != "" {
				fmt.Fprintln(os.Stderr, pc.summary(len(res.PromptTokens)))
			}
			if lookup > 0 || df.path != "" {
				fmt.Fprintf(os.Stderr, "%-11s = %d drafted, %d accepted (%.1f%%): %d tokens in %d passes\n", map[bool]string{true: "lookup", false: "draft"}[lookup > 0],
					res.Drafted, res.Accepted, 100*float64(res.Accepted)/float64(max(1, res.Drafted)), res.Timings.EvalN, res.Timings.EvalRuns)
			}
			return nil
		},
	}
	mf.add(c)
	g.add(c)
	gf.add(c)
	pc.add(c)
	df.add(c)
	fl := c.Flags()
	fl.StringVarP(&prompt, "prompt", "p", "", "prompt text")
	fl.StringVarP(&file, "file", "f", "", "read the prompt from a file")
	fl.StringVar(&promptIDs, "prompt-ids", "", "the prompt as token ids, e.g. 1,17,230 (used as given: no BOS is added)")
	fl.IntVarP(&n, "n-predict", "n", 128, "tokens to generate (-1 or -2: until end of text or a full context)")
	fl.IntVarP(&nctx, "ctx-size", "c", 0, "context size (default: the model's, at most 4096)")
	fl.Float64Var(&sp.Temp, "temp", sp.Temp, "temperature (0: greedy)")
	fl.Int64Var(&seed, "seed", -1, "random seed (-1: a new one each run, as llama.cpp; run prints it)")
	fl.IntVar(&sp.TopK, "top-k", sp.TopK, "top-k sampling (0: off)")
	fl.Float64Var(&sp.TopP, "top-p", sp.TopP, "top-p sampling (1: off)")
	fl.Float64Var(&sp.MinP, "min-p", sp.MinP, "min-p sampling (0: off)")
	fl.Float64Var(&sp.RepeatPenalty, "repeat-penalty", sp.RepeatPenalty, "penalty for repeated tokens (1: off)")
	fl.IntVar(&sp.RepeatLastN, "repeat-last-n", sp.RepeatLastN, "how many recent tokens the repeat penalty sees (0: none, -1: all)")
	fl.BoolVar(&shift, "context-shift", false, "when the context is full, drop the older half of what follows the kept prompt tokens and go on (llama-cli's context shift), rather than stop (-n -2 still stops there)")
	fl.IntVar(&keep, "keep", 0, "with --context-shift: the prompt tokens after BOS that a shift keeps (-1: all of them)")
	fl.IntVar(&lookup, "lookup", 0, "prompt lookup decoding: draft up to N tokens a step from where the text's last tokens occurred before, and run them in the step's pass; a drafted token that the sampler then picks costs no pass of its own (the text is the same; llama.cpp's llama-lookup)")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object instead of text")
	fl.IntVar(&topLogits, "top-logits", 0, "with --json: the K largest logits at the last prompt position")
	fl.BoolVar(&cnv, "conversation", false, "chat (-cnv, as llama-cli): read turns from standard input, a line each (end a line with \\ to go on), and reply with the model's chat template; -p is the first turn, -n caps each reply, reply k draws with --seed plus k, a turn too long for the context left is refused, Ctrl-D ends")
	fl.StringVar(&system, "system-prompt", "", "with --conversation: the system message (-sys)")
	fl.StringVar(&templateFile, "chat-template-file", "", "with --conversation: a Jinja chat template to use instead of the model's tokenizer.chat_template")
	return c
}

// readTemplate reads --chat-template-file; "" gives "".
func readTemplate(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--chat-template-file: %v", err)
	}
	return string(b), nil
}

// printTimings prints a generation's seed and timings as llama.cpp does.
func printTimings(t engine.Timings, seed uint64) {
	fmt.Fprintf(os.Stderr, "\nseed        = %d\n", seed)
	fmt.Fprintf(os.Stderr, "load time   = %10.2f ms\n", t.LoadMs)
	fmt.Fprintf(os.Stderr, "prompt eval = %10.2f ms / %4d tokens (%8.2f ms per token, %8.2f tokens per second)\n", t.PromptMs, t.PromptN, t.PromptPerToken, t.PromptPerSecond)
	fmt.Fprintf(os.Stderr, "eval        = %10.2f ms / %4d runs   (%8.2f ms per token, %8.2f tokens per second)\n", t.EvalMs, t.EvalRuns, t.EvalPerToken, t.EvalPerSecond)
}
