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
// the sixteen; the blocks come block
// by block (all rows' block 0, then block 1, ...), so that a thread keeps
// its 32 columns of y in registers over all rows, and threads share y by
// columns with no partial sums to add. As in axpyQ4i16a, each sixteen
// rows' products coef·d of a block are rounded to int8 with one scale: as
// precise as the q8_0 activations of the mat-vecs. It serves dense runs
// only: a sparse FFN's scattered rows need the file's layout.

// a16Bytes is a block of sixteen packed rows: their sixteen d (f16), then
// four 64-byte parts of eight columns each: four bytes a column for rows
// 0-7, then four for rows 8-15, byte j of the first holding row j's nibble
// of the column (low) and row j+4's (high), of the second rows 8+j and
// 12+j.
const a16Bytes = 16 * q4Block

// PackQ4Axpy repacks q4_0 rows (cols/32*18 bytes each; their count a
// multiple of sixteen) for AxpyQ4x16: block b of every group of sixteen
// rows in turn, then block b+1.
func PackQ4Axpy(w []byte, cols int) []byte {
	p := make([]byte, len(w))
	PackQ4AxpyInto(p, w, cols)
	return p
}

// PackQ4AxpyInto is PackQ4Axpy into p (len(w) bytes).
func PackQ4AxpyInto(p, w []byte, cols int) {
	nblk, rb := checkPack("PackQ4Axpy", p, w, cols, 16)
	ng := len(w) / (16 * rb)
	// Eight groups (128 rows, in L2) at a time, block by block: their rows
	// are read once, in order, and each block's copies are written
	// side by side. Block by block over the whole matrix would sweep it
	// once a block; group by group would write to every block's place.
	const tile = 8
	var rows [16][]byte
	for g0 := 0; g0 < ng; g0 += tile {
		for b := range nblk {
			for g := g0; g < min(g0+tile, ng); g++ {
				dst := p[(b*ng+g)*a16Bytes:][:a16Bytes]
				for r := range rows {
					rows[r] = w[(16*g+r)*rb+b*q4Block:][:q4Block]
					dst[2*r], dst[2*r+1] = rows[r][0], rows[r][1]
				}
				packA16(dst, &rows)
			}
		}
	}
}

// packA16 writes the 16 rows' nibbles of one block (rows: their q4_0
// blocks) into its packed copy dst.
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
// len(y)/32 blocks of PackQ4Axpy's copy of len(coef) rows (a multiple of
// sixteen), taken whole from its start (the copy of blocks b0..b1 is
// p[b0*n*18:b1*n*18] for n rows).
func AxpyQ4x16(y []float32, p []byte, coef []float32) {
	ng, nb := len(coef)/16, len(y)/32
	if ng == 0 || len(coef)%16 != 0 || len(y)%32 != 0 || len(p) != nb*ng*a16Bytes {
		panic(fmt.Sprintf("avx2.AxpyQ4x16: y %d, packed %d bytes, %d coefficients", len(y), len(p), len(coef)))
	}
	if nb == 0 {
		return
	}
	if !Available {
		axpyQ4a16Go(y, p, coef)
		return
	}
	axpyQ4a16(&y[0], &p[0], &coef[0], ng, nb)
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
	ng := len(coef) / 16
	for b := range len(y) / 32 {
		acc := y[32*b : 32*b+32]
		for g := range ng {
			blk := p[(b*ng+g)*a16Bytes:][:a16Bytes]
			s, k := a16Coef(blk, coef[16*g:])
			for c := range 32 {
				var sum int32
				for h := 0; h < 16; h += 8 {
					for j, v := range blk[32+64*(c/8)+4*h+4*(c%8):][:4] {
						sum += k[h+j]*(int32(v&15)-8) + k[h+j+4]*(int32(v>>4)-8)
					}
				}
				acc[c] = float32(math.FMA(float64(s), float64(sum), float64(acc[c])))
			}
		}
	}
}
