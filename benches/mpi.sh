#!/usr/bin/env bash
# What libwaffle_mpi.so adds to an 8-byte MPI_Send/MPI_Recv ping-pong and an 8-byte
# MPI_Allreduce between 2 ranks, to a send to oneself and its receive on 1 rank (the
# wrappers' own cost, with no partner to wait for), and to the same started nonblocking and
# completed by one MPI_Waitall (the request table's cost besides) (benches/c/mpi_bench.c),
# against the same runs without it:
# ROUNDS rounds, each running both benchmarks without and then with the library preloaded
# (WAFFLE_OUTPUT writing real files, one per rank), alternating so that drifts of a shared
# machine fall on both sides alike. Prints every run, then the medians and their ratios, what
# one read of the clock costs here (benches/c/clock_bench.c: the floor under every span), and
# what the recorded traces hold (records dropped must be 0, or the cost is understated).
#
# usage: benches/mpi.sh [ROUNDS [ITERATIONS]]     (defaults: 9 rounds of 200000 iterations)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-9}"
iterations="${2:-200000}"
target="${CARGO_TARGET_DIR:-target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cargo build --release --quiet -p waffle-mpi --lib
cargo build --release --quiet -p waffle-decode --bin waffle-decode
lib="$(cd "$target/release" && pwd)/libwaffle_mpi.so"
mpicc -O2 -o "$work/mpi_bench" benches/c/mpi_bench.c
cc -O2 -o "$work/clock_bench" benches/c/clock_bench.c

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none
        --mca btl self,vader --mca btl_vader_single_copy_mechanism none --mca plm_rsh_agent "")

run() { # run BENCH with|without -> ns per iteration
    local extra=() ranks=2
    if [ "$1" = self ] || [ "$1" = nonblocking ]; then ranks=1; fi
    if [ "$2" = with ]; then
        rm -rf "$work/trace-$1"
        extra=(-x "WAFFLE_OUTPUT=$work/trace-$1/rank%r.bin" -x "LD_PRELOAD=$lib")
    fi
    "${mpirun[@]}" -np "$ranks" "${extra[@]}" "$work/mpi_bench" "$1" "$iterations"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

for bench in pingpong allreduce self nonblocking; do
    : >"$work/$bench.without"
    : >"$work/$bench.with"
done
for round in $(seq "$rounds"); do
    for bench in pingpong allreduce self nonblocking; do
        without="$(run "$bench" without)"
        with="$(run "$bench" with)"
        echo "round $round $bench: without $without ns, with $with ns"
        echo "$without" >>"$work/$bench.without"
        echo "$with" >>"$work/$bench.with"
    done
done

echo
printf '%-10s %14s %14s %10s %8s\n' bench "without (ns)" "with (ns)" "added" ratio
for bench in pingpong allreduce self nonblocking; do
    a="$(median <"$work/$bench.without")"
    b="$(median <"$work/$bench.with")"
    awk -v n="$bench" -v a="$a" -v b="$b" \
        'BEGIN {printf "%-10s %14.1f %14.1f %10.1f %7.3fx\n", n, a, b, b - a, b / a}'
done
echo
"$work/clock_bench"
echo
echo "what the last recorded runs hold (median runs are not kept; these are the last round's):"
for bench in pingpong allreduce self nonblocking; do
    "$target/release/waffle-decode" "$work/trace-$bench"/rank*.bin \
        -o "$work/$bench.chrome.json" 2>&1 | sed "s/^/  $bench: /"
    ls -l "$work/trace-$bench" | awk -v n="$bench" 'NR > 1 {print "  " n ": " $9 " " $5 " bytes"}'
done
