package convert

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pinfer/pinfer/tokenizer"
)

// A checkpoint without tokenizer.model may ship only tokenizer.json (Hugging
// Face tokenizers). When its model is byte-level BPE (GPT-2, Falcon, Llama
// 3, ...) conversion writes a "gpt2" vocabulary as llama.cpp's converter
// does: the tokens in id order (model.vocab, then added_tokens over it,
// [PADn] unused tokens for the ids neither names up to vocab_size), their
// types, the merges in rank order, and tokenizer.ggml.pre. llama.cpp picks
// the pre type from the hash of the ids of a check text, which needs Hugging
// Face's tokenizer; pinfer reads it off the pre_tokenizer description
// instead, and only when that is one it knows exactly.

// tokenTypes as GGUF stores them, beside tokenControl and tokenUserDefined.
const tokenNormal = 1

// tokenizerJSON is the part of tokenizer.json conversion reads.
type tokenizerJSON struct {
	AddedTokens []struct {
		ID      *int    `json:"id"`
		Content *string `json:"content"`
		Special bool    `json:"special"`
	} `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Model        struct {
		Type                    *string         `json:"type"`
		Vocab                   json.RawMessage `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	} `json:"model"`
}

// readBPEVocab builds the "gpt2" vocabulary of dir/tokenizer.json, fitted to
// vocab_size. Scores are zero (the file has none; applyAddedTokens may set
// them, and a gpt2 vocabulary does not write them). The special token ids
// come from specialTokenIDs; those found nowhere are -1 (not written).
func readBPEVocab(dir string, hp *hparams, logf func(string, ...any)) (tokenizer.Vocab, error) {
	v := tokenizer.Vocab{Model: "gpt2", BOS: -1, EOS: -1, UNK: -1}
	path := filepath.Join(dir, "tokenizer.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return v, err
	}
	var tj tokenizerJSON
	if err := json.Unmarshal(raw, &tj); err != nil {
		return v, fmt.Errorf("%s: %v", path, err)
	}
	if tj.Model.Type == nil || *tj.Model.Type != "BPE" {
		typ := "absent"
		if tj.Model.Type != nil {
			typ = fmt.Sprintf("%q", *tj.Model.Type)
		}
		return v, fmt.Errorf("%s: model.type is %s, want \"BPE\" (pinfer converts a byte-level BPE tokenizer.json, or a SentencePiece tokenizer.model)", path, typ)
	}
	for _, f := range []struct {
		name string
		val  *string
	}{{"continuing_subword_prefix", tj.Model.ContinuingSubwordPrefix}, {"end_of_word_suffix", tj.Model.EndOfWordSuffix}} {
		if f.val != nil && *f.val != "" {
			return v, fmt.Errorf("%s: model.%s is %q, want none in a byte-level BPE model", path, f.name, *f.val)
		}
	}
	if n, ok := nonNull(tj.Normalizer); ok {
		return v, fmt.Errorf("%s: normalizer is %s, want null: pinfer's byte-level BPE has no normalizer", path, shown(n))
	}
	if v.Pre, err = bpePreType(tj.PreTokenizer); err != nil {
		return v, fmt.Errorf("%s: %v", path, err)
	}
	var vocab map[string]int
	if json.Unmarshal(tj.Model.Vocab, &vocab) != nil || len(vocab) == 0 {
		return v, fmt.Errorf("%s: model.vocab is %s, want an object of token ids", path, shownOrAbsent(tj.Model.Vocab))
	}
	var merges []json.RawMessage
	if json.Unmarshal(tj.Model.Merges, &merges) != nil {
		return v, fmt.Errorf("%s: model.merges is %s, want a list of merges", path, shownOrAbsent(tj.Model.Merges))
	}
	if v.Merges, err = bpeMerges(merges); err != nil {
		return v, fmt.Errorf("%s: %v", path, err)
	}

	n := hp.nVocab
	v.Tokens, v.Types, v.Scores = make([]string, n), make([]int32, n), make([]float32, n)
	have := make([]bool, n)
	texts := make([]string, 0, len(vocab))
	for text := range vocab {
		texts = append(texts, text)
	}
	sort.Strings(texts)
	for _, text := range texts {
		id := vocab[text]
		switch {
		case id < 0 || id >= n:
			return v, fmt.Errorf("%s: model.vocab token %q has id %d, outside config.json's vocab_size %d", path, text, id, n)
		case have[id]:
			return v, fmt.Errorf("%s: model.vocab tokens %q and %q have the same id %d", path, v.Tokens[id], text, id)
		}
		v.Tokens[id], v.Types[id], have[id] = text, tokenNormal, true
	}
	for i, a := range tj.AddedTokens {
		if a.ID == nil || a.Content == nil {
			return v, fmt.Errorf("%s: added_tokens[%d] lacks its id or content", path, i)
		}
		id, text := *a.ID, *a.Content
		switch {
		case text == "":
			logf("%s: added token %d: empty content; skipped (no tokenizer can match or load an empty piece)", path, id)
			continue
		case id < 0 || id >= n:
			return v, fmt.Errorf("%s: added_tokens[%d] %q has id %d, outside config.json's vocab_size %d", path, i, text, id, n)
		}
		v.Tokens[id], v.Types[id] = addedTokenType(text, a.Special)
		have[id] = true
	}
	for id := range v.Tokens {
		if !have[id] {
			v.Tokens[id], v.Types[id] = fmt.Sprintf("[PAD%d]", id), tokenUnused
		}
	}

	return v, setSpecialIDs(dir, hp, &v, logf)
}

