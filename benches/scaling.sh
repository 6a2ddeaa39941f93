#!/usr/bin/env bash
# How the reader scales with ranks: a halo exchange (benches/c/halo.c) recorded under mpirun with
# libwaffle_mpi.so preloaded at 8 to $MAX_RECORDED ranks (oversubscribed: more ranks than cores),
# and its files made by benches/examples/halo_ranks.rs (the same records, without MPI) from 8 to
# $MAX_RANKS ranks. Every rank runs the same $STEPS steps, so the records grow with the ranks.
# Each set is exported to Perfetto and OTLP and given to `why` (the last MPI_Allreduce),
# `hang` and `diff` (against a second run of the same size); each is timed with
# /usr/bin/time (wall and CPU seconds, peak RSS).
#
# It prints one row per set and tool with the time and memory per record (span or event), and
# for each tool how far the per-record figures move across the sizes: the largest over the
# smallest, so a tool whose cost per record grows with the ranks shows a ratio above 1. The rows
# also go to DIR/results.tsv.
#
#   benches/scaling.sh                           # 8 .. 1024 ranks, 2000 steps, in target/scaling
#   MAX_RANKS=256 STEPS=500 benches/scaling.sh   # smaller
#
# DIR is $WAFFLE_SCALING_DIR, else $CARGO_TARGET_DIR/scaling, else target/scaling; the traces
# (about 370 MB at 1024 ranks, twice) are kept there for a rerun of one tool by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
out="${WAFFLE_SCALING_DIR:-$target/scaling}"
steps="${STEPS:-2000}"
max_ranks="${MAX_RANKS:-1024}"
max_recorded="${MAX_RECORDED:-128}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# waffle-mpi apart: with --bin, cargo would build binaries only, and not its library.
cargo build --release --quiet -p waffle-mpi
cargo build --release --quiet -p waffle-decode --bin waffle-decode
cargo build --release --quiet -p waffle-benches --example halo_ranks
release="$(cd "$target/release" && pwd)"
decode="$release/waffle-decode"
generate="$release/examples/halo_ranks"
mpicc -O2 -o "$out/halo" benches/c/halo.c

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# As benches/real-traces.sh: as root, more ranks than cores, shared memory only, and a rank
# waiting for a message yields its core.
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none
        --mca btl self,vader --mca btl_vader_single_copy_mechanism none --mca plm_rsh_agent ""
        --mca mpi_yield_when_idle 1)

record() { # record DIR RANKS: halo.c under mpirun, one file per rank
    rm -rf "$1" && mkdir -p "$1"
    if ! (cd "$1" && "${mpirun[@]}" -np "$2" -x "LD_PRELOAD=$release/libwaffle_mpi.so" \
        -x "WAFFLE_OUTPUT=$1/rank%r.bin" "$out/halo" "$steps" >"$1.log" 2>&1); then
        cat "$1.log" >&2
        return 1
    fi
    if [ "$(ls "$1"/rank*.bin 2>/dev/null | wc -l)" != "$2" ]; then
        echo "$2 ranks recorded $(ls "$1"/rank*.bin 2>/dev/null | wc -l) files in $1:" >&2
        cat "$1.log" >&2
        return 1
    fi
}

generate() { # generate DIR RANKS SEED
    rm -rf "$1"
    "$generate" "$1" "$2" "$steps" "$3" 2>"$1.log"
}

files() { # the rank files of DIR in rank order
    local n
    n="$(ls "$1"/rank*.bin | wc -l)"
    for ((r = 0; r < n; r++)); do echo "$1/rank$r.bin"; done
}

results="$out/results.tsv"
printf 'set\tranks\tbytes\trecords\ttool\twall_s\tcpu_s\trss_kb\n' >"$results"

measure() { # measure SET RANKS BYTES RECORDS TOOL COMMAND...
    local set="$1" ranks="$2" bytes="$3" records="$4" tool="$5"
    shift 5
    local start end wall user sys rss
    start="$(date +%s%N)"
    if ! /usr/bin/time -o "$out/time" -f '%U %S %M' "$@" >"$out/tool.log" 2>&1; then
        echo "$tool on $set failed:" >&2
        tail -n 20 "$out/tool.log" >&2
        return 1
    fi
    end="$(date +%s%N)"
    wall="$(echo "($end - $start) / 1000000000" | bc -l)"
    read -r user sys rss <"$out/time"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$set" "$ranks" "$bytes" "$records" "$tool" "$wall" \
        "$(echo "$user + $sys" | bc)" "$rss" >>"$results"
    printf '  %-7s %8.2f s  %7.0f ns/record  %8.1f MB RSS  %6.0f B RSS/record\n' "$tool" "$wall" \
        "$(echo "$wall * 1000000000 / $records" | bc -l)" "$(echo "$rss / 1024" | bc -l)" \
        "$(echo "$rss * 1024 / $records" | bc -l)"
}

