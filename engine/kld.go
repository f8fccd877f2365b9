package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/pinfer/pinfer/graph"
)

// The KL-divergence base file is llama-perplexity's --kl-divergence-base
// file (tools/perplexity/perplexity.cpp: perplexity() writes it, its
// kl_divergence() reads it), so that a file either tool writes, the other
// reads. Its layout, every number little-endian:
//
//	offset 0   8 bytes   "_logits_"
//	offset 8   int32     n_ctx, the window (chunk) size
//	offset 12  int32     n_vocab
//	offset 16  int32     n_chunk, the number of windows scored
//	offset 20  int32 × n_chunk·n_ctx
//	                     the text's tokens, window after window (each
//	                     window's first token as in the text: the BOS the
//	                     run puts there is not written)
//	then, for each window and each scored position j in [n_ctx/2, n_ctx-2]
//	(n_ctx-1-n_ctx/2 rows a window), a row of nv = 2·⌈n_vocab/2⌉+4 uint16:
//	                     float32 scale, float32 min_log_prob (the first
//	                     four uint16), n_vocab uint16 q_i, and one uint16
//	                     of padding (0) when n_vocab is odd.
//
// A row holds the log-softmax of position j's logits l_i, which predict the
// window's token j+1: with M the largest logit and m = max(min_i l_i, M-16),
// scale = (M-m)/65535, q_i = round((l_i-m)/scale) where l_i > m (else 0),
// and min_log_prob = m - M - log Σ exp(l_i-M), so that
// log p_i ≈ scale·q_i + min_log_prob, within scale/2 ≤ 16/65535/2 ≈ 1.2e-4
// where l_i > m; the log-probabilities below M-16 all read back as
// min_log_prob, and the KL divergence leaves out any that reads back at or
// below -16, as llama-perplexity does.

const kldMagic = "_logits_"

// kldHeaderSize is the bytes before the tokens.
const kldHeaderSize = 8 + 3*4

// kldRowLen is a row's length in uint16: the two floats, the log-probs,
// padded to an even count.
func kldRowLen(nvocab int) int { return 2*((nvocab+1)/2) + 4 }

// kldRows is the rows a window of nctx holds: its scored positions.
func kldRows(nctx int) int { return nctx - 1 - nctx/2 }

// EncodeLogProbs writes the row of logits (row: kldRowLen(len(logits))
// uint16) as llama-perplexity stores it in its base file.
func EncodeLogProbs(logits []float32, row []uint16) {
	mx, mn := logits[0], logits[0]
	for _, l := range logits[1:] {
		mx, mn = max(mx, l), min(mn, l)
	}
	mn = max(mn, mx-16)
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l - mx))
	}
	lse := float32(math.Log(sum))
	scale := (mx - mn) / 65535
	minLP := mn - mx - lse
	putF32(row[0:2], scale)
	putF32(row[2:4], minLP)
	q := row[4:]
	clear(q)
	if scale > 0 {
		inv := 1 / scale
		for i, l := range logits {
			if l > mn {
				q[i] = uint16(min(math.RoundToEven(float64(inv*(l-mn))), 65535))
			}
		}
	}
}

// DecodeLogProb reads entry i of a base row: the log-probability of token
// i, within the row's scale/2.
func DecodeLogProb(row []uint16, i int) float64 {
	return float64(getF32(row[0:2]))*float64(row[4+i]) + float64(getF32(row[2:4]))
}

// RowScale is a base row's quantization step: its entries are within half
// of it of the log-probabilities they store.
func RowScale(row []uint16) float64 { return float64(getF32(row[0:2])) }

func putF32(dst []uint16, f float32) {
	b := math.Float32bits(f)
	dst[0], dst[1] = uint16(b), uint16(b>>16)
}

func getF32(src []uint16) float32 {
	return math.Float32frombits(uint32(src[0]) | uint32(src[1])<<16)
}

// KLDWriter writes a base file: the header and tokens when made, then one
// row per scored prediction, window after window.
type KLDWriter struct {
	w      *bufio.Writer
	nvocab int
	row    []uint16
	buf    []byte
}

