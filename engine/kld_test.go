package engine

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
	"github.com/stretchr/testify/require"
)

// The base file's layout, built byte by byte from llama-perplexity's
// (tools/perplexity/perplexity.cpp: perplexity() writes "_logits_", n_ctx,
// n_vocab, n_chunk as 32-bit ints, the n_chunk·n_ctx tokens, then per
// chunk n_ctx-1-n_ctx/2 rows of nv = 2·((n_vocab+1)/2)+4 uint16: float
// scale, float min_log_prob, the n_vocab quantized log-probs, padding),
// with the rows quantized by hand from its log_softmax(): min_logit floored
// at max-16, scale = (max-min)/65535, q = nearest((l-min)/scale) for
// l > min, else 0. The writer must give these bytes, and the reader must
// read them back.
func TestKLDFileLayoutByHand(t *testing.T) {
	const nctx, nvocab = 4, 3 // odd: each row carries one uint16 of padding
	tokens := []int{1, 2, 0, 2, 1, 0, 0, 2}
	rows := [][]float32{
		{0.5, -1.25, 2.0}, // spans 3.25: min_logit is the minimum
		{-30, 1, -2},      // spans 31: min_logit is 1-16 = -15, -30 below it
	}
	type row struct {
		scale, minLP float32
		q            [3]uint16
	}
	lse := func(l []float32, mx float64) float64 {
		var s float64
		for _, v := range l {
			s += math.Exp(float64(v) - mx)
		}
		return math.Log(s)
	}
	want := []row{
		{scale: float32(3.25) / 65535, minLP: float32(-1.25 - 2 - lse(rows[0], 2)), q: [3]uint16{35288 /* 1.75/3.25·65535 = 35288.08 */, 0, 65535}},
		{scale: float32(16) / 65535, minLP: float32(-15 - 1 - lse(rows[1], 1)), q: [3]uint16{0, 65535, 53247 /* 13/16·65535 = 53247.19 */}},
	}

	var hand bytes.Buffer
	hand.WriteString("_logits_")
	for _, v := range []int32{nctx, nvocab, 2} {
		binary.Write(&hand, binary.LittleEndian, v)
	}
	for _, v := range tokens {
		binary.Write(&hand, binary.LittleEndian, int32(v))
	}
	require.Equal(t, 20+4*8, hand.Len())
	for _, r := range want {
		binary.Write(&hand, binary.LittleEndian, r.scale)
		binary.Write(&hand, binary.LittleEndian, r.minLP)
		binary.Write(&hand, binary.LittleEndian, r.q)
		binary.Write(&hand, binary.LittleEndian, uint16(0))
	}
	require.Equal(t, 20+4*8+2*2*(2*2+4), hand.Len())

	var out bytes.Buffer
	w, err := NewKLDWriter(&out, nctx, nvocab, tokens)
	require.NoError(t, err)
	for _, l := range rows {
		require.NoError(t, w.WriteRow(l))
	}
	require.NoError(t, w.Flush())
	got := out.Bytes()
	require.Len(t, got, hand.Len())
	h := hand.Bytes()
	require.Equal(t, h[:52], got[:52], "header and tokens")
	for i, r := range want {
		off := 52 + 16*i
		scale := math.Float32frombits(binary.LittleEndian.Uint32(got[off:]))
		minLP := math.Float32frombits(binary.LittleEndian.Uint32(got[off+4:]))
		require.Equal(t, r.scale, scale, "row %d", i)
		require.InDelta(t, r.minLP, minLP, 1e-6, "row %d", i)
		require.Equal(t, h[off+8:off+16], got[off+8:off+16], "row %d: q and padding", i)
	}

	// The reader takes the hand-made file: header, tokens, then rows.
	b, err := ReadKLDBase("hand.kld", bytes.NewReader(h), int64(len(h)))
	require.NoError(t, err)
	require.Equal(t, []int{nctx, nvocab, 2}, []int{b.NCtx, b.NVocab, b.NChunk})
	require.Equal(t, tokens, b.Tokens)
	for i, r := range want {
		row, err := b.ReadRow()
		require.NoError(t, err)
		require.Equal(t, float64(r.scale), RowScale(row))
		for k := range nvocab {
			require.Equal(t, float64(r.scale)*float64(r.q[k])+float64(r.minLP), DecodeLogProb(row, k), "row %d, token %d", i, k)
		}
	}
	_, err = b.ReadRow()
	require.ErrorContains(t, err, "all 2 rows were read")
}

