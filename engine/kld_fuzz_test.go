package engine

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// FuzzReadKLDBase: any bytes given as a base file either fail with one line
// naming the file, or read as a header whose sizes the bytes hold exactly
// (nothing is allocated past the input), tokens inside the vocabulary, and
// rows that decode to finite log-probabilities and compare with a model's
// logits without panicking, until the last row, after which reading fails.
func FuzzReadKLDBase(f *testing.F) {
	valid := func(nctx, nvocab, nchunk int, seed float32) []byte {
		var b bytes.Buffer
		tokens := make([]int, nctx*nchunk)
		for i := range tokens {
			tokens[i] = i % nvocab
		}
		w, err := NewKLDWriter(&b, nctx, nvocab, tokens)
		if err != nil {
			f.Fatal(err)
		}
		logits := make([]float32, nvocab)
		for r := range nchunk * kldRows(nctx) {
			for i := range logits {
				logits[i] = seed * float32((i*7+r*3)%11-5)
			}
			if err := w.WriteRow(logits); err != nil {
				f.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			f.Fatal(err)
		}
		return b.Bytes()
	}
	for _, s := range [][]byte{
		valid(4, 3, 1, 1),
		valid(4, 3, 2, 10),
		valid(5, 8, 2, 0),
		valid(8, 1, 1, 1),
		[]byte("_logits_"),
		[]byte("_logits_\x04\x00\x00\x00\x03\x00\x00\x00"),
		[]byte("not a base file at all"),
		nil,
	} {
		f.Add(s)
	}
	full := valid(6, 5, 2, 3)
	f.Add(full[:len(full)-3])
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ReadKLDBase("fuzz.kld", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "fuzz.kld: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error not one line naming the file: %q", msg)
			}
			return
		}
		if b.NCtx < 4 || b.NVocab < 1 || b.NChunk < 1 {
			t.Fatalf("header %d/%d/%d accepted", b.NCtx, b.NVocab, b.NChunk)
		}
		if len(b.Tokens) != b.NCtx*b.NChunk || 4*len(b.Tokens) > len(data) {
			t.Fatalf("%d tokens from %d bytes", len(b.Tokens), len(data))
		}
		for _, tok := range b.Tokens {
			if tok < 0 || tok >= b.NVocab {
				t.Fatalf("token %d outside a vocabulary of %d", tok, b.NVocab)
			}
		}
		rows := b.NChunk * kldRows(b.NCtx)
		if want := kldHeaderSize + 4*len(b.Tokens) + 2*rows*kldRowLen(b.NVocab); want != len(data) {
			t.Fatalf("accepted %d bytes for a layout of %d", len(data), want)
		}
		logits := make([]float32, b.NVocab)
		for i := range logits {
			logits[i] = float32(i % 5)
		}
		var s KLDStats
		for r := 0; r < rows; r++ {
			row, err := b.ReadRow()
			if err != nil {
				if !strings.HasPrefix(err.Error(), "fuzz.kld: ") {
					t.Fatalf("row %d: %v", r, err)
				}
				return
			}
			for i := range b.NVocab {
				if v := DecodeLogProb(row, i); math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("row %d, token %d: %g", r, i, v)
				}
			}
			tok := s.Add(logits, row, b.Tokens[r%len(b.Tokens)])
			if math.IsNaN(tok.KLD) || math.IsNaN(tok.PDiff) || math.IsNaN(tok.NLLBase) {
				t.Fatalf("row %d: %+v", r, tok)
			}
		}
		if _, err := b.ReadRow(); err == nil {
			t.Fatal("a row past the last one read")
		}
		if s.Count() > 0 {
			sum := s.Summary()
			if len(sum.KLDQuantiles) != 11 || len(sum.PDiffQuantiles) != 13 {
				t.Fatalf("quantiles %d, %d", len(sum.KLDQuantiles), len(sum.PDiffQuantiles))
			}
		}
	})
}