// NewKLDWriter starts a base file on w for windows of nctx over a
// vocabulary of nvocab; tokens are the windows' tokens, nctx each.
func NewKLDWriter(w io.Writer, nctx, nvocab int, tokens []int) (*KLDWriter, error) {
	if nctx < 4 || len(tokens) == 0 || len(tokens)%nctx != 0 {
		return nil, fmt.Errorf("a base file holds whole windows: %d tokens in windows of %d", len(tokens), nctx)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	hdr := make([]byte, kldHeaderSize, kldHeaderSize+4*len(tokens))
	copy(hdr, kldMagic)
	binary.LittleEndian.PutUint32(hdr[8:], uint32(nctx))
	binary.LittleEndian.PutUint32(hdr[12:], uint32(nvocab))
	binary.LittleEndian.PutUint32(hdr[16:], uint32(len(tokens)/nctx))
	for _, t := range tokens {
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(int32(t)))
	}
	if _, err := bw.Write(hdr); err != nil {
		return nil, err
	}
	nv := kldRowLen(nvocab)
	return &KLDWriter{w: bw, nvocab: nvocab, row: make([]uint16, nv), buf: make([]byte, 2*nv)}, nil
}

// WriteRow writes the next scored prediction's logits.
func (k *KLDWriter) WriteRow(logits []float32) error {
	if len(logits) != k.nvocab {
		return fmt.Errorf("a row of %d logits in a file for a vocabulary of %d", len(logits), k.nvocab)
	}
	EncodeLogProbs(logits, k.row)
	for i, v := range k.row {
		binary.LittleEndian.PutUint16(k.buf[2*i:], v)
	}
	_, err := k.w.Write(k.buf)
	return err
}

// Flush writes what is buffered.
func (k *KLDWriter) Flush() error { return k.w.Flush() }

// KLDBase is a base file being read: its header and tokens, then its rows
// in order.
type KLDBase struct {
	Name                 string // the file, as errors name it
	NCtx, NVocab, NChunk int
	Tokens               []int // NChunk·NCtx

	r    io.Reader
	row  []uint16
	buf  []byte
	read int // rows read
}

// OpenKLDBase opens a base file; close it with the closer when done.
func OpenKLDBase(path string) (*KLDBase, io.Closer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	b, err := ReadKLDBase(path, bufio.NewReaderSize(f, 1<<20), st.Size())
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return b, f, nil
}