// The uint16 format stores each log-probability within half a step of
// scale = (max-min_logit)/65535 ≤ 16/65535 where the logit is above
// min_logit = max(min, max-16); those below read back as min_log_prob,
// which is at least their log-probability. The log-probabilities are
// computed here in float64 from the logits.
func TestKLDStorageError(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var cases [][]float32
	for _, spread := range []float64{0.01, 1, 4, 8, 30} {
		for range 20 {
			l := make([]float32, 1000+rng.IntN(50))
			for i := range l {
				l[i] = float32(spread*rng.NormFloat64() + 3)
			}
			cases = append(cases, l)
		}
	}
	// And the logits of a real model.
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()
	ids := m.Encode("ROMEO:\nWhat say you, my lord? I will not")
	logits, err := m.NewSession(64, nil).Forward(ids, true)
	require.NoError(t, err)
	for j := range ids {
		cases = append(cases, append([]float32(nil), logits.Row(j)...))
	}
	cases = append(cases, []float32{2, 2, 2}) // all equal: scale 0

	var worstRatio float64
	for c, l := range cases {
		row := make([]uint16, kldRowLen(len(l)))
		EncodeLogProbs(l, row)
		mx, mn := float64(slices.Max(l)), float64(slices.Min(l))
		floor := math.Max(mn, mx-16)
		var s float64
		for _, v := range l {
			s += math.Exp(float64(v) - mx)
		}
		norm := mx + math.Log(s)
		scale := RowScale(row)
		require.InEpsilon(t, (mx-floor)/65535+1e-300, scale+1e-300, 1e-6, "case %d", c)
		require.LessOrEqual(t, scale, 16.0/65535*(1+1e-6))
		minLP := floor - norm
		for i, v := range l {
			exact := float64(v) - norm
			got := DecodeLogProb(row, i)
			if float64(v) > floor {
				err := math.Abs(got - exact)
				// Half a step, and the float32 rounding of scale and
				// min_log_prob over a span of 16 (a few 1e-6).
				require.LessOrEqual(t, err, scale/2+4e-6, "case %d, token %d", c, i)
				if scale > 0 {
					worstRatio = math.Max(worstRatio, err/(scale/2))
				}
			} else {
				require.InDelta(t, minLP, got, 4e-6, "case %d, token %d", c, i)
				require.LessOrEqual(t, exact, got+4e-6, "case %d, token %d", c, i)
			}
		}
		if len(l)%2 == 1 {
			require.Zero(t, row[len(row)-1], "padding")
		}
	}
	// The bound is reached, not just respected.
	require.Greater(t, worstRatio, 0.9)
}

// heldoutIDs is the first n tokens of the held-out Shakespeare text.
func heldoutIDs(t *testing.T, m *Model, n int) []int {
	t.Helper()
	text, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "heldout.txt"))
	require.NoError(t, err)
	ids := m.Encode(string(text))
	require.Greater(t, len(ids), n)
	return ids[:n]
}

// handToken is one scored prediction compared in float64 from the two
// runs' logits, as llama-perplexity's kl_divergence defines it.
type handToken struct {
	kld, pdiff, nll, nllBase float64
	sameTop                  bool
	topMargin                float64 // the base's gap between its two best logits
	absLogRatio              float64 // Σ p_base |log p_base - log q|
}

