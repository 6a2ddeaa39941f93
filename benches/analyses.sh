#!/usr/bin/env bash
# `waffle-decode why`, `hang`, `waits`, `critical-path` and `profile` on the files of one run,
# beside the Perfetto export of the same files: wall and CPU time, throughput per CPU second
# and peak resident memory of each, and the files' size.
#
#   benches/analyses.sh DIR [NTH]
#
# DIR holds one run's rank*.bin, an MPI program recorded under LD_PRELOAD=libwaffle_mpi.so.
# `why` explains the NTH (default: the middle one) `MPI message received` event. Each command runs once to warm the page cache, then is
# measured. Needs /usr/bin/time (Debian package `time`). Figures in benches/README.md
# ("why and hang on real traces").
set -euo pipefail
dir="$1"
cd "$(dirname "$0")/.."
# shellcheck source=benches/time_v.sh
source benches/time_v.sh
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p waffle-decode --bin waffle-decode
decode="$target/release/waffle-decode"
files=("$dir"/rank*.bin)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

bytes=0
for f in "${files[@]}"; do bytes=$(( bytes + $(stat -c %s "$f") )); done
if [ $# -ge 2 ]; then
    nth="$2"
else
    # The middle received message: `why` on one past the last says how many there are.
    count=$("$decode" why "${files[@]}" --event "MPI message received" --nth 999999999999 2>&1 |
        sed -n 's/.*there are only \([0-9]*\).*/\1/p' || true)
    nth=$(( count / 2 ))
fi
printf '%s: %d files, %.1f MB; why explains "MPI message received" #%d\n' \
    "$dir" "${#files[@]}" "$(awk -v b="$bytes" 'BEGIN { print b / 1e6 }')" "$nth"

measure() { # NAME COMMAND...
    local name="$1"
    shift
    "$@" >/dev/null 2>&1 || true
    /usr/bin/time -v "$@" >"$work/out" 2>"$work/time.txt"
    local wall cpu rss
    read -r wall cpu rss < <(time_v "$work/time.txt")
    awk -v name="$name" -v w="$wall" -v c="$cpu" -v r="$rss" -v b="$bytes" 'BEGIN {
        printf "  %-16s %6.2f s wall  %6.2f s CPU  %6.1f MB/s per CPU s  peak RSS %7.1f MiB (%.2f x the files)\n",
            name, w, c, b / 1e6 / (c > 0 ? c : 1e-9), r / 1024, r * 1024 / b }'
}

measure "perfetto export" "$decode" -q "${files[@]}" -o "$work/out.pftrace"
rm -f "$work/out.pftrace"
measure "why" "$decode" why "${files[@]}" --event "MPI message received" --nth "$nth"
measure "hang" "$decode" hang "${files[@]}"
measure "waits" "$decode" waits "${files[@]}"
measure "critical-path" "$decode" critical-path "${files[@]}"
measure "profile" "$decode" profile "${files[@]}"
