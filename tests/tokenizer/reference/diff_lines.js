// Compares genesis tokenize's JSONL output with the reference's, line by line, as values (not
// bytes: spacing and key order are free). On a difference it prints the first few: line number,
// the input line's kind and an excerpt of it, and both outputs around the first place they part
// (ids with their tokens when given the tokenizer), then exits 1; all equal, it prints nothing.
//
//   NODE_PATH=... node diff_lines.js --what WHAT --input IN [--kinds FILE] [--tokenizer JSON] \
//     REFERENCE_OUT GENESIS_OUT
'use strict';
const fs = require('fs');

const kShown = 5; // differing lines printed in full
const kWindow = 6; // ids or characters shown each side of the first difference

function read_lines(file) {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

function parse(line) {
  try {
    return JSON.parse(line);
  } catch (e) {
    return { unparsed: line };
  }
}

const quote = (s, max = 80) => {
  const q = JSON.stringify(s);
  return q.length > max ? q.slice(0, max) + `..." (${Array.from(s).length} characters)` : q;
};

function same(a, b) {
  if (Array.isArray(a.ids) && Array.isArray(b.ids)) {
    return a.ids.length === b.ids.length && a.ids.every((id, i) => id === b.ids[i]);
  }
  if (typeof a.text === 'string' && typeof b.text === 'string') return a.text === b.text;
  return JSON.stringify(a) === JSON.stringify(b);
}

// "reference [..., 3, 4 | 5, 6]" lines around the first differing id or character.
function describe(ref, gen, token_of) {
  if (Array.isArray(ref.ids) && Array.isArray(gen.ids)) {
    let at = 0;
    while (at < ref.ids.length && ref.ids[at] === gen.ids[at]) ++at;
    const show = (ids) => {
      const from = Math.max(0, at - kWindow);
      const cut = (xs) =>
        xs.map((id) => (token_of ? `${id} ${JSON.stringify(token_of(id))}` : String(id)));
      return (
        `[${from > 0 ? '..., ' : ''}${cut(ids.slice(from, at)).join(', ')} | ` +
        `${cut(ids.slice(at, at + kWindow)).join(', ')}${ids.length > at + kWindow ? ', ...' : ''}]`
      );
    };
    return [
      `first difference at id ${at} (reference: ${ref.ids.length} ids, genesis: ${gen.ids.length})`,
      `reference ${show(ref.ids)}`,
      `genesis   ${show(gen.ids)}`,
    ];
  }
  if (typeof ref.text === 'string' && typeof gen.text === 'string') {
    const a = Array.from(ref.text);
    const b = Array.from(gen.text);
    let at = 0;
    while (at < a.length && a[at] === b[at]) ++at;
    const show = (cs) =>
      `${JSON.stringify(cs.slice(Math.max(0, at - kWindow * 3), at).join(''))} | ` +
      `${JSON.stringify(cs.slice(at, at + kWindow * 3).join(''))}`;
    return [
      `first difference at character ${at} (reference: ${a.length}, genesis: ${b.length})`,
      `reference ${show(a)}`,
      `genesis   ${show(b)}`,
    ];
  }
  const clip = (v) => {
    const s = JSON.stringify(v);
    return s.length > 200 ? `${s.slice(0, 200)}... (${s.length} characters)` : s;
  };
  return [`reference ${clip(ref)}`, `genesis   ${clip(gen)}`];
}

function main() {
  const args = { what: 'output', input: null, kinds: null, tokenizer: null, files: [] };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; ++i) {
    const key = argv[i].startsWith('--') ? argv[i].slice(2) : null;
    if (key !== null && key in args) args[key] = argv[++i];
    else args.files.push(argv[i]);
  }
  if (args.files.length !== 2 || args.input === null) {
    throw new Error(
      'usage: diff_lines.js --what WHAT --input IN [--kinds FILE] [--tokenizer JSON] REF GEN',
    );
  }
  const input = read_lines(args.input);
  const kinds = args.kinds ? read_lines(args.kinds) : [];
  const ref = read_lines(args.files[0]);
  const gen = read_lines(args.files[1]);
  const differing = [];
  for (let i = 0; i < ref.length; ++i) {
    if (i >= gen.length || !same(parse(ref[i]), parse(gen[i]))) differing.push(i);
  }
  if (differing.length === 0 && gen.length === ref.length) return;
  let token_of = null; // loaded only now: a large tokenizer takes seconds to build
  if (args.tokenizer) {
    const tokenizer = require('tokenizers').Tokenizer.fromFile(args.tokenizer);
    token_of = (id) => tokenizer.idToToken(id);
  }

  const out = [`${args.what}: ${differing.length} of ${ref.length} lines differ`];
  if (gen.length !== ref.length) out[0] += `; genesis wrote ${gen.length} lines for ${ref.length}`;
  for (const i of differing.slice(0, kShown)) {
    const request = parse(input[i] ?? '');
    const what =
      typeof request.text === 'string'
        ? quote(request.text)
        : Array.isArray(request.ids)
          ? `${request.ids.length} ids [${request.ids.slice(0, 8).join(', ')}` +
            `${request.ids.length > 8 ? ', ...' : ''}]`
          : quote(input[i] ?? '');
    out.push(`  line ${i + 1}${kinds[i] ? ` (${kinds[i]})` : ''}: ${what}`);
    const lines =
      i < gen.length
        ? describe(parse(ref[i]), parse(gen[i]), token_of)
        : ['genesis wrote no line for it'];
    for (const l of lines) out.push(`    ${l}`);
  }
  if (differing.length > kShown) out.push(`  ... and ${differing.length - kShown} more`);
  process.stdout.write(out.join('\n') + '\n');
  process.exitCode = 1;
}

main();