// handKLD compares base logits (what the base file holds) with this run's
// for a prediction of next: KL(p_base ‖ q) = Σ p_base (log p_base - log q)
// over the base's tokens whose log-probability is above -16 (kl_divergence
// skips the rest), p - p_base of next, and whether both rank the same token
// first. The base's log-probability of next is what the file can hold: not
// below the row's floor max(min, max-16) - log Σ exp.
func handKLD(base, cur []float32, next int) handToken {
	lsm := func(l []float32) []float64 {
		mx := float64(slices.Max(l))
		var s float64
		for _, v := range l {
			s += math.Exp(float64(v) - mx)
		}
		out := make([]float64, len(l))
		for i, v := range l {
			out[i] = float64(v) - mx - math.Log(s)
		}
		return out
	}
	p, q := lsm(base), lsm(cur)
	var h handToken
	for i := range p {
		if p[i] > -16 {
			h.kld += math.Exp(p[i]) * (p[i] - q[i])
		}
		h.absLogRatio += math.Exp(p[i]) * math.Abs(p[i]-q[i])
	}
	// The row's floor, min_log_prob: max(min, max-16) - max - log Σ exp(l -
	// max), where the log-probability at the max is -log Σ exp(l - max).
	mx := slices.Max(base)
	floor := math.Max(float64(slices.Min(base)), float64(mx)-16) - float64(mx) + p[slices.Index(base, mx)]
	h.nll, h.nllBase = -q[next], -math.Max(p[next], floor)
	h.pdiff = math.Exp(-h.nll) - math.Exp(-h.nllBase)
	top, ctop := slices.Index(base, slices.Max(base)), slices.Index(cur, slices.Max(cur))
	h.sameTop = top == ctop
	sorted := slices.Clone(base)
	slices.Sort(sorted)
	h.topMargin = float64(sorted[len(sorted)-1] - sorted[len(sorted)-2])
	return h
}

// handWindows runs the standard windows by hand on a fresh session each
// (llama-perplexity's perplexity() and kl_divergence(): window i is tokens
// [i·n_ctx, (i+1)·n_ctx) with BOS in place of its first, and its positions
// n_ctx/2 ... n_ctx-2 predict the text's next tokens) and returns each
// scored position's logits and the token it predicts.
func handWindows(t *testing.T, m *Model, pred predictors.Predictor, ids []int, nctx int) (rows [][]float32, next []int) {
	t.Helper()
	for start := 0; start+nctx <= len(ids); start += nctx {
		win := slices.Clone(ids[start : start+nctx])
		win[0] = m.Tok.BOS()
		s := m.NewSession(nctx, nil)
		s.SetPredictor(pred)
		logits, err := s.Forward(win, true)
		require.NoError(t, err)
		for j := nctx / 2; j <= nctx-2; j++ {
			rows = append(rows, slices.Clone(logits.Row(j)))
			next = append(next, ids[start+j+1])
		}
	}
	return rows, next
}

// llama-perplexity's closing figures, computed here from hand values.
func handMeanUnc(v []float64) (mean, unc float64) {
	var s, s2 float64
	for _, x := range v {
		s += x
		s2 += x * x
	}
	n := float64(len(v))
	mean = s / n
	if d := s2/n - mean*mean; d > 0 && len(v) > 10 {
		unc = math.Sqrt(d / (n - 1))
	}
	return
}

func handPercentile(sorted []float64, f float64) float64 {
	p := f * float64(len(sorted)-1)
	i := int(p)
	p -= float64(i)
	return (1-p)*sorted[i] + p*sorted[min(i+1, len(sorted)-1)]
}

