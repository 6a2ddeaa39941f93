#!/usr/bin/env bash
# `waffle-decode diff` on two large traces: throughput (MB of trace.bin read per second, on one
# core: the diff reads the two runs on two threads, so CPU time is summed over both) and peak
# resident memory, at two sizes and with 100 times fewer tensors, to show that memory grows with
# neither kernels nor tensors.
#
#   benches/diff.sh [STEPS]     # default 400000 steps: over 200 MB per trace
#
# The traces are the `diff_model` example's (16 layers, four kernels each, a step span and a
# loader thread's span per step; 48 tensors every 100th step), the second run with layer 3
# perturbed (no kernel is slowed: `--slow` sleeps, which would make the runs hours long).
# Needs /usr/bin/time (Debian package `time`). Figures in benches/README.md ("diff").
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/time_v.sh
source benches/time_v.sh
steps="${1:-400000}"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -p waffle-decode --bin waffle-decode -p waffle-std --example diff_model
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
example="$target/release/examples/diff_model"
decode="$target/release/waffle-decode"

measure() { # NAME STEPS TENSOR-EVERY
    local name="$1" n="$2" every="$3"
    "$example" "$work/base.bin" --steps "$n" --layers 16 --tensor-every "$every"
    "$example" "$work/new.bin" --steps "$n" --layers 16 --tensor-every "$every" --perturb 3
    local bytes
    bytes=$(( $(stat -c %s "$work/base.bin") + $(stat -c %s "$work/new.bin") ))
    # Once to warm the page cache, then measured.
    "$decode" diff "$work/base.bin" "$work/new.bin" --json >/dev/null
    /usr/bin/time -v "$decode" diff "$work/base.bin" "$work/new.bin" --json >"$work/out.json" 2>"$work/time.txt"
    local wall cpu rss
    read -r wall cpu rss < <(time_v "$work/time.txt")
    # Two threads read the runs: their CPU time, summed, is the time on one core (wall time
    # also counts waiting for a core on a busy machine).
    awk -v name="$name" -v b="$bytes" -v w="$wall" -v c="$cpu" -v r="$rss" 'BEGIN {
        printf "%s: %.0f MB (two traces): %.2f s of CPU, %.0f MB/s per core (%.2f s wall, %.0f MB/s); peak RSS %.1f MiB\n",
            name, b / 1e6, c, b / 1e6 / c, w, b / 1e6 / w, r / 1024 }'
    grep -m1 '"name"' "$work/out.json" | sed "s/^ */  first divergence: /"
}

# Tensors are compared as they are read, a bounded number held: the third run records 100
# times fewer, to show what the kernels alone take.
measure "quarter size" $(( steps / 4 )) 100
measure "full size" "$steps" 100
measure "full size, tensors every 10000 steps" "$steps" 10000