run_set() { # run_set SET RANKS BASE NEW
    local set="$1" ranks="$2" base="$3" new="$4" bytes records
    mapfile -t inputs < <(files "$base")
    mapfile -t others < <(files "$new")
    bytes="$(cat "${inputs[@]}" | wc -c)"
    # Records: the spans and events the export's summary counts, over every file.
    "$decode" "${inputs[@]}" -o "$out/count.pftrace" >"$out/summary.log" 2>&1
    records="$(sed -n 's/.*threads, \([0-9]*\) spans, \([0-9]*\) events.*/\1 \2/p' "$out/summary.log" |
        awk '{ n += $1 + $2 } END { print n }')"
    printf '%s: %d ranks, %.1f MB, %d records\n' "$set" "$ranks" "$(echo "$bytes / 1048576" | bc -l)" "$records"
    local allreduces=$((ranks * (steps / 100)))
    measure "$set" "$ranks" "$bytes" "$records" perfetto "$decode" -q "${inputs[@]}" -o "$out/out.pftrace"
    measure "$set" "$ranks" "$bytes" "$records" otlp "$decode" -q "${inputs[@]}" -o "$out/out.otlp.pb"
    if ((allreduces > 0)); then
        measure "$set" "$ranks" "$bytes" "$records" why "$decode" why --event MPI_Allreduce \
            --nth "$((allreduces - 1))" "${inputs[@]}"
    fi
    measure "$set" "$ranks" "$bytes" "$records" hang "$decode" hang "${inputs[@]}"
    measure "$set" "$ranks" "$bytes" "$records" diff "$decode" diff --base "${inputs[@]}" --new "${others[@]}"
    rm -f "$out/out.pftrace" "$out/out.otlp.pb" "$out/count.pftrace"
}

for ((ranks = 8; ranks <= max_recorded && ranks <= max_ranks; ranks *= 2)); do
    record "$out/recorded-$ranks" "$ranks"
    record "$out/recorded-$ranks-again" "$ranks"
    run_set "recorded-$ranks" "$ranks" "$out/recorded-$ranks" "$out/recorded-$ranks-again"
    rm -rf "$out/recorded-$ranks" "$out/recorded-$ranks-again"
done
for ((ranks = 8; ranks <= max_ranks; ranks *= 2)); do
    generate "$out/generated-$ranks" "$ranks" 1
    generate "$out/generated-$ranks-again" "$ranks" 2
    run_set "generated-$ranks" "$ranks" "$out/generated-$ranks" "$out/generated-$ranks-again"
    rm -rf "$out/generated-$ranks" "$out/generated-$ranks-again"
done

# How far each tool's cost per record moves across the sizes, recorded and generated apart.
python3 - "$results" <<'EOF'
import csv, sys
from collections import defaultdict
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
by = defaultdict(list)
for r in rows:
    kind = r["set"].split("-")[0]
    by[(kind, r["tool"])].append(r)
print()
print("per record, largest over smallest across the sizes (1.00 = flat)")
print(f"{'sets':10} {'tool':8} {'ranks':>10} {'time':>6} {'cpu':>6} {'memory':>7}")
for (kind, tool), rs in sorted(by.items()):
    # Times below the clocks' resolution count as that resolution.
    t = [max(float(r["wall_s"]), 0.001) / int(r["records"]) for r in rs]
    c = [max(float(r["cpu_s"]), 0.01) / int(r["records"]) for r in rs]
    m = [int(r["rss_kb"]) / int(r["records"]) for r in rs]
    span = f"{rs[0]['ranks']}-{rs[-1]['ranks']}"
    print(f"{kind:10} {tool:8} {span:>10} {max(t) / min(t):6.2f} {max(c) / min(c):6.2f} "
          f"{max(m) / m[0]:7.2f}")
print("memory: the largest per-record RSS over the smallest set's, so RSS that stays the same")
print("while the records grow shows 1.00, and only growth faster than the records shows more")
EOF