// A model against its own base: the KL divergence is the storage error's
// (|KLD| ≤ about scale/2 = 1.2e-4 a token), Δp ~0 and the same token on top
// every time; the PPL the KL run reports is the plain perplexity's.
func TestKLDAgainstItself(t *testing.T) {
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()
	const nctx = 64
	ids := heldoutIDs(t, m, 6*nctx+17)

	var file bytes.Buffer
	r, err := m.WriteKLDBase(m.NewSession(nctx, nil), ids, -1, false, nil, &file)
	require.NoError(t, err)
	require.Len(t, r.Windows, 6)
	base, err := ReadKLDBase("self.kld", bytes.NewReader(file.Bytes()), int64(file.Len()))
	require.NoError(t, err)
	require.Equal(t, ids[:6*nctx], base.Tokens)
	require.NoError(t, base.CheckTokens(ids, "text"))

	var table strings.Builder
	s, err := m.KLDivergence(m.NewSession(nctx, nil), base, -1, false, &table)
	require.NoError(t, err)
	require.Equal(t, r.Scored, s.Count())
	for i, tok := range s.Tokens {
		require.LessOrEqual(t, math.Abs(tok.KLD), 16.0/65535/2*1.01, "token %d", i)
		require.True(t, tok.SameTop, "token %d", i)
		require.InDelta(t, 0, tok.PDiff, 2e-4, "token %d", i)
	}
	sum := s.Summary()
	require.InDelta(t, 0, sum.KLD.Value, 2e-5)
	require.Equal(t, 1.0, sum.SameTop.Value)
	require.InEpsilon(t, r.PPL, sum.PPL.Value, 1e-9)
	require.InDelta(t, 0, sum.RMSPDiff.Value, 1e-4)

	// The table: its header, then one line a chunk.
	lines := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
	require.Len(t, lines, 7)
	require.Equal(t, KLDTableHeader, lines[0])
	require.Regexp(t, `^   6 +\d+\.\d{4} ± +\d+\.\d{4} +-?\d+\.\d{5} ± +\d+\.\d{5} +-?\d\.\d{5} ± +\d\.\d{5} +\d\.\d{3} ± +\d\.\d{3} % +100\.000 ± +0\.000 %$`, lines[6])
}

