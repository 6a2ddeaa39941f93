#!/usr/bin/env bash
# Runs each cargo-fuzz target in fuzz/ for a bounded time (FUZZ_SECONDS, default 20) from the
# committed seed corpus, and fails on any panic, sanitizer report, or single allocation over
# 64 MiB. New inputs go to a temporary directory, so the committed corpus is never changed; a
# crashing input is kept in fuzz/artifacts/<target>/ (add it to fuzz/corpus/ once fixed).
#
#   scripts/fuzz.sh                      # every target, 20 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh roundtrip
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${FUZZ_SECONDS:-20}"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(trace_reader record_stream roundtrip chrome_json)

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

"${cargo[@]}" fuzz build
for target in "${targets[@]}"; do
    work="$(mktemp -d)"
    # Operation lists need length: let roundtrip's inputs be long from the start.
    extra=()
    [ "$target" != roundtrip ] || extra=(-max_len=4096 -len_control=0)
    if ! "${cargo[@]}" fuzz run "$target" "$work" "fuzz/corpus/$target" -- \
        -max_total_time="$secs" -malloc_limit_mb=64 -rss_limit_mb=2048 -print_final_stats=1 \
        "${extra[@]}" >"$work.log" 2>&1; then
        tail -n 60 "$work.log"
        echo "fuzz target $target failed; the input is in fuzz/artifacts/$target/"
        exit 1
    fi
    runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$work.log")"
    printf '%-14s %9s runs in %s s, %s new inputs\n' "$target" "$runs" "$secs" "$(ls "$work" | wc -l)"
    rm -rf "$work" "$work.log"
done