// ReadKLDBase reads a base file's header and tokens from r, which holds
// size bytes; the rows are read as they are needed (ReadRow). The header
// must agree with size to the byte: a shorter file is truncated, a longer
// one is not this format. Errors are one line that begins with name.
func ReadKLDBase(name string, r io.Reader, size int64) (*KLDBase, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%s: "+format, append([]any{name}, a...)...)
	}
	var hdr [kldHeaderSize]byte
	if n, err := io.ReadFull(r, hdr[:]); err != nil {
		if n < len(kldMagic) || string(hdr[:len(kldMagic)]) != kldMagic {
			return nil, fail("not a llama-perplexity log-probability file: %d bytes, without the %q magic", n, kldMagic)
		}
		return nil, fail("truncated: %d bytes, shorter than the %d of the header", n, kldHeaderSize)
	}
	if string(hdr[:8]) != kldMagic {
		return nil, fail("not a llama-perplexity log-probability file: it starts with %q, not %q", hdr[:8], kldMagic)
	}
	nctx := int64(int32(binary.LittleEndian.Uint32(hdr[8:])))
	nvocab := int64(int32(binary.LittleEndian.Uint32(hdr[12:])))
	nchunk := int64(int32(binary.LittleEndian.Uint32(hdr[16:])))
	switch {
	case nctx < 4:
		return nil, fail("a context of %d in the header: want at least 4", nctx)
	case nvocab < 1:
		return nil, fail("a vocabulary of %d in the header", nvocab)
	case nchunk < 1:
		return nil, fail("%d chunks in the header", nchunk)
	}
	// Sizes saturate at 2^63-1: a header may ask for more than any file.
	mul := func(a, b int64) int64 {
		if a != 0 && b > math.MaxInt64/a {
			return math.MaxInt64
		}
		return a * b
	}
	add := func(a, b int64) int64 { return min(a, math.MaxInt64-b) + b }
	tokBytes := mul(4, mul(nctx, nchunk))
	rowBytes := mul(mul(nchunk, int64(kldRows(int(nctx)))), 2*int64(kldRowLen(int(nvocab))))
	want := add(add(kldHeaderSize, tokBytes), rowBytes)
	if size < want {
		need := fmt.Sprint(want)
		if want == math.MaxInt64 {
			need = "more than 2^63"
		}
		return nil, fail("truncated: %d bytes, where the header's %d chunks of %d tokens over a vocabulary of %d need %s", size, nchunk, nctx, nvocab, need)
	}
	if size > want {
		return nil, fail("%d bytes, past the %d that the header's %d chunks of %d tokens over a vocabulary of %d need", size, want, nchunk, nctx, nvocab)
	}
	raw := make([]byte, tokBytes)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, fail("reading the tokens: %v", err)
	}
	b := &KLDBase{Name: name, NCtx: int(nctx), NVocab: int(nvocab), NChunk: int(nchunk), Tokens: make([]int, nctx*nchunk), r: r}
	for i := range b.Tokens {
		t := int(int32(binary.LittleEndian.Uint32(raw[4*i:])))
		if t < 0 || t >= b.NVocab {
			return nil, fail("token %d (chunk %d, position %d) is %d, outside the vocabulary of %d", i, i/b.NCtx+1, i%b.NCtx, t, b.NVocab)
		}
		b.Tokens[i] = t
	}
	nv := kldRowLen(b.NVocab)
	b.row, b.buf = make([]uint16, nv), make([]byte, 2*nv)
	return b, nil
}

// ReadRow reads the next row; it is valid until the next call.
func (b *KLDBase) ReadRow() ([]uint16, error) {
	per := kldRows(b.NCtx)
	if b.read >= per*b.NChunk {
		return nil, fmt.Errorf("%s: all %d rows were read", b.Name, per*b.NChunk)
	}
	if _, err := io.ReadFull(b.r, b.buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%s: reading row %d: %v", b.Name, b.read, err)
	}
	for i := range b.row {
		b.row[i] = binary.LittleEndian.Uint16(b.buf[2*i:])
	}
	chunk, j := b.read/per+1, b.read%per+b.NCtx/2
	b.read++
	scale, minLP := getF32(b.row[0:2]), getF32(b.row[2:4])
	// The encoding spans at most 16 nats, and log-probabilities are at most 0.
	if !(scale >= 0 && scale <= 16.01/65535) || !(minLP <= 0) || math.IsInf(float64(minLP), 0) {
		return nil, fmt.Errorf("%s: chunk %d, position %d: a row with scale %g and minimum log-probability %g", b.Name, chunk, j, scale, minLP)
	}
	return b.row, nil
}

// CheckVocab compares the base file's vocabulary size with the model's.
func (b *KLDBase) CheckVocab(m *Model) error {
	if n := m.Tok.Size(); b.NVocab != n {
		return fmt.Errorf("%s: written for a vocabulary of %d tokens; the model's has %d", b.Name, b.NVocab, n)
	}
	return nil
}

// CheckTokens compares the base file's tokens with the text's, tokens
// (what textName tokenizes to): the KL divergence compares predictions of
// the same tokens.
func (b *KLDBase) CheckTokens(tokens []int, textName string) error {
	for i, t := range b.Tokens {
		if i >= len(tokens) {
			return fmt.Errorf("%s: holds %d tokens, %s only %d", b.Name, len(b.Tokens), textName, len(tokens))
		}
		if tokens[i] != t {
			return fmt.Errorf("%s: token %d (chunk %d, position %d) is %d, where %s has %d: the base was written for another text or tokenizer", b.Name, i, i/b.NCtx+1, i%b.NCtx, t, textName, tokens[i])
		}
	}
	return nil
}