// nonNull is a raw JSON value unless it is absent or null.
func nonNull(raw json.RawMessage) (json.RawMessage, bool) {
	s := strings.TrimSpace(string(raw))
	return raw, s != "" && s != "null"
}

// shownOrAbsent is shown, or "absent" for an absent or null value.
func shownOrAbsent(raw json.RawMessage) string {
	if _, ok := nonNull(raw); !ok {
		return "absent"
	}
	return shown(raw)
}

// bpeMerges reads model.merges: "left right" strings, or [left, right]
// pairs (transformers 4.45 on), which gguf-py joins with a space after
// writing a space inside a part as its byte-level stand-in U+0120.
func bpeMerges(raws []json.RawMessage) ([]string, error) {
	merges := make([]string, len(raws))
	for i, raw := range raws {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if strings.Count(s, " ") != 1 || strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
				return nil, fmt.Errorf("model.merges[%d] is %q, want \"left right\"", i, s)
			}
			merges[i] = s
			continue
		}
		var pair []string
		if json.Unmarshal(raw, &pair) != nil || len(pair) != 2 || pair[0] == "" || pair[1] == "" {
			return nil, fmt.Errorf("model.merges[%d] is %s, want \"left right\" or [\"left\", \"right\"]", i, shown(raw))
		}
		merges[i] = strings.ReplaceAll(pair[0], " ", "\u0120") + " " + strings.ReplaceAll(pair[1], " ", "\u0120")
	}
	return merges, nil
}

// The pre-tokenizers pinfer recognizes, as tokenizer.json describes them.
const (
	// Llama 3's Split regex (the ByteLevel after it has use_regex false).
	llama3Split = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Falcon's Split after its Digits.
	falconSplit = `[0-9][0-9][0-9]`
)

// preStep is one pre-tokenizer of tokenizer.json.
type preStep struct {
	Type             string          `json:"type"`
	AddPrefixSpace   *bool           `json:"add_prefix_space"`
	UseRegex         *bool           `json:"use_regex"`
	Behavior         string          `json:"behavior"`
	Invert           bool            `json:"invert"`
	IndividualDigits *bool           `json:"individual_digits"`
	Pattern          json.RawMessage `json:"pattern"`
	Pretokenizers    []preStep       `json:"pretokenizers"`
}

// byteLevel: a ByteLevel step without a prefix space, with GPT-2's regex
// (use_regex, which defaults to true) or without it.
func (s preStep) byteLevel(useRegex bool) bool {
	return s.Type == "ByteLevel" && s.AddPrefixSpace != nil && !*s.AddPrefixSpace &&
		(s.UseRegex == nil || *s.UseRegex) == useRegex
}

// isolates: a Split step that isolates the matches of regex.
func (s preStep) isolates(regex string) bool {
	var p struct {
		Regex *string `json:"Regex"`
	}
	return s.Type == "Split" && json.Unmarshal(s.Pattern, &p) == nil && p.Regex != nil && *p.Regex == regex &&
		s.Behavior == "Isolated" && !s.Invert
}

// bpePreType names the tokenizer.ggml.pre of a pre_tokenizer description
// that is exactly GPT-2's, Falcon's or Llama 3's.
func bpePreType(raw json.RawMessage) (string, error) {
	var top preStep
	if _, ok := nonNull(raw); ok && json.Unmarshal(raw, &top) == nil {
		steps := []preStep{top}
		if top.Type == "Sequence" {
			steps = top.Pretokenizers
		}
		switch {
		case len(steps) == 1 && steps[0].byteLevel(true):
			return "gpt-2", nil
		case len(steps) == 4 && steps[0].Type == "Punctuation" && steps[0].Behavior == "Contiguous" &&
			steps[1].byteLevel(true) &&
			steps[2].Type == "Digits" && steps[2].IndividualDigits != nil && !*steps[2].IndividualDigits &&
			steps[3].isolates(falconSplit):
			return "falcon", nil
		case len(steps) == 2 && steps[0].isolates(llama3Split) && steps[1].byteLevel(false):
			return "llama-bpe", nil
		}
	}
	return "", fmt.Errorf("pre_tokenizer %s is none that pinfer knows: GPT-2's ByteLevel (pre type gpt-2), "+
		"Falcon's Punctuation, ByteLevel, Digits, Split sequence (falcon) or Llama 3's Split regex and ByteLevel (llama-bpe)", shownOrAbsent(raw))
}

// bpeMetadata is a byte-level BPE ("gpt2") vocabulary's metadata, as
// llama.cpp's converter writes it: no scores, the special token ids found
// (an absent one is left to the loader's default), and add_bos_token only
// when tokenizer_config.json says (llama.cpp's loader then adds none, but
// for Llama 3's pre-tokenizer).
func bpeMetadata(dir string, hp *hparams, v tokenizer.Vocab) ([]keyValue, error) {
	kv := []keyValue{
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", v.Pre},
		{"tokenizer.ggml.tokens", v.Tokens},
		{"tokenizer.ggml.token_type", v.Types},
		{"tokenizer.ggml.merges", v.Merges},
	}
	for _, id := range []struct {
		key string
		id  int
	}{{"bos", v.BOS}, {"eos", v.EOS}, {"unknown", v.UNK}, {"padding", hp.pad}} {
		if id.id >= 0 {
			kv = append(kv, keyValue{"tokenizer.ggml." + id.key + "_token_id", uint32(id.id)})
		}
	}
	tc, _, err := readTokenizerConfig(dir)
	if err != nil {
		return nil, err
	}
	if b, ok := tc.AddBOS.(bool); ok {
		kv = append(kv, keyValue{"tokenizer.ggml.add_bos_token", b})
	}
	return kv, nil
}
