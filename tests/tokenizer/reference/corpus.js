// The texts genesis tokenize is compared on, JSONL {"text": ...}, the same for the same seed:
// tests/tokenizer/corpus/real.txt's lines alone and in runs, then seeded hard cases (emoji
// sequences, combining marks, whitespace of every kind, CR and CRLF, digit runs, contractions,
// special tokens and near misses, long repeats, code points from every plane, empty texts) and
// real lines bent by them. --bytes N: N bytes of real-looking text only, for bench/tokenizer.sh.
//
//   node corpus.js [--seed N] [--real FILE] [--kinds FILE] [--bytes N] > corpus.jsonl
// --kinds FILE: each line's kind ("real", "whitespace", ...), one a line, for diff messages.
// Leaves out lone surrogates: they have no UTF-8 form, so no tokenizer sees them.
'use strict';
const fs = require('fs');
const path = require('path');

// mulberry32: small, fast and the same on every platform, unlike Math.random.
function make_rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)); // lo..hi inclusive
  const pick = (list) => list[Math.floor(next() * list.length)];
  const chance = (p) => next() < p;
  return { next, int, pick, chance };
}

// prettier-ignore
const kSpecials = [
  '<|endoftext|>', '<|im_start|>', '<|im_end|>', '<s>', '</s>', '<unk>', '<bos>', '<eos>', '<pad>',
  '<mask>', '[multimodal]', '<start_of_turn>', '<end_of_turn>', '<start_of_image>',
  '<end_of_image>', '<image_soft_token>', '<unused0>', '<unused6241>', '<table>', '</td>', '<h1>',
  '<|begin_of_text|>', '<|end_of_text|>', '<|eot_id|>', '<|start_header_id|>', '<|end_header_id|>',
  '<|reserved_special_token_0|>', '<|reserved_special_token_247|>', '<think>', '</think>',
  '<tool_call>', '</tool_call>', '<|fim_prefix|>', '<|vision_pad|>', '<|file_sep|>', '▁▁', '▁▁▁▁',
  '\t\t', '\t\t\t\t', '\n\n\n',
];
// prettier-ignore
const kNearMisses = [
  '<|im_start', '<|im_start|', 'im_start|>', '<|IM_START|>', '<| im_start |>', '<|endoftext',
  'endoftext|>', '<|endoftext|', '<|endofte xt|>', '<|endoftext|>>', '<<|endoftext|>', '< s>',
  '<s >', '<S>', '<<s>>', '<s', 's>', '</s', '</ s>', '<bos', 'bos>', '<start_of_turn',
  '<|begin_of_text', '<|reserved_special_token_999|>', '<unused99999>', '<think', '<|', '|>', '<>',
  '</>', '<|>', '▁', '<unk', '[multimodal', '<Table>',
];
const kChatTemplates = [
  (t) =>
    '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' +
    `<|im_start|>user\n${t}<|im_end|>\n<|im_start|>assistant\n`,
  (t) =>
    `<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n${t}<|eot_id|>` +
    '<|start_header_id|>assistant<|end_header_id|>\n\n',
  (t) => `<bos><start_of_turn>user\n${t}<end_of_turn>\n<start_of_turn>model\n`,
  (t) => `<s>[INST] ${t} [/INST]`,
  (t) => `${t}<|endoftext|>${t}`,
  (t) => `<think>\n${t}\n</think>\n\n${t}`,
];
// Unicode White_Space, and characters that look like it or are white space elsewhere (\u180e was
// until Unicode 6.3, \ufeff is in JavaScript's \s, \x1c-\x1f in Python's str.isspace).
// prettier-ignore
const kSpaces = [
  ' ', ' ', ' ', '\t', '\n', '\r', '\u000b', '\u000c', '\u00a0', '\u1680', '\u2000', '\u2002',
  '\u2003', '\u2007', '\u2009', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000',
  '\u0085', '\u180e', '\u200b', '\u200c', '\u200d', '\u2060', '\ufeff', '\u001c', '\u001f',
];
// prettier-ignore
const kEmoji = [
  '😀', '😂', '🥲', '🤖', '👍', '👋', '🧑', '👩', '👨', '👧', '👦', '❤\ufe0f', '❤', '✨', '🔥', '🚀',
  '🐍', '🦀', '🍕', '🎉', '☕', '⭐', '☀\ufe0f', '✌\ufe0f', '🏳\ufe0f', '🏴', '🫠', '🪿', '🧬',
  '🇺🇸', '🇯🇵', '🇺', '🇸',
];
// prettier-ignore
const kEmojiSequences = [
  '👨\u200d👩\u200d👧\u200d👦', '👩\u200d❤\ufe0f\u200d💋\u200d👨', '🧑🏽\u200d🚀', '👩🏿\u200d💻',
  '🧑🏻\u200d🤝\u200d🧑🏿', '🏳\ufe0f\u200d🌈', '🏳\ufe0f\u200d⚧\ufe0f', '🏴\u200d☠\ufe0f',
  '🐻\u200d❄\ufe0f', '😶\u200d🌫\ufe0f', '❤\ufe0f\u200d🔥', '👁\ufe0f\u200d🗨\ufe0f',
  '🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}',
  '🏴\u{e0067}\u{e0062}\u{e0077}\u{e006c}\u{e0073}\u{e007f}', '1\ufe0f\u20e3', '#\ufe0f\u20e3',
  '*\ufe0f\u20e3', '👍🏻', '👍🏼', '👍🏽', '👍🏾', '👍🏿', '🇩🇪', '🇫🇷', '🇧🇷', '🇮🇳', '🇦🇶',
  '\u200d', '🏻', '\ufe0f', '\u20e3',
];
// prettier-ignore
const kSkinTones = [
  '🏻', '🏼', '🏽', '🏾', '🏿',
];
// Pairs and singles whose NFC differs from the text: canonical reordering, singletons (Ohm,
// Kelvin, Angstrom), composition exclusions (U+0958), Hangul jamo, stacked marks.
// prettier-ignore
const kComposition = [
  'e\u0301', 'é', 'a\u0308', 'ä', 'o\u0302\u0301', 'ố', 'u\u031b\u0309', 'ử', 'A\u030a', 'Å',
  '\u212b', '\u2126', '\u212a', '\u1e9b\u0323', 'a\u0323\u0302', 'a\u0302\u0323', 'ậ', '\u0958',
  'क\u093c', '\u1112\u1161\u11ab', '한', '\u1100\u1161', '가\u11a8', '각', 'A\u0300\u0316', '\u0344',
  '\u0f73', 'n\u0303', 'ñ', 'c\u0327', 'ç', 'i\u0307', '\ufb01', '①', 'ｶﾞ', 'ガ', 'カ\u3099',
  '\u0301', ' \u0301', '1\u0301', '😀\u0301',
  'ḩ\u0338\u0321\u031b\u032d\u0319\u0320\u0317\u0350\u0352\u035b\u030d\u0342\u0300\u0300\u0360',
  'ش\u064e', 'ב\u05bc\u05b8', 'क\u093f', '\u0d4a', '\u0d46\u0d3e', 'Ω\u0301', '\u1f71',
];
// prettier-ignore
const kMarks = [
  [0x300, 0x36f], [0x1ab0, 0x1ace], [0x1dc0, 0x1dff], [0x20d0, 0x20f0], [0xfe20, 0xfe2f],
];
// prettier-ignore
const kOtherDigits = [
  '٠١٢٣٤٥٦٧٨٩', '०१२३४५६७८९', '০১২৩৪৫৬৭৮৯', '๐๑๒๓๔๕๖๗๘๙', '０１２３４５６７８９', '𝟘𝟙𝟚𝟛', '½¾⅞', '²³¹⁴',
  'ⅠⅡⅢⅣⅫ', '①②③⑳', '〇一二三', '𐄇𐄈', '፩፪፫',
];
// prettier-ignore
const kContractionTails = [
  's', 't', 're', 've', 'm', 'll', 'd', 'em', 'x', 'tis', 'all', '',
];
// prettier-ignore
const kWords = [
  'it', 'he', 'she', 'they', 'we', 'you', 'I', 'that', 'who', 'John', 'don', 'can', 'won', 'rock',
  'n', 'o', 'y', 'Ma', 'Ol', '1990', 'x', 'ÉTÉ', 'straße', 'İ', 'ß', 'Σ', 'ǅ',
];