// KLDToken is what one scored prediction gave against the base's.
type KLDToken struct {
	NLL, NLLBase float64 // -log p of the next token: this run's, the base's
	KLD          float64 // KL(base ‖ this run) over the base's tokens above e^-16
	PDiff        float64 // p - p_base of the next token
	SameTop      bool    // both rank the same token first
}

// KLDStats gathers llama-perplexity's KL-divergence sums and the values
// its percentiles are taken from.
type KLDStats struct {
	Tokens []KLDToken

	sumNLL, sumNLL2, sumBase, sumBase2, sumNLLBase float64
	sumKLD, sumKLD2                                float64
	sumPD, sumPD2, sumPD4, maxPD                   float64
	same                                           int
}

// Add compares logits, which predict next, with the base's row for the
// same position, as llama-perplexity's kl_divergence does.
func (s *KLDStats) Add(logits []float32, row []uint16, next int) KLDToken {
	mx, top := logits[0], 0
	for i, l := range logits[1:] {
		if l > mx {
			mx, top = l, i+1
		}
	}
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l) - float64(mx))
	}
	norm := float64(mx) + math.Log(sum) // log q_i = l_i - norm
	scale, minLP := float64(getF32(row[0:2])), float64(getF32(row[2:4]))
	q := row[4:]
	var kld, baseMax float64
	baseTop := -1
	for i, l := range logits {
		lp := scale*float64(q[i]) + minLP
		if baseTop < 0 || lp > baseMax {
			baseMax, baseTop = lp, i
		}
		if lp > -16 {
			kld += math.Exp(lp) * (lp - (float64(l) - norm))
		}
	}
	t := KLDToken{
		NLL:     norm - float64(logits[next]),
		NLLBase: -(scale*float64(q[next]) + minLP),
		KLD:     kld,
		SameTop: top == baseTop,
	}
	t.PDiff = math.Exp(-t.NLL) - math.Exp(-t.NLLBase)
	s.Tokens = append(s.Tokens, t)
	s.sumNLL += t.NLL
	s.sumNLL2 += t.NLL * t.NLL
	s.sumBase += t.NLLBase
	s.sumBase2 += t.NLLBase * t.NLLBase
	s.sumNLLBase += t.NLL * t.NLLBase
	s.sumKLD += kld
	s.sumKLD2 += kld * kld
	d2 := t.PDiff * t.PDiff
	s.sumPD += t.PDiff
	s.sumPD2 += d2
	s.sumPD4 += d2 * d2
	s.maxPD = max(s.maxPD, math.Abs(t.PDiff))
	if t.SameTop {
		s.same++
	}
	return t
}

// Figure is a value and its uncertainty.
type Figure struct{ Value, Unc float64 }

// KLDRunning is what llama-perplexity's per-chunk line shows.
type KLDRunning struct {
	PPL, LnRatio, KLD, RMSPDiff, SameTop Figure // RMSPDiff and SameTop as fractions
}

// Quantile is one line of a percentile list: "99.9%" and its value.
type Quantile struct {
	Label string
	Value float64
}

// KLDSummary is llama-perplexity's closing statistics.
type KLDSummary struct {
	Count                int
	PPL, PPLBase         Figure
	Cor                  float64 // of ln PPL(Q) and ln PPL(base)
	LnRatio, Ratio, Diff Figure  // ln(PPL(Q)/PPL(base)), PPL(Q)/PPL(base), PPL(Q)-PPL(base)
	KLD                  Figure
	KLDQuantiles         []Quantile // Maximum ... Minimum
	PDiff                Figure     // mean Δp, a fraction
	PDiffQuantiles       []Quantile
	RMSPDiff, SameTop    Figure
	MaxAbsPDiff          float64
}

// meanUnc is llama-perplexity's mean_and_uncertainty: the mean and the
// standard error of the mean, 0 for 10 values or fewer.
func meanUnc(sum, sum2 float64, n int) Figure {
	if n < 1 {
		return Figure{}
	}
	c := float64(n)
	f := sum / c
	df := sum2/c - f*f
	if df > 0 && n > 10 {
		df = math.Sqrt(df / (c - 1))
	} else {
		df = 0
	}
	return Figure{f, df}
}

