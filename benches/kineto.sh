#!/usr/bin/env bash
# Other tools' traces: two PyTorch-profiler-shaped traces of SIZE_MB each (default 100; the
# issue's bar is set at 400), made by repeating a small step (benches/kineto_profile.py), then
# `waffle-decode diff` of the two and the Perfetto export of one, beside Python's json.load of
# one, each under /usr/bin/time: wall and CPU time, JSON read per CPU second, peak resident
# memory. Figures in
# benches/README.md ("Other tools' traces").
#
#   benches/kineto.sh [SIZE_MB]
#
# KINETO_RUNS (default 3) times `diff` that many times, alternating with the export, so that
# one run of the script shows how far this machine's speed moves between them.
set -euo pipefail
size="${1:-100}"
cd "$(dirname "$0")/.."
# shellcheck source=benches/time_v.sh
source benches/time_v.sh
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p waffle-decode --bin waffle-decode
decode="$target/release/waffle-decode"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 benches/kineto_profile.py "$work/base.json" "$size"
python3 benches/kineto_profile.py "$work/new.json" "$size" --new
bytes=$(( $(stat -c %s "$work/base.json") + $(stat -c %s "$work/new.json") ))
one=$(stat -c %s "$work/base.json")
printf 'two profiles: %.1f + %.1f MB of JSON\n' "$(awk -v b="$one" 'BEGIN { print b / 1e6 }')" \
    "$(awk -v b="$(( bytes - one ))" 'BEGIN { print b / 1e6 }')"

measure() { # NAME BYTES COMMAND...
    local name="$1" b="$2"
    shift 2
    /usr/bin/time -v "$@" >"$work/out" 2>"$work/time.txt"
    local wall cpu rss
    read -r wall cpu rss < <(time_v "$work/time.txt")
    awk -v name="$name" -v w="$wall" -v c="$cpu" -v r="$rss" -v b="$b" 'BEGIN {
        printf "  %-22s %6.2f s wall  %6.2f s CPU  %6.1f MB/s per CPU s  peak RSS %7.1f MiB\n",
            name, w, c, b / 1e6 / (c > 0 ? c : 1e-9), r / 1024 }'
}

# The baseline, in the same run: Python's json.load of one profile (C-accelerated), where the
# Python tools made for these traces (HTA, TraceLens) start before any analysis.
measure "python json.load (one)" "$one" python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/base.json"
for run in $(seq "${KINETO_RUNS:-3}"); do
    measure "diff (run $run)" "$bytes" "$decode" diff "$work/base.json" "$work/new.json"
    measure "perfetto export (one)" "$one" "$decode" -q "$work/base.json" -o "$work/out.pftrace"
done