function code_point_string(rng, length) {
  const planes = [
    () => rng.int(0x20, 0x7e),
    () => rng.int(0x00, 0x1f),
    () => rng.int(0x7f, 0xff),
    () => rng.int(0x100, 0xd7ff),
    () => rng.int(0xe000, 0xffff),
    () => rng.int(0x10000, 0x1ffff),
    () => rng.int(0x20000, 0x3ffff),
    () => rng.int(0xe0000, 0xeffff),
    () => rng.int(0xf0000, 0x10ffff),
    () => rng.pick([0xfffe, 0xffff, 0x1fffe, 0x10ffff, 0xfeff, 0xfffd, 0x0, 0x7f, 0x85]),
  ];
  let s = '';
  for (let i = 0; i < length; ++i) s += String.fromCodePoint(rng.pick(planes)());
  return s;
}

function spaces(rng, max) {
  let s = '';
  const n = rng.int(1, max);
  const mono = rng.chance(0.5) ? rng.pick(kSpaces) : null; // a run of one kind, or mixed
  for (let i = 0; i < n; ++i) s += mono ?? rng.pick(kSpaces);
  return s;
}

function digits(rng, length) {
  let s = String(rng.int(1, 9));
  while (s.length < length) s += String(rng.int(0, 9));
  return length > 1 && rng.chance(0.2) ? '0' + s.slice(1) : s;
}