// covariance is llama-perplexity's: of the means of a and b, 0 below 10
// values.
func covariance(sa, sb, sab float64, n int) float64 {
	if n < 10 {
		return 0
	}
	c := float64(n)
	return (sab/c - (sa/c)*(sb/c)) / (c - 1)
}

// Count is the predictions compared so far.
func (s *KLDStats) Count() int { return len(s.Tokens) }

func (s *KLDStats) lnPPLs() (q, base Figure, cov float64, ratio Figure) {
	n := s.Count()
	q = meanUnc(s.sumNLL, s.sumNLL2, n)
	base = meanUnc(s.sumBase, s.sumBase2, n)
	cov = covariance(s.sumNLL, s.sumBase, s.sumNLLBase, n)
	// The variance of a difference; rounding may take an identical pair's
	// a hair below 0, where llama-perplexity would print nan.
	ratio = Figure{q.Value - base.Value, math.Sqrt(max(0, q.Unc*q.Unc+base.Unc*base.Unc-2*cov))}
	return
}

func (s *KLDStats) rms() Figure {
	mse := meanUnc(s.sumPD2, s.sumPD4, s.Count())
	r := Figure{Value: math.Sqrt(mse.Value)}
	if r.Value > 0 {
		r.Unc = 0.5 / r.Value * mse.Unc
	}
	return r
}

func (s *KLDStats) sameTop() Figure {
	n := s.Count()
	if n == 0 {
		return Figure{}
	}
	p := float64(s.same) / float64(n)
	f := Figure{Value: p}
	if n > 1 {
		f.Unc = math.Sqrt(p * (1 - p) / float64(n-1))
	}
	return f
}

// Running is the figures of llama-perplexity's per-chunk line.
func (s *KLDStats) Running() KLDRunning {
	q, _, _, ratio := s.lnPPLs()
	return KLDRunning{
		PPL:      Figure{math.Exp(q.Value), math.Exp(q.Value) * q.Unc},
		LnRatio:  ratio,
		KLD:      meanUnc(s.sumKLD, s.sumKLD2, s.Count()),
		RMSPDiff: s.rms(),
		SameTop:  s.sameTop(),
	}
}

// percentile is llama-perplexity's: linear between the sorted values
// around fraction·(n-1).
func percentile(sorted []float64, fraction float64) float64 {
	if fraction <= 0 {
		return sorted[0]
	}
	if fraction >= 1 {
		return sorted[len(sorted)-1]
	}
	p := fraction * float64(len(sorted)-1)
	ip := int(p)
	p -= float64(ip)
	return (1-p)*sorted[ip] + p*sorted[min(ip+1, len(sorted)-1)]
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 0 {
		return 0.5 * (sorted[n/2] + sorted[n/2-1])
	}
	return sorted[n/2]
}

// quantiles are the lines of a percentile list, highest first; a fraction
// of 0.5 is the median (the mean of the middle two of an even count).
func quantiles(sorted []float64, fractions []float64, labels []string) []Quantile {
	q := make([]Quantile, len(fractions))
	for i, f := range fractions {
		v := percentile(sorted, f)
		if f == 0.5 {
			v = median(sorted)
		}
		q[i] = Quantile{labels[i], v}
	}
	return q
}

var (
	kldFractions = []float64{1, 0.999, 0.99, 0.95, 0.90, 0.5, 0.10, 0.05, 0.01, 0.001, 0}
	kldLabels    = []string{"Maximum", "99.9%  ", "99.0%  ", "95.0%  ", "90.0%  ", "Median ", "10.0%  ", " 5.0%  ", " 1.0%  ", " 0.1%  ", "Minimum"}
	pdFractions  = []float64{1, 0.999, 0.99, 0.95, 0.90, 0.75, 0.5, 0.25, 0.10, 0.05, 0.01, 0.001, 0}
	pdLabels     = []string{"Maximum", "99.9%  ", "99.0%  ", "95.0%  ", "90.0%  ", "75.0%  ", "Median ", "25.0%  ", "10.0%  ", " 5.0%  ", " 1.0%  ", " 0.1%  ", "Minimum"}
)

