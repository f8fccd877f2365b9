package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pinfer/pinfer/tokenizer"
)

// specialTypes are the special tokens conversion writes, in gguf-py's order.
var specialTypes = []string{"bos", "eos", "unk", "pad"}

// specialTokenIDs finds the bos, eos, unk and pad ids as gguf-py's
// SpecialVocab does. First tokenizer_config.json's <typ>_token (a string, or
// an object's content) is looked up among tokenizer.json's added_tokens (the
// first with that content); config.json's <typ>_token_id then fills the
// types still missing. An id outside the vocabulary is skipped with a note
// and the next source is tried. Types found nowhere are absent from the map.
func specialTokenIDs(dir string, hp *hparams, logf func(string, ...any)) (map[string]int, error) {
	ids := map[string]int{}
	set := func(typ string, id int, from string) {
		if _, done := ids[typ]; done || id < 0 {
			return
		}
		if id >= hp.nVocab {
			logf("%s: %s token id %d is outside the vocabulary of %d; skipped", from, typ, id, hp.nVocab)
			return
		}
		ids[typ] = id
	}
	added, err := readAddedTokensJSON(dir)
	if err != nil {
		return nil, err
	}
	tc, tcPath, err := readTokenizerConfig(dir)
	if err != nil {
		return nil, err
	}
	for _, typ := range specialTypes {
		content, ok := tokenContent(tc.specialToken(typ))
		if !ok {
			continue
		}
		for _, a := range added {
			if a.Content == content {
				set(typ, a.ID, tcPath)
				break
			}
		}
	}
	cfg := filepath.Join(dir, "config.json")
	for typ, id := range map[string]int{"bos": hp.bos, "eos": hp.eos, "unk": hp.unk, "pad": hp.pad} {
		set(typ, id, cfg)
	}
	return ids, nil
}

// setSpecialIDs puts the ids specialTokenIDs finds in v's BOS, EOS and UNK
// (which keep their own where none is found) and in hp.pad (-1 where none is).
func setSpecialIDs(dir string, hp *hparams, v *tokenizer.Vocab, logf func(string, ...any)) error {
	ids, err := specialTokenIDs(dir, hp, logf)
	if err != nil {
		return err
	}
	hp.pad = -1
	for typ, dst := range map[string]*int{"bos": &v.BOS, "eos": &v.EOS, "unk": &v.UNK, "pad": &hp.pad} {
		if id, ok := ids[typ]; ok {
			*dst = id
		}
	}
	return nil
}

func (tc *tokenizerConfig) specialToken(typ string) json.RawMessage {
	switch typ {
	case "bos":
		return tc.BOSToken
	case "eos":
		return tc.EOSToken
	case "unk":
		return tc.UNKToken
	case "pad":
		return tc.PadToken
	}
	return nil
}

// tokenContent reads a tokenizer_config.json special token: its text, or an
// AddedToken object's content; anything else (null, absent) is no token.
func tokenContent(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Content != nil {
		return *obj.Content, true
	}
	return "", false
}

type addedToken struct {
	ID      int    `json:"id"`
	Content string `json:"content"`
}

// readAddedTokensJSON reads tokenizer.json's added_tokens; a missing file
// has none.
func readAddedTokensJSON(dir string) ([]addedToken, error) {
	path := filepath.Join(dir, "tokenizer.json")
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var tj struct {
		AddedTokens []addedToken `json:"added_tokens"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("%s: added token %q has id %d, want a token id", path, a.Content, a.ID)
		}
	}
	return tj.AddedTokens, nil
}
