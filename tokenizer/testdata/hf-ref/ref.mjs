// The independent reference for tokenizer/hf_ref_test.go: Hugging Face's
// tokenizers as the npm package @huggingface/tokenizers (tokenizers.js, the
// tokenizer of transformers.js) runs a tokenizer.json, offline.
//
//   node ref.mjs encode TOKENIZER.json IN.json OUT.json [--as-published]
//   node ref.mjs words TOKENIZER.json IN.json OUT.json [--as-published]
//
// IN: an array of texts. encode's OUT: an array of id arrays, each text
// encoded as transformers' tokenizer(text, add_special_tokens=False)
// encodes it: added tokens in the text are matched first, then normalizer,
// pre-tokenizer and model. words' OUT: an array of arrays of the words that
// the pre-tokenizer alone makes of each text (byte-level text after a
// ByteLevel step), as pre_tokenizer.pre_tokenize_str gives them.
//
// tokenizers.js translates the regexes of a Split to Oniguruma's meaning
// (the Rust crate's engine), but two of its built-in pre-tokenizers still use
// JavaScript's classes, unlike the Rust crate's code, and this script puts
// the Rust crate's back (--as-published leaves the package as it is):
//   - ByteLevel's GPT-2 regex is compiled by Oniguruma in the Rust crate
//     (pre_tokenizers/byte_level.rs), whose \s is Unicode's White_Space
//     (U+0085 is a space, U+FEFF is not); tokenizers.js writes it as a
//     JavaScript regex, whose \s is the other way round for those two;
//   - Digits splits on char::is_numeric in the Rust crate
//     (pre_tokenizers/digits.rs): Unicode's categories Nd, Nl and No, tested
//     on the byte-level characters when it follows ByteLevel (so "²", "¹",
//     "¼" ... stand for the bytes 0xB2, 0xB9, 0xBC ...); tokenizers.js
//     matches JavaScript's \d, the ASCII digits only.
import { readFileSync, writeFileSync } from "node:fs";
import {
  Tokenizer,
  ByteLevelPreTokenizer,
  DigitsPreTokenizer,
  SequencePreTokenizer,
} from "@huggingface/tokenizers";

const rustByteLevel =
  /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+/gu;

function asRustCrate(pre) {
  if (pre instanceof SequencePreTokenizer) {
    pre.tokenizers.forEach(asRustCrate);
  } else if (pre instanceof ByteLevelPreTokenizer) {
    pre.pattern = rustByteLevel;
  } else if (pre instanceof DigitsPreTokenizer) {
    pre.pattern = pre.config.individual_digits ? /[^\p{N}]+|\p{N}/gu : /[^\p{N}]+|\p{N}+/gu;
  }
}

const [cmd, ...args] = process.argv.slice(2);
const published = args.includes("--as-published");
const files = args.filter((a) => a !== "--as-published");
if (!["encode", "words"].includes(cmd) || files.length !== 3) {
  console.error("usage: node ref.mjs encode|words TOKENIZER.json IN.json OUT.json [--as-published]");
  process.exit(2);
}
const tok = new Tokenizer(JSON.parse(readFileSync(files[0], "utf-8")), {});
if (!published) asRustCrate(tok.pre_tokenizer);
const texts = JSON.parse(readFileSync(files[1], "utf-8"));
if (cmd === "words") {
  writeFileSync(files[2], JSON.stringify(texts.map((t) => (t === "" ? [] : tok.pre_tokenizer(t)))));
  process.exit(0);
}
const ids = texts.map((t) => tok.encode(t, { add_special_tokens: false }).ids);
for (const [i, row] of ids.entries()) {
  if (row.some((id) => !Number.isInteger(id))) {
    throw new Error(`text ${i} ${JSON.stringify(texts[i])}: a piece has no id: ${JSON.stringify(row)}`);
  }
}
writeFileSync(files[2], JSON.stringify(ids));
