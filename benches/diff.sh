#!/usr/bin/env bash
# `waffle-decode diff` on two large traces: throughput (MB of trace.bin read per second, on one
# core: the diff reads its files one after another on one thread) and peak resident memory, at
# two sizes, to show that memory does not grow with the trace.
#
#   benches/diff.sh [STEPS]     # default 800000 steps: about 210 MB per trace
#
# The traces are the `diff_model` example's (16 layers, four kernels each, a step span and a
# loader thread's span per step; tensors every 100th step), the second run with layer 3
# perturbed and `gelu` made slower. Needs /usr/bin/time (Debian package `time`). Figures in
# benches/README.md ("diff").
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-800000}"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -p waffle-decode --bin waffle-decode -p waffle-std --example diff_model
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
example="$target/release/examples/diff_model"
decode="$target/release/waffle-decode"

measure() { # NAME STEPS
    local name="$1" n="$2"
    "$example" "$work/base.bin" --steps "$n" --layers 16 --tensor-every 100
    "$example" "$work/new.bin" --steps "$n" --layers 16 --tensor-every 100 --perturb 3 --slow gelu
    local bytes
    bytes=$(( $(stat -c %s "$work/base.bin") + $(stat -c %s "$work/new.bin") ))
    # Once to warm the page cache, then measured.
    "$decode" diff "$work/base.bin" "$work/new.bin" --json >/dev/null
    /usr/bin/time -v "$decode" diff "$work/base.bin" "$work/new.bin" --json >"$work/out.json" 2>"$work/time.txt"
    local secs rss
    secs=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$work/time.txt")
    rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$work/time.txt")
    awk -v name="$name" -v b="$bytes" -v s="$secs" -v r="$rss" 'BEGIN {
        printf "%s: %.0f MB (two traces) in %.2f s: %.0f MB/s on one core; peak RSS %.1f MiB\n", name, b / 1e6, s, b / 1e6 / s, r / 1024 }'
    grep -m1 '"name"' "$work/out.json" | sed "s/^ */  first divergence: /"
}

measure "quarter" $(( steps / 4 ))
measure "full" "$steps"
