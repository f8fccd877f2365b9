package avx2

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/pinfer/pinfer/ops/half"
)

// The q4_0 axpy over every row, repacked (q4a16_amd64.s): a dense FFN's
// down projection, y = Σ_r coef[r]·row r over all n_ff rows of
// ffn_down_t. The row kernel (axpyQ4i16a) reads 7-9 GB/s a thread where
// the mat-vecs read 12-18: each row's blocks are unpacked, converted and
// added to y apart, and y goes through memory for every row. Here sixteen
// rows are interleaved by column, so that VPMADDUBSW pairs two rows'
// nibbles of a column with their int8 coefficients, a VPADDW adds rows
// 0-7's sums to rows 8-15's and a VPMADDWD finishes the column's sum over
// the sixteen. As in axpyQ4i16a, each sixteen rows' products coef·d of a
// block are rounded to int8 with one scale: as precise as the q8_0
// activations of the mat-vecs.
//
// A record holds sixteen rows over a chunk of eight blocks (256 columns),
// their d first, a row's eight side by side: the kernel makes the
// coefficients of the eight blocks at once, lanes being blocks, where
// made block by block (a horizontal max, a division and a shuffle chain
// for each) they cost as much as the nibbles' products and did not
// overlap them (ops/avx2/NOTES.md, stop 27). A thread reads two runs of
// chunks side by side, which on two threads read 75-79% of the stream
// against 66-71% for one run of the earlier block-by-block kernel (four
// runs 61-69%). Threads share y by chunks, with no partial sums to add.
// It serves dense runs only: a sparse FFN's scattered rows need the file's
// layout.

// a16Rec is a record: sixteen rows' d over eight blocks (f16, row r's at
// 16r, block j's at 2j), then each block's 256 bytes: four 64-byte parts
// of eight columns each: four bytes a column for rows 0-7, then four for
// rows 8-15, byte i of the first holding row i's nibble of the column
// (low) and row i+4's (high), of the second rows 8+i and 12+i. Blocks past
// the matrix's are zeros.
const a16Rec = 256 + 8*256

// Q4AxpyCols is the columns a record spans: its chunk of eight blocks.
const Q4AxpyCols = 8 * 32

// Q4AxpyChunks is how many chunks of records cover cols columns (the last
// padded with zeros).
func Q4AxpyChunks(cols int) int { return (cols + Q4AxpyCols - 1) / Q4AxpyCols }

// Q4AxpyBytes is the size of PackQ4Axpy's copy of rows q4_0 rows (a
// multiple of sixteen) of cols columns: a record per group of sixteen rows
// and chunk.
func Q4AxpyBytes(rows, cols int) int { return rows / 16 * Q4AxpyChunks(cols) * a16Rec }

// PackQ4Axpy repacks q4_0 rows (cols/32*18 bytes each; their count a
// multiple of sixteen) for AxpyQ4x16: chunk by chunk, each chunk's records
// group by group.
func PackQ4Axpy(w []byte, cols int) []byte {
	p := make([]byte, Q4AxpyBytes(len(w)/max(1, cols/32*q4Block), cols))
	PackQ4AxpyInto(p, w, cols)
	return p
}

// PackQ4AxpyInto is PackQ4Axpy into p (Q4AxpyBytes long).
func PackQ4AxpyInto(p, w []byte, cols int) {
	nb, rb := checkPack("PackQ4Axpy", p, w, cols, 16, func(rows int) int { return Q4AxpyBytes(rows, cols) })
	ng, nc := len(w)/(16*rb), Q4AxpyChunks(cols)
	var rows [16][]byte
	var blk [32 + 256]byte
	// Group by group: a group's sixteen rows (36 KB at 4096 columns) stay
	// in cache while its records, one per chunk, are written.
	for g := range ng {
		for c := range nc {
			dst := p[(c*ng+g)*a16Rec:][:a16Rec]
			clear(dst)
			for j := range min(8, nb-8*c) {
				b := 8*c + j
				for r := range rows {
					rows[r] = w[(16*g+r)*rb+b*q4Block:][:q4Block]
					dst[16*r+2*j], dst[16*r+2*j+1] = rows[r][0], rows[r][1]
				}
				packA16(blk[:], &rows)
				copy(dst[256+256*j:][:256], blk[32:])
			}
		}
	}
}

// packA16 writes the 16 rows' nibbles of one block (rows: their q4_0
// blocks) into dst[32:288], the block's four parts.
func packA16(dst []byte, rows *[16][]byte) {
	le := binary.LittleEndian
	// Eight columns at a time, for rows 0-7 and then 8-15: v[j] holds,
	// byte by byte, row h+j's nibble (low) and row h+j+4's (high) of
	// columns c..c+7.
	for c := 0; c < 32; c += 8 {
		for h := 0; h < 16; h += 8 {
			var v [4]uint64
			for j := range 4 {
				lo, hi := le.Uint64(rows[h+j][2+c%16:]), le.Uint64(rows[h+j+4][2+c%16:])
				if c < 16 {
					v[j] = lo&0x0f0f0f0f0f0f0f0f | (hi&0x0f0f0f0f0f0f0f0f)<<4
				} else {
					v[j] = (lo>>4)&0x0f0f0f0f0f0f0f0f | hi&0xf0f0f0f0f0f0f0f0
				}
			}
			part := dst[32+8*c+4*h:][:32]
			for i := range 8 {
				s := 8 * uint(i)
				le.PutUint32(part[4*i:], uint32(byte(v[0]>>s))|uint32(byte(v[1]>>s))<<8|uint32(byte(v[2]>>s))<<16|uint32(byte(v[3]>>s))<<24)
			}
		}
	}
}

