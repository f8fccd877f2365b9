package tokenizer

import (
	"fmt"
	"math"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of sentencepiece_model.proto that the reader needs.
const (
	modelPieces     = 1 // ModelProto.pieces (repeated SentencePiece)
	modelTrainer    = 2 // ModelProto.trainer_spec
	modelNormalizer = 3 // ModelProto.normalizer_spec

	piecePiece = 1 // SentencePiece.piece
	pieceScore = 2 // SentencePiece.score
	pieceType  = 3 // SentencePiece.type

	trainerModelType    = 3
	trainerByteFallback = 35
	trainerUnkID        = 40
	trainerBosID        = 41
	trainerEosID        = 42

	normalizerAddDummyPrefix = 3

	modelTypeBPE = 2
)

var (
	modelNames      = map[protowire.Number]string{modelPieces: "pieces", modelTrainer: "trainer_spec", modelNormalizer: "normalizer_spec"}
	pieceNames      = map[protowire.Number]string{piecePiece: "piece", pieceScore: "score", pieceType: "type"}
	trainerNames    = map[protowire.Number]string{trainerModelType: "trainer_spec.model_type", trainerByteFallback: "trainer_spec.byte_fallback", trainerUnkID: "trainer_spec.unk_id", trainerBosID: "trainer_spec.bos_id", trainerEosID: "trainer_spec.eos_id"}
	normalizerNames = map[protowire.Number]string{normalizerAddDummyPrefix: "normalizer_spec.add_dummy_prefix"}
)

// ReadModelProto reads a SentencePiece BPE model (tokenizer.model). The
// normalizer's character map is not applied by this package.
func ReadModelProto(path string) (Vocab, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Vocab{}, err
	}
	fail := func(field, format string, args ...any) (Vocab, error) {
		return Vocab{}, fmt.Errorf("%s: %s: %s", path, field, fmt.Sprintf(format, args...))
	}
	// Proto2 defaults: model_type UNIGRAM, add_dummy_prefix true.
	v := Vocab{UNK: 0, BOS: 1, EOS: 2, AddSpacePrefix: true}
	modelType, byteFallback := int64(1), false

	err = walk(data, modelNames, func(num protowire.Number, typ protowire.Type, val []byte, x uint64) error {
		switch num {
		case modelPieces:
			if typ != protowire.BytesType {
				return fieldErr("pieces", "wire type %d, want bytes", typ)
			}
			p, s, ty, err := readPiece(val)
			if err != nil {
				return fieldErr(fmt.Sprintf("pieces[%d]", len(v.Tokens)), "%v", err)
			}
			v.Tokens, v.Scores, v.Types = append(v.Tokens, p), append(v.Scores, s), append(v.Types, ty)
		case modelTrainer:
			if typ != protowire.BytesType {
				return fieldErr("trainer_spec", "wire type %d, want bytes", typ)
			}
			ids := map[protowire.Number]*int{trainerUnkID: &v.UNK, trainerBosID: &v.BOS, trainerEosID: &v.EOS}
			return walk(val, trainerNames, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				name, known := trainerNames[num]
				if !known {
					return nil
				}
				if typ != protowire.VarintType {
					return fieldErr(name, "wire type %d, want varint", typ)
				}
				switch num {
				case trainerModelType:
					modelType = int64(x)
				case trainerByteFallback:
					byteFallback = x != 0
				default:
					// int32 fields are sign-extended to 64 bits on the wire.
					if n := int64(x); n < math.MinInt32 || n > math.MaxInt32 {
						return fieldErr(name, "%d does not fit an int32", n)
					}
					*ids[num] = int(int32(x))
				}
				return nil
			})
		case modelNormalizer:
			if typ != protowire.BytesType {
				return fieldErr("normalizer_spec", "wire type %d, want bytes", typ)
			}
			return walk(val, normalizerNames, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				if num == normalizerAddDummyPrefix {
					if typ != protowire.VarintType {
						return fieldErr("normalizer_spec.add_dummy_prefix", "wire type %d, want varint", typ)
					}
					v.AddSpacePrefix = x != 0
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return Vocab{}, fmt.Errorf("%s: %w", path, err)
	}
	if modelType != modelTypeBPE {
		return fail("trainer_spec.model_type", "%d is not BPE (2)", modelType)
	}
	if len(v.Tokens) == 0 {
		return fail("pieces", "no pieces")
	}
	if v.UNK < 0 || v.UNK >= len(v.Tokens) {
		return fail("trainer_spec.unk_id", "%d out of range [0,%d)", v.UNK, len(v.Tokens))
	}
	if v.BOS < -1 || v.BOS >= len(v.Tokens) {
		return fail("trainer_spec.bos_id", "%d out of range [-1,%d)", v.BOS, len(v.Tokens))
	}
	if v.EOS < -1 || v.EOS >= len(v.Tokens) {
		return fail("trainer_spec.eos_id", "%d out of range [-1,%d)", v.EOS, len(v.Tokens))
	}
	for i, ty := range v.Types {
		if (ty == Normal || ty == UserDefined) && v.Tokens[i] == "" {
			return fail(fmt.Sprintf("pieces[%d].piece", i), "empty")
		}
	}
	if byteFallback {
		seen := 0
		for i, ty := range v.Types {
			if ty == Byte {
				if _, ok := parseByteToken(v.Tokens[i]); !ok {
					return fail(fmt.Sprintf("pieces[%d].piece", i), "byte piece %q, want <0xNN>", v.Tokens[i])
				}
				seen++
			}
		}
		if seen != 256 {
			return fail("trainer_spec.byte_fallback", "set, but the model has %d byte pieces, want 256", seen)
		}
	}
	// Models with a BOS piece are used with BOS prepended (Llama's convention).
	v.AddBOS = v.BOS >= 0
	// New's checks are the tokenizer's; a file they reject fails here, by name.
	if _, err := New(v); err != nil {
		return fail("pieces", "%v", err)
	}
	return v, nil
}

type protoError struct{ field, msg string }

func (e *protoError) Error() string { return e.field + ": " + e.msg }

func fieldErr(field, format string, args ...any) error {
	return &protoError{field, fmt.Sprintf(format, args...)}
}

// walk calls fn for each field of a message: val for bytes fields, x for
// varint and fixed ones. names labels fields in errors.
func walk(b []byte, names map[protowire.Number]string, fn func(num protowire.Number, typ protowire.Type, val []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fieldErr("tag", "%v", protowire.ParseError(n))
		}
		b = b[n:]
		var val []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			x = uint64(v)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			val, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			name, ok := names[num]
			if !ok {
				name = fmt.Sprintf("field %d", num)
			}
			return fieldErr(name, "%v", protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, val, x); err != nil {
			return err
		}
	}
	return nil
}

func readPiece(b []byte) (piece string, score float32, typ int32, err error) {
	typ = Normal
	hasPiece := false
	err = walk(b, pieceNames, func(num protowire.Number, wt protowire.Type, val []byte, x uint64) error {
		switch num {
		case piecePiece:
			if wt != protowire.BytesType {
				return fieldErr("piece", "wire type %d, want bytes", wt)
			}
			piece, hasPiece = string(val), true
		case pieceScore:
			if wt != protowire.Fixed32Type {
				return fieldErr("score", "wire type %d, want fixed32", wt)
			}
			score = math.Float32frombits(uint32(x))
		case pieceType:
			if wt != protowire.VarintType {
				return fieldErr("type", "wire type %d, want varint", wt)
			}
			if x < Normal || x > Byte {
				return fieldErr("type", "unknown type %d", x)
			}
			typ = int32(x)
		}
		return nil
	})
	if err == nil && !hasPiece {
		err = fieldErr("piece", "missing")
	}
	return piece, score, typ, err
}
