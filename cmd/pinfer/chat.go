package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/server"
)

// conversation is run's -cnv, as llama-cli's: the user's turns come from
// in, one line each (a line ending in \ goes on to the next), each reply
// streams to out. Every turn renders the whole conversation with the
// model's chat template, and the one session keeps its cache across
// turns, so a turn runs only the tokens that are new.
type conversation struct {
	m       *engine.Model
	chat    *server.Chat
	opt     engine.Options // the sampling, predictor and -n of every turn
	msgs    []server.ChatMessage
	replies int // generated so far
	total   engine.Timings
}

func runConversation(m *engine.Model, opt engine.Options, template, system, first string, in io.Reader, out io.Writer) error {
	chat, err := server.NewChat(m, template)
	if err != nil {
		return err
	}
	pool := ops.NewPool(opt.Threads)
	defer pool.Close()
	opt.Session = m.NewSession(m.Context(opt.Ctx), pool)
	c := &conversation{m: m, chat: chat, opt: opt}
	if system != "" {
		c.msgs = append(c.msgs, server.ChatMessage{Role: "system", Content: system})
	}
	if chat.Builtin {
		fmt.Fprintln(os.Stderr, "note: the model has no chat template: each turn is 'role: text' (--chat-template-file gives one)")
	}
	if w := m.PastTraining(opt.Session.NCtx()); w != "" {
		fmt.Fprintln(os.Stderr, w)
	}
	// llama-cli renders the system prompt as it starts: a template that
	// refuses it fails now, before the user has typed a turn.
	if system != "" {
		if _, err := chat.Prompt(c.msgs); err != nil {
			return fmt.Errorf("chat template: %v", err)
		}
	}
	r := bufio.NewReader(in)
	for asked := false; ; {
		user := first
		if asked || first == "" {
			fmt.Fprint(out, "\n> ")
			if user, err = readTurn(r); err != nil {
				c.summary()
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if strings.TrimSpace(user) == "" {
				continue // no turn: the model is not asked
			}
		} else {
			fmt.Fprintf(out, "> %s\n", user)
		}
		asked = true
		full, err := c.reply(user, out)
		if errors.Is(err, errTurnTooLong) {
			fmt.Fprintf(os.Stderr, "%v\n", err)
			continue
		}
		if err != nil {
			return err
		}
		if full {
			fmt.Fprintln(os.Stderr, "\n\nthe context is full: start again, with a larger -c for a longer conversation")
			c.summary()
			return nil
		}
	}
}

// errTurnTooLong is a turn that, with the conversation before it, does
// not fit in the context: it is dropped, and the conversation goes on.
var errTurnTooLong = errors.New("this turn does not fit in the context")

// readTurn reads one turn: a line, and the lines after it while each ends
// in a backslash.
func readTurn(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil && (line == "" || !errors.Is(err, io.EOF)) {
			if b.Len() > 0 && errors.Is(err, io.EOF) {
				return b.String(), nil
			}
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if rest, more := strings.CutSuffix(line, `\`); more {
			b.WriteString(rest + "\n")
			continue
		}
		b.WriteString(line)
		return b.String(), nil
	}
}

// reply adds the user's turn, generates the assistant's and adds it; full
// says the context ran out. A turn that does not fit is not added
// (errTurnTooLong).
func (c *conversation) reply(user string, out io.Writer) (full bool, err error) {
	msgs := append(c.msgs, server.ChatMessage{Role: "user", Content: user})
	text, err := c.chat.Prompt(msgs)
	if err != nil {
		return false, fmt.Errorf("chat template: %v", err)
	}
	opt := c.opt
	opt.PromptIDs = server.EncodeChat(c.m.Tok, text)
	if nctx := opt.Session.NCtx(); len(opt.PromptIDs) >= nctx {
		return false, fmt.Errorf("%w: the conversation with it is %d tokens, the context %d (say less, or start again with a larger -c)", errTurnTooLong, len(opt.PromptIDs), nctx)
	}
	// Reply k draws with seed+k: one seed per conversation, not the same
	// draws each turn, and a reply is what run draws for the conversation
	// so far with that seed.
	opt.Sample.Seed += uint64(c.replies)
	opt.OnText = func(s string) { fmt.Fprint(out, s) }
	res, err := c.m.Generate(opt)
	if err != nil {
		return false, err
	}
	c.replies++
	c.msgs = append(msgs, server.ChatMessage{Role: "assistant", Content: res.Text})
	t := &c.total
	t.CacheN += res.Timings.CacheN
	t.PromptN += res.Timings.PromptN
	t.PromptMs += res.Timings.PromptMs
	t.EvalN += res.Timings.EvalN
	t.EvalRuns += res.Timings.EvalRuns
	t.EvalMs += res.Timings.EvalMs
	fmt.Fprintln(out)
	return res.StopReason == "context", nil
}

// summary prints the conversation's timings as run prints one generation's,
// with the prompt tokens its cache kept.
func (c *conversation) summary() {
	t := c.total
	t.LoadMs = float64(c.m.LoadTime.Microseconds()) / 1e3
	t.Fill()
	fmt.Fprintln(os.Stderr)
	printTimings(t, c.opt.Sample.Seed)
	fmt.Fprintf(os.Stderr, "cached      = %10d prompt tokens kept from earlier turns\n", t.CacheN)
}
