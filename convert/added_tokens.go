package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/pinfer/pinfer/tokenizer"
)

// SentencePiece token types as GGUF stores them (tokenizer.Normal ...).
const (
	tokenControl     = 3
	tokenUserDefined = 4
)

// tokenizerConfig is what conversion reads from tokenizer_config.json
// besides the chat template.
type tokenizerConfig struct {
	AddedTokensDecoder map[string]struct {
		Content *string `json:"content"`
		Special bool    `json:"special"`
	} `json:"added_tokens_decoder"`
	AddBOS any `json:"add_bos_token"`
	AddEOS any `json:"add_eos_token"`
	// The special tokens' text (or AddedToken objects): specialTokenIDs.
	BOSToken json.RawMessage `json:"bos_token"`
	EOSToken json.RawMessage `json:"eos_token"`
	UNKToken json.RawMessage `json:"unk_token"`
	PadToken json.RawMessage `json:"pad_token"`
}

// readTokenizerConfig reads dir/tokenizer_config.json; a missing file is an
// empty config.
func readTokenizerConfig(dir string) (tokenizerConfig, string, error) {
	var tc tokenizerConfig
	path := filepath.Join(dir, "tokenizer_config.json")
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return tc, path, nil
	} else if err != nil {
		return tc, path, err
	}
	if err := json.Unmarshal(raw, &tc); err != nil {
		return tc, path, fmt.Errorf("%s: %v", path, err)
	}
	return tc, path, nil
}

// addedTokenType is how llama.cpp's converter stores an added token: control
// when marked special or looking special, else user-defined with "▁" read as
// a space.
func addedTokenType(text string, special bool) (string, int32) {
	if special || looksSpecial(text) {
		return text, tokenControl
	}
	return strings.ReplaceAll(text, "\u2581", " "), tokenUserDefined
}

// looksSpecial is llama.cpp's converter's guess that an added token not
// marked special is a control token all the same.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}

// applyAddedTokens puts the tokens a Hugging Face tokenizer adds to its
// SentencePiece model (added_tokens.json, then tokenizer_config.json's
// added_tokens_decoder) in their slots of the padded vocabulary, as
// llama.cpp's converter does: score -1000, control when marked special or
// looking special, else user-defined with "▁" read as a space. Ids beyond the
// vocabulary are skipped with a note. It also takes add_bos_token and
// add_eos_token; addEOS is nil when the config does not say.
func applyAddedTokens(dir string, v *tokenizer.Vocab, logf func(string, ...any)) (addEOS *bool, err error) {
	set := func(id int, text string, typ int32) {
		v.Tokens[id], v.Scores[id], v.Types[id] = text, -1000, typ
	}
	path := filepath.Join(dir, "added_tokens.json")
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		var added map[string]int
		if err := json.Unmarshal(raw, &added); err != nil {
			return nil, fmt.Errorf("%s: want an object of token ids: %v", path, err)
		}
		texts := make([]string, 0, len(added))
		for t := range added {
			texts = append(texts, t)
		}
		sort.Slice(texts, func(i, j int) bool { return added[texts[i]] < added[texts[j]] })
		for _, t := range texts {
			id := added[t]
			if t == "" {
				logf("%s: token id %d: empty text; skipped (no tokenizer can match or load an empty piece)", path, id)
				continue
			}
			if id < 0 || id >= len(v.Tokens) {
				logf("%s: token %q: id %d is outside the vocabulary of %d; skipped", path, t, id, len(v.Tokens))
				continue
			}
			set(id, t, tokenUserDefined)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}

	tc, path, err := readTokenizerConfig(dir)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(tc.AddedTokensDecoder))
	ids := map[string]int{}
	for k := range tc.AddedTokensDecoder {
		id, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("%s: added_tokens_decoder key %q is not a token id", path, k)
		}
		if tc.AddedTokensDecoder[k].Content == nil {
			return nil, fmt.Errorf("%s: added_tokens_decoder[%q] has no content", path, k)
		}
		keys, ids[k] = append(keys, k), id
	}
	sort.Slice(keys, func(i, j int) bool { return ids[keys[i]] < ids[keys[j]] })
	for _, k := range keys {
		id, tok := ids[k], tc.AddedTokensDecoder[k]
		text := *tok.Content
		if text == "" {
			logf("%s: added token %d: empty content; skipped (no tokenizer can match or load an empty piece)", path, id)
			continue
		}
		if id < 0 || id >= len(v.Tokens) {
			logf("%s: added token %q: id %d is outside the vocabulary of %d; skipped", path, text, id, len(v.Tokens))
			continue
		}
		text, typ := addedTokenType(text, tok.Special)
		set(id, text, typ)
	}
	if b, ok := tc.AddBOS.(bool); ok {
		v.AddBOS = b
	}
	if b, ok := tc.AddEOS.(bool); ok {
		addEOS = &b
	}
	return addEOS, nil
}