// Dense base against the sparse path of a poor predictor (a rank-16
// fc1/fc2, recall below 0.5): every token's KL divergence, Δp, NLLs and top
// agreement are those computed in float64 from the two paths' logits,
// each window run by hand on a fresh session; the closing statistics are
// llama-perplexity's formulas over those hand values.
func TestKLDSparseAgainstHand(t *testing.T) {
	m := loadLowRank(t, 16)
	defer m.Close()
	mlp, err := m.Predictor("mlp")
	require.NoError(t, err)
	const nctx = 64
	ids := heldoutIDs(t, m, 8*nctx)

	var file bytes.Buffer
	_, err = m.WriteKLDBase(m.NewSession(nctx, nil), ids, -1, false, nil, &file)
	require.NoError(t, err)
	base, err := ReadKLDBase("dense.kld", bytes.NewReader(file.Bytes()), int64(file.Len()))
	require.NoError(t, err)
	sess := m.NewSession(nctx, nil)
	sess.SetPredictor(mlp)
	s, err := m.KLDivergence(sess, base, -1, false, nil)
	require.NoError(t, err)

	dense, next := handWindows(t, m, nil, ids, nctx)
	sparse, next2 := handWindows(t, m, mlp, ids, nctx)
	require.Equal(t, next, next2)
	require.Len(t, s.Tokens, len(next))
	require.Equal(t, 8*(nctx-1-nctx/2), len(next))
	var kl, pd, nll, nllBase []float64
	same, flips := 0, 0
	for i := range next {
		h := handKLD(dense[i], sparse[i], next[i])
		got := s.Tokens[i]
		tol := 1.3e-4*(1+h.absLogRatio) + 1e-6
		require.InDelta(t, h.kld, got.KLD, tol, "token %d", i)
		require.InDelta(t, h.nll, got.NLL, 1e-7, "token %d", i)
		require.InDelta(t, h.nllBase, got.NLLBase, 1.3e-4, "token %d", i)
		require.InDelta(t, h.pdiff, got.PDiff, 2e-4, "token %d", i)
		if h.sameTop != got.SameTop {
			// Only a near tie in the base, which its storage may reorder.
			require.Less(t, h.topMargin, 2.5e-4, "token %d", i)
			flips++
		}
		if h.sameTop {
			same++
		}
		kl, pd = append(kl, h.kld), append(pd, h.pdiff)
		nll, nllBase = append(nll, h.nll), append(nllBase, h.nllBase)
	}
	require.Zero(t, flips)

	sum := s.Summary()
	n := float64(len(next))
	meanKL, uncKL := handMeanUnc(kl)
	require.Greater(t, meanKL, 0.05, "the sparse path drifts")
	require.InDelta(t, meanKL, sum.KLD.Value, 1.3e-4*2)
	require.InEpsilon(t, uncKL, sum.KLD.Unc, 1e-2)
	require.InDelta(t, float64(same)/n, sum.SameTop.Value, 1e-12)
	require.InDelta(t, math.Sqrt(float64(same)/n*(1-float64(same)/n)/(n-1)), sum.SameTop.Unc, 1e-12)
	require.Less(t, sum.SameTop.Value, 1.0)

	mq, uq := handMeanUnc(nll)
	mb, ub := handMeanUnc(nllBase)
	require.InEpsilon(t, math.Exp(mq), sum.PPL.Value, 1e-9)
	require.InEpsilon(t, math.Exp(mq)*uq, sum.PPL.Unc, 1e-6)
	require.InEpsilon(t, math.Exp(mb), sum.PPLBase.Value, 2e-4)
	require.InDelta(t, mq-mb, sum.LnRatio.Value, 2e-4)
	require.InEpsilon(t, math.Exp(mq-mb), sum.Ratio.Value, 2e-4)
	var cov float64
	for i := range nll {
		cov += nll[i] * nllBase[i]
	}
	cov = (cov/n - mq*mb) / (n - 1)
	require.InEpsilon(t, math.Sqrt(uq*uq+ub*ub-2*cov), sum.LnRatio.Unc, 1e-2)
	require.InEpsilon(t, cov/(uq*ub), sum.Cor, 1e-3)

	var pd2 []float64
	for _, d := range pd {
		pd2 = append(pd2, d*d)
	}
	mse, mseUnc := handMeanUnc(pd2)
	require.InDelta(t, math.Sqrt(mse), sum.RMSPDiff.Value, 2e-4)
	require.InEpsilon(t, 0.5/math.Sqrt(mse)*mseUnc, sum.RMSPDiff.Unc, 1e-2)
	meanPD, _ := handMeanUnc(pd)
	require.InDelta(t, meanPD, sum.PDiff.Value, 2e-4)

	slices.Sort(kl)
	slices.Sort(pd)
	wantKL := []float64{kl[len(kl)-1], handPercentile(kl, 0.999), handPercentile(kl, 0.99), handPercentile(kl, 0.95), handPercentile(kl, 0.90),
		(kl[len(kl)/2] + kl[len(kl)/2-1]) / 2, handPercentile(kl, 0.10), handPercentile(kl, 0.05), handPercentile(kl, 0.01), handPercentile(kl, 0.001), kl[0]}
	require.Len(t, sum.KLDQuantiles, len(wantKL))
	for i, q := range sum.KLDQuantiles {
		require.InDelta(t, wantKL[i], q.Value, 1e-3, "KLD %s", q.Label)
	}
	wantPD := []float64{pd[len(pd)-1], handPercentile(pd, 0.999), handPercentile(pd, 0.99), handPercentile(pd, 0.95), handPercentile(pd, 0.90), handPercentile(pd, 0.75),
		(pd[len(pd)/2] + pd[len(pd)/2-1]) / 2, handPercentile(pd, 0.25), handPercentile(pd, 0.10), handPercentile(pd, 0.05), handPercentile(pd, 0.01), handPercentile(pd, 0.001), pd[0]}
	require.Len(t, sum.PDiffQuantiles, len(wantPD))
	for i, q := range sum.PDiffQuantiles {
		require.InDelta(t, wantPD[i], q.Value, 2e-4, "Δp %s", q.Label)
	}
	t.Logf("dense vs rank-16 mlp, %d tokens: mean KLD %.4f, same top %.1f%%, PPL %.2f vs %.2f (stored base), RMS Δp %.2f%%",
		int(n), sum.KLD.Value, 100*sum.SameTop.Value, sum.PPL.Value, sum.PPLBase.Value, 100*sum.RMSPDiff.Value)

	// --chunks 3 of the base's 8: the first three chunks' predictions.
	base, err = ReadKLDBase("dense.kld", bytes.NewReader(file.Bytes()), int64(file.Len()))
	require.NoError(t, err)
	s3, err := m.KLDivergence(sess, base, 3, false, nil)
	require.NoError(t, err)
	require.Equal(t, s.Tokens[:3*(nctx-1-nctx/2)], s3.Tokens)
}

