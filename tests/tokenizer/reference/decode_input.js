// The id lists decode is compared on, from the reference's encode output on stdin: each list
// whole, a seeded slice of every second one (cutting through a character's bytes, a byte-fallback
// run or a word's leading space), and random lists of the tokenizer's ids, a third of them below
// 300 (byte tokens, specials): decoders' lossy paths (U+FFFD, Strip, Fuse) get what encode never
// makes. The ids come from the file's vocab, not tokenizers, which takes seconds to build gemma3.
//
//   node decode_input.js TOKENIZER_JSON [--seed N] [--kinds FILE] < ids.jsonl > decode.jsonl
// --kinds FILE: where each list comes from ("ids of corpus line 17", "random", ...), one a line.
'use strict';
const fs = require('fs');
const path = require('path');

function make_rng(seed) {
  // mulberry32, as in corpus.js
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)) };
}

function main() {
  const args = { seed: 1, kinds: null, file: null };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--seed') args.seed = Number(argv[++i]);
    else if (argv[i] === '--kinds') args.kinds = argv[++i];
    else if (args.file === null) args.file = argv[i];
    else
      throw new Error(
        'usage: decode_input.js TOKENIZER_JSON [--seed N] [--kinds FILE] < ids.jsonl',
      );
  }
  if (args.file === null)
    throw new Error('usage: decode_input.js TOKENIZER_JSON [--seed N] [--kinds FILE]');
  const file = fs.statSync(args.file).isDirectory()
    ? path.join(args.file, 'tokenizer.json')
    : args.file;
  const rng = make_rng(args.seed);
  const json = JSON.parse(fs.readFileSync(file, 'utf8'));
  const vocab = json.model.vocab; // {token: id}, or a Unigram's [[token, score], ...]
  const ids_known = new Set(Array.isArray(vocab) ? vocab.map((_, i) => i) : Object.values(vocab));
  for (const added of json.added_tokens ?? []) ids_known.add(added.id);

  const out = []; // [where from, ids]
  const lists = fs
    .readFileSync(0, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l).ids);
  lists.forEach((ids, i) => {
    if (Array.isArray(ids)) out.push([`ids of corpus line ${i + 1}`, ids]);
  });
  lists.forEach((ids, i) => {
    if (i % 2 === 1 && Array.isArray(ids) && ids.length >= 2) {
      const begin = rng.int(0, ids.length - 1);
      out.push([
        `slice of corpus line ${i + 1}'s ids`,
        ids.slice(begin, rng.int(begin + 1, ids.length)),
      ]);
    }
  });
  // Ids with a token only: HF's decode drops an id it does not know, where genesis may refuse it.
  const size = [...ids_known].reduce((a, b) => Math.max(a, b), 0) + 1;
  for (let i = 0; i < 400; ++i) {
    const ids = [];
    for (let n = rng.int(1, 20); ids.length < n;) {
      const id = rng.next() < 1 / 3 ? rng.int(0, Math.min(299, size - 1)) : rng.int(0, size - 1);
      if (ids_known.has(id)) ids.push(id);
    }
    out.push(['random', ids]);
  }
  process.stdout.write(out.map(([, ids]) => JSON.stringify({ ids })).join('\n') + '\n');
  if (args.kinds) fs.writeFileSync(args.kinds, out.map(([kind]) => kind).join('\n') + '\n');
}

main();