function with_case(rng, s) {
  return rng.pick([
    (x) => x,
    (x) => x.toUpperCase(),
    (x) => x.toLowerCase(),
    (x) =>
      x
        .split('')
        .map((c) => (rng.chance(0.5) ? c.toUpperCase() : c))
        .join(''),
  ])(s);
}

function insert_at_random(rng, text, piece) {
  const chars = Array.from(text);
  const at = rng.int(0, chars.length);
  return chars.slice(0, at).join('') + piece + chars.slice(at).join('');
}

// Each generator returns one text; `n` says how many the test corpus takes of it.
function hard_cases(rng, real) {
  const line = () => rng.pick(real);
  const word = () => rng.pick(line().match(/\p{L}+/gu) ?? ['word']);
  return [
    [
      'emoji',
      150,
      () => {
        const parts = [];
        for (let i = rng.int(1, 8); i > 0; --i) {
          const r = rng.next();
          if (r < 0.3) parts.push(rng.pick(kEmojiSequences));
          else if (r < 0.5) parts.push(rng.pick(kEmoji) + rng.pick(kSkinTones));
          else if (r < 0.65) parts.push([rng.pick(kEmoji), rng.pick(kEmoji)].join('\u200d'));
          else if (r < 0.8) parts.push(word());
          else parts.push(rng.pick(kEmoji).repeat(rng.int(1, 5)));
        }
        return parts.join(rng.pick(['', ' ', ' ', '\n']));
      },
    ],
    [
      'composition',
      220,
      () => {
        const r = rng.next();
        if (r < 0.35) return line().normalize(rng.pick(['NFD', 'NFKD', 'NFKC', 'NFC']));
        if (r < 0.7) {
          const parts = [];
          for (let i = rng.int(1, 6); i > 0; --i)
            parts.push(rng.chance(0.6) ? rng.pick(kComposition) : word());
          return parts.join(rng.pick(['', ' ']));
        }
        let s = ''; // letters under random marks, in random order (NFC reorders and composes them)
        for (const c of word()) {
          s += c;
          for (let k = rng.chance(0.5) ? rng.int(1, 4) : 0; k > 0; --k) {
            const [lo, hi] = rng.pick(kMarks);
            s += String.fromCodePoint(rng.int(lo, hi));
          }
        }
        return s;
      },
    ],
    [
      'whitespace',
      280,
      () => {
        let s = rng.chance(0.3) ? spaces(rng, 6) : '';
        for (let i = rng.int(0, 6); i > 0; --i) {
          s += rng.pick([
            word,
            () => digits(rng, rng.int(1, 6)),
            () => rng.pick(['.', ',', '!?', '(', '-']),
            () => rng.pick(kEmoji),
          ])();
          s += spaces(rng, rng.pick([1, 2, 4, 12]));
        }
        return rng.chance(0.7) ? s : s.trimEnd();
      },
    ],
    [
      'newlines',
      150,
      () => {
        const breaks = [
          '\n',
          '\r\n',
          '\r',
          '\n\r',
          '\r\r\n',
          '\n\n',
          ' \n',
          '\n ',
          ' \r\n ',
          '\t\n',
        ];
        let s = '';
        for (let i = rng.int(1, 6); i > 0; --i) {
          s += rng.chance(0.8) ? line() : '';
          s += rng.chance(0.2) ? '\n'.repeat(rng.int(2, 40)) : rng.pick(breaks);
        }
        return rng.chance(0.5) ? s : s.replace(/[\r\n]+$/, '');
      },
    ],
    [
      'digits',
      150,
      () => {
        const parts = [];
        for (let i = rng.int(1, 5); i > 0; --i) {
          const r = rng.next();
          const n = digits(rng, rng.pick([1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 16, 20, 33, 40]));
          if (r < 0.4) parts.push(n);
          else if (r < 0.55)
            parts.push(
              n.replace(/\B(?=(\d{3})+(?!\d))/g, rng.pick([',', '.', ' ', '_', '\u00a0'])),
            );
          else if (r < 0.7) parts.push(word() + n + rng.pick(['', word()]));
          else if (r < 0.8) parts.push(rng.pick(kOtherDigits));
          else
            parts.push(
              rng.pick(['-', '+', '$', '0x', '#', 'v', '']) +
                n +
                rng.pick(['', '.', '%', 'e-9', '.5', 'th']),
            );
        }
        return parts.join(rng.pick([' ', '', ', ', '\n']));
      },
    ],
    [
      'contractions',
      150,
      () => {
        const parts = [];
        for (let i = rng.int(1, 5); i > 0; --i) {
          const apostrophe = rng.chance(0.85) ? "'" : rng.pick(['\u2019', "''", '`']);
          const head = rng.chance(0.8)
            ? with_case(rng, rng.pick(kWords))
            : rng.pick(['', ' ', '1', '.']);
          parts.push(head + apostrophe + with_case(rng, rng.pick(kContractionTails)));
        }
        return parts.join(rng.pick([' ', ' ', '', '\n']));
      },
    ],
    [
      'special_tokens',
      350,
      () => {
        const r = rng.next();
        if (r < 0.25) return rng.pick(kChatTemplates)(line());
        if (r < 0.45) return insert_at_random(rng, line(), rng.pick(kSpecials));
        const parts = [];
        for (let i = rng.int(1, 8); i > 0; --i) {
          const q = rng.next();
          parts.push(
            q < 0.4
              ? rng.pick(kSpecials)
              : q < 0.7
                ? rng.pick(kNearMisses)
                : q < 0.9
                  ? word()
                  : spaces(rng, 3),
          );
        }
        return parts.join(rng.pick(['', ' ', '\n']));
      },
    ],
    [
      'edge_spaces',
      100,
      () => {
        const body = rng.chance(0.5) ? line() : word();
        return (
          ' '.repeat(rng.int(0, 4)) +
          body +
          ' '.repeat(rng.int(0, 4)) +
          (rng.chance(0.3) ? '\n' : '')
        );
      },
    ],
    [
      'repeats',
      40,
      () => {
        const unit = rng.pick([
          'a',
          'ab',
          '!',
          ' ',
          '\n',
          '1',
          '😀',
          '的',
          'é',
          'e\u0301',
          '▁',
          '<s>',
          '\t',
          '. ',
          'ー',
          '==',
          '-',
          '_',
          '0',
          'aaa ',
          'ก',
          'я',
          '<|endoftext|>',
          "'s",
        ]);
        const target = rng.pick([1000, 2000, 4000, 8000]);
        return unit.repeat(Math.ceil(target / unit.length));
      },
    ],
    ['code_points', 250, () => code_point_string(rng, rng.pick([1, 2, 3, 5, 8, 13, 21, 40]))],
    [
      'tiny',
      60,
      () =>
        rng.pick([
          '',
          ' ',
          '  ',
          '\t',
          '\n',
          '\r\n',
          '\r',
          'a',
          'A',
          "'",
          "''",
          "'s",
          "'S",
          's',
          '1',
          '12',
          '123',
          '1234',
          '▁',
          '<',
          '>',
          '|',
          '<|',
          '|>',
          'é',
          'e\u0301',
          '😀',
          '\u0301',
          '\u200d',
          '\ufeff',
          '\u0000',
          '\u00a0',
          '\u3000',
          '\u2028',
          '.',
          '...',
          '\\',
          '"',
          '{}',
          'ǅ',
          'İ',
          'ß',
        ]),
    ],
    [
      'bent_real',
      300,
      () => {
        const s = line();
        return rng.pick([
          (x) => x.toUpperCase(),
          (x) => x.toLowerCase(),
          (x) => x.replace(/ /g, () => spaces(rng, 3)),
          (x) => x.replace(/ /g, ''),
          (x) => x.replace(/ /g, '  '),
          (x) => insert_at_random(rng, x, rng.pick(kEmojiSequences)),
          (x) => x + line(),
          (x) => x + '\n' + line(),
          (x) => x.normalize('NFD'),
          (x) => insert_at_random(rng, x, rng.pick(kNearMisses)),
          (x) =>
            x
              .split('')
              .reverse()
              .join('')
              .replace(/[\ud800-\udfff]/g, ''),
          (x) => ' ' + x,
          (x) => x + ' ',
          (x) => x.repeat(rng.int(2, 20)),
        ])(s);
      },
    ],
  ];
}

