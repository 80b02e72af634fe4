#!/usr/bin/env bash
# Shows LLVM's SLPVectorizerPass turning correct IR into wrong results (README.md here):
# kernel_before_slp.ll, a conv2d kernel as LLVM's O3 pipeline has it just before SLP, is compiled
# without optimization once as it is and once after `opt -passes=slp-vectorizer`, linked with
# driver.c and run on small integer inputs (every sum exact in float, whatever the order); the
# driver checks all 36 outputs against a direct reference.
# Exit status: 0 while the miscompile reproduces; 1 when it no longer does (the restriction in
# te/lower_cut_border_tiles.cc can then be lifted) or when the IR as given computes wrong results;
# 77 (skipped) on a host without AVX-512, which the IR's znver4 attributes need.
# Tools: $OPT (default opt-19) and $CLANG (default clang-19).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
opt=${OPT:-opt-19}
cc=${CLANG:-clang-19}
if ! grep -qw avx512f /proc/cpuinfo; then
  echo "skipped: the reproducer's IR is for znver4 (AVX-512), which this host lacks"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
version=$("$opt" --version | grep -o 'LLVM version [0-9][0-9.]*')

# Runs driver.c linked with IR (compiled at -O0); prints the driver's output, returns its status.
run() {
  "$cc" -O0 -w "$here/driver.c" "$1" -o "$work/prog" -lm
  "$work/prog"
}

"$opt" -passes=slp-vectorizer "$here/kernel_before_slp.ll" -S -o "$work/kernel_after_slp.ll"
if ! before=$(run "$here/kernel_before_slp.ll"); then
  echo "FAIL: kernel_before_slp.ll computes wrong outputs without SLP: the reproducer is broken"
  echo "$before"
  exit 1
fi
if after=$(run "$work/kernel_after_slp.ll"); then
  echo "FIXED in $version: after slp-vectorizer the kernel is still right ($after); the cut of" \
    "scalar register tiles (te/lower_cut_border_tiles.cc) can be tried again (README.md)"
  exit 1
fi
echo "$after"
echo "$version: SLPVectorizerPass still miscompiles the kernel (without it: $before); keep" \
  "te/lower_cut_border_tiles.cc's vector-only restriction"