// AxpyQ4x16 adds Σ_r coef[r]·row r to y, over the columns that p holds:
// PackQ4Axpy's copy of len(coef) rows (a multiple of sixteen), the chunks
// of len(y) columns (len(y)/32 blocks) taken whole from its start: the
// copy of chunks c0..c1 (columns 256·c0 on) is p[c0*n/16*a16Rec:c1*n/16*a16Rec]
// for n rows.
func AxpyQ4x16(y []float32, p []byte, coef []float32) {
	ng, nb := len(coef)/16, len(y)/32
	if ng == 0 || len(coef)%16 != 0 || len(y)%32 != 0 || len(p) != Q4AxpyBytes(len(coef), len(y)) {
		panic(fmt.Sprintf("avx2.AxpyQ4x16: y %d, packed %d bytes, %d coefficients", len(y), len(p), len(coef)))
	}
	if nb == 0 {
		return
	}
	if !Available {
		axpyQ4a16Go(y, p, coef)
		return
	}
	// Two runs of whole chunks side by side, then the rest; a last chunk
	// of fewer than eight blocks adds into a copy of its columns.
	cb := ng * a16Rec
	whole := len(y) / Q4AxpyCols
	c := 0
	if m := whole / 2; m > 0 {
		axpyQ4a16k(&y[0], &p[0], &coef[0], ng, m, 2)
		c = 2 * m
	}
	if c < whole {
		axpyQ4a16k(&y[Q4AxpyCols*c], &p[c*cb], &coef[0], ng, whole-c, 1)
	}
	if rest := y[Q4AxpyCols*whole:]; len(rest) > 0 {
		var tail [Q4AxpyCols]float32
		copy(tail[:], rest)
		axpyQ4a16k(&tail[0], &p[whole*cb], &coef[0], ng, 1, 1)
		copy(rest, tail[:])
	}
}

// axpyQ4a16k is axpyQ4a16, or its AVX-512 twin where that runs; called
// directly, not through a func value, so that y does not escape.
func axpyQ4a16k(y *float32, p *byte, coef *float32, ngroups, m, runs int) {
	if AVX512 {
		axpyQ4a16z(y, p, coef, ngroups, m, runs)
		return
	}
	axpyQ4a16(y, p, coef, ngroups, m, runs)
}

// a16Coef rounds a group's coefficients times its rows' d (blk's first 32
// bytes) to int8 with one scale, as the kernel does: the scale, and the
// int8 values by row.
func a16Coef(blk []byte, coef []float32) (s float32, k [16]int32) {
	var a [16]float32
	var m float32
	for r := range 16 {
		a[r] = coef[r] * half.Decode(binary.LittleEndian.Uint16(blk[2*r:]))
		m = max(m, float32(math.Abs(float64(a[r]))))
	}
	m = max(m, 1e-30)
	inv := float32(127) / m
	for r := range 16 {
		k[r] = int32(math.RoundToEven(float64(a[r] * inv)))
	}
	return m * float32(1.0/127), k
}

// axpyQ4a16Go is the kernel in plain Go, operation for operation but the
// last: the kernel's fused multiply-add rounds once, this twice (through
// float64), which may differ by an ulp.
func axpyQ4a16Go(y []float32, p []byte, coef []float32) {
	ng, nb := len(coef)/16, len(y)/32
	var blk [32]byte // a block's sixteen d, as a16Coef reads them
	for c := range Q4AxpyChunks(len(y)) {
		for g := range ng {
			rec := p[(c*ng+g)*a16Rec:][:a16Rec]
			for j := range min(8, nb-8*c) {
				for r := range 16 {
					blk[2*r], blk[2*r+1] = rec[16*r+2*j], rec[16*r+2*j+1]
				}
				s, k := a16Coef(blk[:], coef[16*g:])
				acc := y[32*(8*c+j):][:32]
				parts := rec[256+256*j:][:256]
				for col := range 32 {
					var sum int32
					for h := 0; h < 16; h += 8 {
						for i, v := range parts[64*(col/8)+4*h+4*(col%8):][:4] {
							sum += k[h+i]*(int32(v&15)-8) + k[h+i+4]*(int32(v>>4)-8)
						}
					}
					acc[col] = float32(math.FMA(float64(s), float64(sum), float64(acc[col])))
				}
			}
		}
	}
}
