#!/usr/bin/env bash
# libgenesis as a user meets it after `make install`: install the build tree under a fresh
# prefix, build seed 000's DDP example in a project of its own through find_package(genesis) and
# again through pkg-config, and run both on 2 ranks with the installed genesis launch. The
# example exits non-zero unless the loss falls and the ranks end with the same parameters.
#
#   tests/examples/installed.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT

# Runs a command with its output kept aside, shown only when it fails.
quiet() {
  "$@" > "$prefix/step.log" 2>&1 || { cat "$prefix/step.log"; echo "failed: $*"; exit 1; }
}

quiet cmake --install "$build" --prefix "$prefix"
genesis=$prefix/bin/genesis

echo "== find_package(genesis)"
quiet cmake -S "$here/consumer" -B "$prefix/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release
quiet cmake --build "$prefix/consumer"
"$genesis" launch --nproc 2 -- "$prefix/consumer/seed000_ddp" | tail -1

echo "== pkg-config genesis"
pc=$(find "$prefix" -name genesis.pc)
export PKG_CONFIG_PATH=$(dirname "$pc")
# shellcheck disable=SC2046  # the flags are words
quiet c++ -O1 $(pkg-config --cflags genesis) "$here/seed000_ddp.cpp" -o "$prefix/seed000_pc" \
  $(pkg-config --libs genesis) -Wl,-rpath,"$(pkg-config --variable=libdir genesis)"
"$genesis" launch --nproc 2 -- "$prefix/seed000_pc" | tail -1
