#!/usr/bin/env bash
# Runs each cargo-fuzz target in fuzz/ for a bounded time (FUZZ_SECONDS, default 20) from the
# committed seed corpus, and fails on any panic, abort, sanitizer report, or single allocation
# over 64 MiB. New inputs go to a temporary directory, so the committed corpus is never changed;
# a crashing input is kept in fuzz/artifacts/<target>/ (add it to fuzz/corpus/ once fixed).
#
#   scripts/fuzz.sh                      # every target, 20 s each, then roundtrip under ASan
#   FUZZ_SECONDS=600 scripts/fuzz.sh roundtrip
#
# Two builds (benches/README.md, "Fuzzing", has the measurements behind them):
# - every target without a sanitizer and without comparison tracing, at full speed. The code
#   under test of trace_reader, record_stream and chrome_json is safe Rust, where AddressSanitizer
#   finds nothing and cost 4 to 18 times the runs; comparison tracing cost a third of the runs
#   and reached less coverage in the same time. The 64 MiB bound on one allocation is kept by
#   the targets' own allocator (fuzz/src/lib.rs).
# - roundtrip again under AddressSanitizer (FUZZ_ASAN=0 skips it): it runs the recorder's and
#   the core's `unsafe` code (queues, thread slots), where a sanitizer earns its cost.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${FUZZ_SECONDS:-20}"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(trace_reader record_stream roundtrip chrome_json)
asan=()
if [ "${FUZZ_ASAN:-1}" != 0 ]; then
    for t in "${targets[@]}"; do [ "$t" != roundtrip ] || asan=(roundtrip); done
fi

# cargo-fuzz needs nightly flags (-Zsanitizer); without a nightly toolchain, let stable accept them.
if cargo +nightly --version >/dev/null 2>&1; then
    cargo=(cargo +nightly)
else
    echo "no nightly toolchain; using $(cargo --version) with RUSTC_BOOTSTRAP=1"
    export RUSTC_BOOTSTRAP=1
    cargo=(cargo)
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# Where roundtrip records its sessions (one file, truncated by each input): a memory file system
# where there is one, removed when this script ends.
if [ -d /dev/shm ]; then scratch="$(mktemp -d -p /dev/shm)"; else scratch="$(mktemp -d)"; fi
trap 'rm -rf "$scratch"' EXIT
export WAFFLE_FUZZ_SCRATCH="$scratch"

fast=(-s none --no-trace-compares)
"${cargo[@]}" fuzz build "${fast[@]}"
[ ${#asan[@]} -eq 0 ] || "${cargo[@]}" fuzz build -s address --target-dir fuzz/target/asan "${asan[@]}"

# run LABEL TARGET BUILD_FLAGS...: one bounded run from the seed corpus.
run() {
    local label="$1" target="$2"
    shift 2
    local work extra=()
    work="$(mktemp -d)"
    # Operation lists need length: let roundtrip's inputs be long from the start.
    [ "$target" != roundtrip ] || extra=(-max_len=4096 -len_control=0)
    if ! "${cargo[@]}" fuzz run "$@" "$target" "$work" "fuzz/corpus/$target" -- \
        -max_total_time="$secs" -malloc_limit_mb=64 -rss_limit_mb=2048 -print_final_stats=1 \
        "${extra[@]}" >"$work.log" 2>&1; then
        tail -n 60 "$work.log"
        echo "fuzz target $target ($label) failed; the input is in fuzz/artifacts/$target/"
        exit 1
    fi
    local runs rate cov
    runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$work.log")"
    rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work.log")"
    cov="$(grep -o 'cov: [0-9]*' "$work.log" | tail -n 1)"
    printf '%-14s %-6s %9s runs in %s s (%s a second), %s, %s new inputs\n' \
        "$target" "$label" "$runs" "$secs" "$rate" "$cov" "$(ls "$work" | wc -l)"
    rm -rf "$work" "$work.log"
}

for target in "${targets[@]}"; do
    run fast "$target" "${fast[@]}"
done
for target in "${asan[@]}"; do
    run asan "$target" -s address --target-dir fuzz/target/asan
done
