package server

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/pinfer/pinfer/tokenizer"
)

// maxTopLogprobs is OpenAI's limit on logprobs (completions) and
// top_logprobs (chat), which llama-server keeps too.
const maxTopLogprobs = 20

// tokenLogprob is one token of a response with its log-probability and the
// most likely tokens at its position.
//
// The log-probabilities are the model's: the log-softmax of the raw logits
// of the position, before the repeat penalty, the temperature and the
// top-k/top-p/min-p filters, as OpenAI reports them (and llama-server's
// n_probs at temperature 0). They say how likely the model finds a token,
// not how likely this request's sampler was to pick it.
type tokenLogprob struct {
	id      int
	logprob float64
	none    bool // the prompt's first token: nothing before it predicts it
	prompt  bool // a prompt token (echo), else a generated one
	// off is the token's byte offset in its text: the decoded prompt for a
	// prompt token, the completion for a generated one.
	off int
	end int       // off plus the bytes its decoding added (scheduler only)
	top []topProb // the n most likely, best first; ties go to the lower id
}

type topProb struct {
	id      int
	logprob float64
}

// logprobOf computes the log-softmax of logits, in float64, for token id
// and the n most likely tokens.
func logprobOf(logits []float32, id, n int) tokenLogprob {
	mx := math.Inf(-1)
	for _, l := range logits {
		if float64(l) > mx {
			mx = float64(l)
		}
	}
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l) - mx)
	}
	lse := mx + math.Log(sum)
	t := tokenLogprob{id: id, logprob: float64(logits[id]) - lse}
	if n <= 0 {
		return t
	}
	// Insertion into the n best so far: n is at most 20, and most logits
	// fail the first comparison.
	top := make([]topProb, 0, n+1)
	for i, l := range logits {
		v := float64(l)
		if len(top) == n && !(v > top[n-1].logprob) {
			continue
		}
		k := len(top)
		for k > 0 && v > top[k-1].logprob {
			k--
		}
		top = append(top, topProb{})
		copy(top[k+1:], top[k:])
		top[k] = topProb{i, v}
		if len(top) > n {
			top = top[:n]
		}
	}
	for k := range top {
		top[k].logprob -= lse
	}
	t.top = top
	return t
}

// finite keeps JSON encodable what a masked (-Inf) or broken logit gives:
// -9999, as OpenAI reports the unlikeliest tokens.
func finite(v float64) float64 {
	if math.IsNaN(v) || v < -9999 {
		return -9999
	}
	return v
}

// tokenString is a token's text as a response shows it: its piece (▁ as a
// space, special tokens by name), or, for a piece that is not valid UTF-8
// (a byte token of a longer character), OpenAI's "bytes:\xNN" form.
func tokenString(tok *tokenizer.Tokenizer, id int) string {
	p := tok.Piece(id)
	if utf8.ValidString(p) {
		return p
	}
	var b strings.Builder
	b.WriteString("bytes:")
	for i := 0; i < len(p); i++ {
		fmt.Fprintf(&b, "\\x%02x", p[i])
	}
	return b.String()
}

func tokenBytes(tok *tokenizer.Tokenizer, id int) []int {
	p := tok.Piece(id)
	out := make([]int, len(p))
	for i := 0; i < len(p); i++ {
		out[i] = int(p[i])
	}
	return out
}

// legacyLogprobs is the completions endpoint's choices[].logprobs.
type legacyLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// chatLogprobs is the chat endpoint's choices[].logprobs.
type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
}

type chatLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []chatTopOne `json:"top_logprobs"`
}

type chatTopOne struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// logprobWriter turns a job's token records into the response's logprobs,
// piece by piece as the text is sent: text_offset counts characters, as
// OpenAI's does, from the start of the prompt (echoed or not), so the
// writer follows the text.
type logprobWriter struct {
	tok  *tokenizer.Tokenizer
	chat bool

	prompt      string // the decoded prompt, which prompt tokens' offsets index
	pAt, pRunes int    // prompt[:pAt] has pRunes characters
	base        int    // characters before the completion: the prompt's
	text        []byte // the completion so far
	at, runes   int    // text[:at] has runes characters

	legacy legacyLogprobs
	cont   []chatLogprob
	n      int // records held since the last flush
}

// newLogprobWriter returns nil when j asks for no logprobs.
func newLogprobWriter(tok *tokenizer.Tokenizer, j *job, chat bool) *logprobWriter {
	if !j.params.logprobs {
		return nil
	}
	w := &logprobWriter{tok: tok, chat: chat, base: utf8.RuneCountInString(j.promptText)}
	if j.params.echo {
		w.prompt = tok.Decode(j.prompt)
	}
	return w
}

// add takes a piece of text as sent and the records that came with it.
func (w *logprobWriter) add(piece string, lps []tokenLogprob) {
	if w == nil {
		return
	}
	w.text = append(w.text, piece...)
	for _, t := range lps {
		w.n++
		if w.chat {
			c := chatLogprob{Token: tokenString(w.tok, t.id), Logprob: finite(t.logprob), Bytes: tokenBytes(w.tok, t.id), TopLogprobs: []chatTopOne{}}
			for _, a := range t.top {
				c.TopLogprobs = append(c.TopLogprobs, chatTopOne{Token: tokenString(w.tok, a.id), Logprob: finite(a.logprob), Bytes: tokenBytes(w.tok, a.id)})
			}
			w.cont = append(w.cont, c)
			continue
		}
		l := &w.legacy
		l.Tokens = append(l.Tokens, tokenString(w.tok, t.id))
		l.TextOffset = append(l.TextOffset, w.offset(t))
		if t.none {
			l.TokenLogprobs = append(l.TokenLogprobs, nil)
			l.TopLogprobs = append(l.TopLogprobs, nil)
			continue
		}
		v := finite(t.logprob)
		l.TokenLogprobs = append(l.TokenLogprobs, &v)
		// As OpenAI's: the n best, and the chosen token always, so up to
		// n+1 entries. Two tokens of one text keep the likelier.
		m := make(map[string]float64, len(t.top)+1)
		for _, a := range t.top {
			if s := tokenString(w.tok, a.id); !has(m, s) {
				m[s] = finite(a.logprob)
			}
		}
		if s := tokenString(w.tok, t.id); !has(m, s) {
			m[s] = v
		}
		l.TopLogprobs = append(l.TopLogprobs, m)
	}
}

func has(m map[string]float64, k string) bool { _, ok := m[k]; return ok }

// offset is t's text_offset in characters.
func (w *logprobWriter) offset(t tokenLogprob) int {
	if t.prompt {
		off := min(max(t.off, w.pAt), len(w.prompt))
		w.pRunes += utf8.RuneCountInString(w.prompt[w.pAt:off])
		w.pAt = off
		return w.pRunes
	}
	off := min(max(t.off, w.at), len(w.text))
	w.runes += utf8.RuneCount(w.text[w.at:off])
	w.at = off
	return w.base + w.runes
}

// flush returns the logprobs of the records added since the last call, in
// the endpoint's shape; nil when there were none, unless always is set.
func (w *logprobWriter) flush(always bool) any {
	if w == nil || w.n == 0 && !always {
		return nil
	}
	w.n = 0
	if w.chat {
		c := &chatLogprobs{Content: w.cont}
		if c.Content == nil {
			c.Content = []chatLogprob{}
		}
		w.cont = nil
		return c
	}
	l := w.legacy
	w.legacy = legacyLogprobs{}
	if l.Tokens == nil {
		l = legacyLogprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	}
	return &l
}