function test_corpus(rng, real) {
  const out = real.map((text) => ['real', text]);
  for (let i = 0; i < 250; ++i) {
    // runs of consecutive lines: paragraphs and code blocks
    const start = rng.int(0, real.length - 1);
    const run = real.slice(start, start + rng.int(2, 15));
    const joiner = rng.pick(['\n', '\n', '\n', '\r\n', '\n\n']);
    out.push(['real_run', run.join(joiner) + (rng.chance(0.2) ? joiner : '')]);
  }
  for (const [kind, n, generate] of hard_cases(rng, real)) {
    for (let i = 0; i < n; ++i) out.push([kind, generate()]);
  }
  return out;
}

// Real-looking documents only: runs of real lines, with one word in six replaced by a new one
// made of the same line's letters (so that the tokenizers' word caches see new words, as they
// would on a real corpus) and every number drawn afresh.
function bench_corpus(rng, real, bytes) {
  const out = [];
  let total = 0;
  while (total < bytes) {
    const start = rng.int(0, real.length - 1);
    const run = real.slice(start, start + rng.int(1, 30)).map((l) => {
      const letters = Array.from(l.replace(/[^\p{L}]/gu, ''));
      return l
        .replace(/\p{L}+/gu, (w) =>
          rng.chance(1 / 6) && letters.length > 0
            ? Array.from(w, () => rng.pick(letters)).join('')
            : w,
        )
        .replace(/[0-9]+/g, (d) => digits(rng, d.length));
    });
    const text = run.join('\n');
    const line = JSON.stringify({ text });
    out.push(['bench', text]);
    total += Buffer.byteLength(line) + 1;
  }
  return out;
}

function main() {
  const args = {
    seed: 1,
    real: path.join(__dirname, '..', 'corpus', 'real.txt'),
    kinds: null,
    bytes: 0,
  };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in args) || i + 1 >= argv.length) {
      throw new Error('usage: corpus.js [--seed N] [--real FILE] [--kinds FILE] [--bytes N]');
    }
    args[key] = key === 'seed' || key === 'bytes' ? Number(argv[i + 1]) : argv[i + 1];
  }
  const real = fs
    .readFileSync(args.real, 'utf8')
    .split('\n')
    .filter((l) => l !== '');
  const rng = make_rng(args.seed);
  const texts = args.bytes > 0 ? bench_corpus(rng, real, args.bytes) : test_corpus(rng, real);
  process.stdout.write(texts.map(([, text]) => JSON.stringify({ text })).join('\n') + '\n');
  if (args.kinds) fs.writeFileSync(args.kinds, texts.map(([kind]) => kind).join('\n') + '\n');
}

main();