// Summary is llama-perplexity's closing statistics over what was added;
// it wants at least one prediction.
func (s *KLDStats) Summary() KLDSummary {
	n := s.Count()
	q, base, cov, ratio := s.lnPPLs()
	ppl := Figure{math.Exp(q.Value), math.Exp(q.Value) * q.Unc}
	pplBase := Figure{math.Exp(base.Value), math.Exp(base.Value) * base.Unc}
	r := KLDSummary{Count: n, PPL: ppl, PPLBase: pplBase, LnRatio: ratio}
	if q.Unc > 0 && base.Unc > 0 {
		r.Cor = cov / (q.Unc * base.Unc)
	}
	r.Ratio = Figure{math.Exp(ratio.Value), math.Exp(ratio.Value) * ratio.Unc}
	pplCov := ppl.Value * pplBase.Value * cov
	r.Diff = Figure{ppl.Value - pplBase.Value, math.Sqrt(max(0, ppl.Unc*ppl.Unc+pplBase.Unc*pplBase.Unc-2*pplCov))}
	r.KLD = meanUnc(s.sumKLD, s.sumKLD2, n)
	r.PDiff = meanUnc(s.sumPD, s.sumPD2, n)
	r.RMSPDiff, r.SameTop, r.MaxAbsPDiff = s.rms(), s.sameTop(), s.maxPD
	if n > 0 {
		kl, pd := make([]float64, n), make([]float64, n)
		for i, t := range s.Tokens {
			kl[i], pd[i] = t.KLD, t.PDiff
		}
		slices.Sort(kl)
		slices.Sort(pd)
		r.KLDQuantiles = quantiles(kl, kldFractions, kldLabels)
		r.PDiffQuantiles = quantiles(pd, pdFractions, pdLabels)
	}
	return r
}

// KLDTableHeader is the head of llama-perplexity's per-chunk table.
const KLDTableHeader = "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p"

// WriteRow writes chunk's line of the table, as llama-perplexity prints it.
func (r KLDRunning) WriteRow(w io.Writer, chunk int) {
	fmt.Fprintf(w, "%4d", chunk)
	fmt.Fprintf(w, "    %9.4f ± %9.4f", r.PPL.Value, r.PPL.Unc)
	fmt.Fprintf(w, "    %10.5f ± %10.5f", r.LnRatio.Value, r.LnRatio.Unc)
	fmt.Fprintf(w, "    %10.5f ± %10.5f", r.KLD.Value, r.KLD.Unc)
	fmt.Fprintf(w, "    %6.3f ± %6.3f %%", 100*r.RMSPDiff.Value, 100*r.RMSPDiff.Unc)
	fmt.Fprintf(w, "    %6.3f ± %6.3f %%", 100*r.SameTop.Value, 100*r.SameTop.Unc)
	fmt.Fprintln(w)
}

// Write prints the statistics as llama-perplexity does.
func (r KLDSummary) Write(w io.Writer) {
	fmt.Fprintf(w, "====== Perplexity statistics ======\n")
	fmt.Fprintf(w, "Mean PPL(Q)                   : %10.6f ± %10.6f\n", r.PPL.Value, r.PPL.Unc)
	fmt.Fprintf(w, "Mean PPL(base)                : %10.6f ± %10.6f\n", r.PPLBase.Value, r.PPLBase.Unc)
	fmt.Fprintf(w, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100*r.Cor)
	fmt.Fprintf(w, "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", r.LnRatio.Value, r.LnRatio.Unc)
	fmt.Fprintf(w, "Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", r.Ratio.Value, r.Ratio.Unc)
	fmt.Fprintf(w, "Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", r.Diff.Value, r.Diff.Unc)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "====== KL divergence statistics ======\n")
	fmt.Fprintf(w, "Mean    KLD: %10.6f ± %10.6f\n", r.KLD.Value, r.KLD.Unc)
	for _, q := range r.KLDQuantiles {
		fmt.Fprintf(w, "%s KLD: %10.6f\n", q.Label, q.Value)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "====== Token probability statistics ======\n")
	fmt.Fprintf(w, "Mean    Δp: %6.3f ± %5.3f %%\n", 100*r.PDiff.Value, 100*r.PDiff.Unc)
	for _, q := range r.PDiffQuantiles {
		fmt.Fprintf(w, "%s Δp: %6.3f%%\n", q.Label, 100*q.Value)
	}
	fmt.Fprintf(w, "RMS Δp    : %6.3f ± %5.3f %%\n", 100*r.RMSPDiff.Value, 100*r.RMSPDiff.Unc)
	fmt.Fprintf(w, "Same top p: %6.3f ± %5.3f %%\n", 100*r.SameTop.Value, 100*r.SameTop.Unc)
}

