// The reference side of `genesis tokenize`: the same JSONL in and out, computed by Hugging Face
// tokenizers (its Rust core through the npm package). Encode: {"text": ...} -> {"ids": [...]};
// --decode: {"ids": [...]} -> {"text": ...}, special tokens kept. A bad line gives {"error": ...}
// in its place and exit status 1. Lines go to the library 1000 at a time (encodeBatch/decodeBatch,
// which run on RAYON_NUM_THREADS threads); one batch at a time, as a plain user program would.
//
//   NODE_PATH=$(install.sh --dir)/node_modules \
//     node encode.js TOKENIZER_JSON [--no-special-tokens] [--decode] [--batch N] < in > out
// TOKENIZER_JSON: a tokenizer.json, or a directory holding one. Leaves out genesis's vocab.json +
// merges.txt form (make_gpt2_tokenizer.js writes the tokenizer.json such a pair stands for).
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

function parse_args(argv) {
  const args = { tokenizer: null, special: true, decode: false, batch: 1000 };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--no-special-tokens') args.special = false;
    else if (a === '--decode') args.decode = true;
    else if (a === '--batch') args.batch = Number(argv[++i]);
    else if (!a.startsWith('--') && args.tokenizer === null) args.tokenizer = a;
    else throw new Error(`unknown argument ${a}`);
  }
  if (args.tokenizer === null || !(args.batch >= 1)) {
    throw new Error('usage: encode.js TOKENIZER_JSON [--no-special-tokens] [--decode] [--batch N]');
  }
  if (fs.statSync(args.tokenizer).isDirectory()) {
    args.tokenizer = path.join(args.tokenizer, 'tokenizer.json');
  }
  return args;
}

async function read_stdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const lines = Buffer.concat(chunks).toString('utf8').split('\n');
  if (lines[lines.length - 1] === '') lines.pop(); // the newline that ends the last line
  return lines;
}

// A lone surrogate (JSON "\ud800") has no UTF-8 form: refused, not passed on as U+FFFD.
const kLoneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

// The request of one line, or an Error saying what is wrong with it.
function parse_line(line, decode) {
  let value;
  try {
    value = JSON.parse(line);
  } catch (e) {
    return new Error(`not JSON: ${e.message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return new Error('not a JSON object');
  }
  if (decode) {
    const ids = value.ids;
    if (
      !Array.isArray(ids) ||
      !ids.every((id) => Number.isInteger(id) && id >= 0 && id < 2 ** 32)
    ) {
      return new Error('"ids" must be an array of non-negative integers');
    }
    return ids;
  }
  if (typeof value.text !== 'string') return new Error('"text" must be a string');
  if (kLoneSurrogate.test(value.text)) return new Error('"text" holds a lone surrogate');
  return value.text;
}

// One output line per request: the batch call, or each request alone when the batch fails, so
// that one bad line does not take its 999 neighbours with it.
async function run_batch(tokenizer, requests, args) {
  const line_of = (result) =>
    JSON.stringify(args.decode ? { text: result } : { ids: result.getIds() });
  const one = (r) =>
    args.decode
      ? tokenizer.decode(r, false)
      : tokenizer.encode(r, null, { addSpecialTokens: args.special });
  const valid = requests.filter((r) => !(r instanceof Error));
  let results = null;
  try {
    results = await (args.decode
      ? tokenizer.decodeBatch(valid, false)
      : tokenizer.encodeBatch(valid, { addSpecialTokens: args.special }));
  } catch (e) {
    results = null;
  }
  const out = [];
  let failed = 0;
  let next = 0;
  for (const r of requests) {
    let line;
    if (r instanceof Error) {
      line = JSON.stringify({ error: r.message });
    } else if (results !== null) {
      line = line_of(results[next++]);
    } else {
      try {
        line = line_of(await one(r));
      } catch (e) {
        line = JSON.stringify({ error: String(e.message || e) });
      }
    }
    if (line.startsWith('{"error"')) ++failed;
    out.push(line);
  }
  return { text: out.join('\n') + '\n', failed };
}

function write(text) {
  return new Promise((resolve, reject) => {
    process.stdout.write(text, (e) => (e ? reject(e) : resolve()));
  });
}

async function main() {
  const args = parse_args(process.argv.slice(2));
  const tokenizer = Tokenizer.fromFile(args.tokenizer);
  const lines = await read_stdin();
  let failed = 0;
  for (let start = 0; start < lines.length; start += args.batch) {
    const requests = lines.slice(start, start + args.batch).map((l) => parse_line(l, args.decode));
    const batch = await run_batch(tokenizer, requests, args);
    failed += batch.failed;
    await write(batch.text);
  }
  if (failed > 0) {
    process.stderr.write(`encode.js: ${failed} of ${lines.length} lines failed\n`);
    process.exitCode = 1;
  }
}

main().catch((e) => {
  process.stderr.write(`encode.js: ${e.message}\n`);
  process.exitCode = 2;
});