// Every mismatch is one error line naming the file and what differs.
func TestKLDBaseErrors(t *testing.T) {
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()
	const nctx = 16
	ids := heldoutIDs(t, m, 3*nctx)
	var file bytes.Buffer
	_, err = m.WriteKLDBase(m.NewSession(nctx, nil), ids, -1, false, nil, &file)
	require.NoError(t, err)
	good := file.Bytes()
	read := func(b []byte) (*KLDBase, error) {
		return ReadKLDBase("base.kld", bytes.NewReader(b), int64(len(b)))
	}
	oneLine := func(err error, want ...string) {
		t.Helper()
		require.Error(t, err)
		require.NotContains(t, err.Error(), "\n")
		require.True(t, strings.HasPrefix(err.Error(), "base.kld: "), err.Error())
		for _, w := range want {
			require.Contains(t, err.Error(), w)
		}
	}
	patch := func(off int, v int32) []byte {
		b := slices.Clone(good)
		binary.LittleEndian.PutUint32(b[off:], uint32(v))
		return b
	}

	_, err = read([]byte("hello, world: a text file, not log-probabilities"))
	oneLine(err, "not a llama-perplexity log-probability file", `"hello, w"`)
	_, err = read([]byte("_log"))
	oneLine(err, "not a llama-perplexity log-probability file")
	for _, cut := range []int{10, 20, 40, len(good) - 1, len(good) - 2*kldRowLen(1024)} {
		_, err = read(good[:cut])
		oneLine(err, "truncated")
	}
	_, err = read(append(slices.Clone(good), 0, 0))
	oneLine(err, "past the")
	_, err = read(patch(8, 2))
	oneLine(err, "a context of 2")
	_, err = read(patch(16, 1<<30)) // a header that asks for far more than the file
	oneLine(err, "truncated")
	_, err = read(patch(12, 0x7fffffff))
	oneLine(err, "truncated")
	huge := patch(8, 0x7fffffff)
	binary.LittleEndian.PutUint32(huge[12:], 0x7fffffff)
	binary.LittleEndian.PutUint32(huge[16:], 0x7fffffff)
	_, err = read(huge)
	oneLine(err, "truncated", "need more than 2^63")
	_, err = read(patch(20+4*5, 5000))
	oneLine(err, "token 5", "5000", "outside the vocabulary of 1024")
	bad := slices.Clone(good)
	binary.LittleEndian.PutUint32(bad[20+4*len(ids):], math.Float32bits(float32(math.NaN())))
	bb, err := read(bad)
	require.NoError(t, err)
	_, err = bb.ReadRow()
	oneLine(err, "chunk 1, position 8", "scale NaN")

	// The model's vocabulary and context, and the text's tokens.
	var small bytes.Buffer
	w, err := NewKLDWriter(&small, nctx, 1000, ids[:nctx])
	require.NoError(t, err)
	for range kldRows(nctx) {
		require.NoError(t, w.WriteRow(make([]float32, 1000)))
	}
	require.NoError(t, w.Flush())
	b, err := read(small.Bytes())
	require.NoError(t, err)
	_, err = m.KLDivergence(m.NewSession(nctx, nil), b, -1, false, nil)
	oneLine(err, "vocabulary of 1000 tokens", "the model's has 1024")

	b, err = read(good)
	require.NoError(t, err)
	_, err = m.KLDivergence(m.NewSession(2*nctx, nil), b, -1, false, nil)
	oneLine(err, "context of 16", "this run's is 32")

	other := slices.Clone(ids)
	other[nctx+3]++
	oneLine(b.CheckTokens(other, "text.txt"), "token 19 (chunk 2, position 3)", "text.txt")
	oneLine(b.CheckTokens(ids[:2*nctx], "text.txt"), "holds 48 tokens, text.txt only 32")
	require.NoError(t, b.CheckTokens(append(slices.Clone(ids), 5, 6), "text.txt"))
}