// KLDMinTokens is the count below which llama-perplexity prints no
// closing statistics ("we do not wish to do statistics on so few values").
const KLDMinTokens = 100

// WriteKLDBase scores tokens as ScoreChunks does (standard windows, the
// first chunks of them) and writes every scored prediction's
// log-probabilities to out as a base file: llama-perplexity's
// --kl-divergence-base without --kl-divergence. Nothing is written when
// the text cannot be scored.
func (m *Model) WriteKLDBase(sess *graph.Session, tokens []int, chunks int, stepwise bool, log, out io.Writer) (*Perplexity, error) {
	nctx, nvocab := sess.NCtx(), m.Tok.Size()
	var k *KLDWriter
	r, err := m.Score(sess, tokens, ScoreOptions{Chunks: chunks, Stepwise: stepwise, Log: log,
		Row: func(w Window, _ int, logits []float32, _ int) error {
			if len(logits) != nvocab {
				return fmt.Errorf("the model's logits have %d entries, its vocabulary %d tokens", len(logits), nvocab)
			}
			if k == nil { // the header, once Score has taken the text
				n := len(tokens) / nctx
				if chunks > 0 {
					n = min(n, chunks)
				}
				var err error
				if k, err = NewKLDWriter(out, nctx, nvocab, tokens[:n*nctx]); err != nil {
					return err
				}
			}
			return k.WriteRow(logits)
		}})
	if err != nil {
		return nil, err
	}
	return r, k.Flush()
}

// KLDivergence runs the base file's windows on sess, whose context must be
// the file's, and compares each scored prediction with the base's:
// llama-perplexity's --kl-divergence. chunks (0 or negative: all) scores only
// the file's first chunks windows. table, where not nil, gets
// llama-perplexity's per-chunk table, its header first. The base's tokens
// are run; CheckTokens compares them with a text first.
func (m *Model) KLDivergence(sess *graph.Session, base *KLDBase, chunks int, stepwise bool, table io.Writer) (*KLDStats, error) {
	if err := base.CheckVocab(m); err != nil {
		return nil, err
	}
	if sess.NCtx() != base.NCtx {
		return nil, fmt.Errorf("%s: written with a context of %d; this run's is %d", base.Name, base.NCtx, sess.NCtx())
	}
	s := &KLDStats{}
	if table != nil {
		fmt.Fprintln(table, KLDTableHeader)
	}
	_, err := m.Score(sess, base.Tokens, ScoreOptions{Chunks: chunks, Stepwise: stepwise, anyLength: true,
		Row: func(_ Window, _ int, logits []float32, next int) error {
			if len(logits) != base.NVocab {
				return fmt.Errorf("%s: rows of %d log-probabilities; the model's logits have %d", base.Name, base.NVocab, len(logits))
			}
			row, err := base.ReadRow()
			if err != nil {
				return err
			}
			s.Add(logits, row, next)
			return nil
		},
		Done: func(_ Window, r *Perplexity) error {
			if table != nil {
				s.Running().WriteRow(table, len(r.Windows))
			}
			return nil
		}})
	if err != nil {
		return nil, err
	}
	return s, nil
}
