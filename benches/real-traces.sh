#!/usr/bin/env bash
# Records the traces of real MPI programs that `benches/decode.rs` exports (its `real_*`
# groups): each program run under mpirun with libwaffle_mpi.so preloaded, one trace.bin per
# rank, into DIR/NAME/rank*.bin, where DIR is $WAFFLE_BENCH_TRACES, else
# $CARGO_TARGET_DIR/bench-traces, else target/bench-traces (the bench looks in the same
# place; nothing there is committed). A set that is there already is recorded again.
#
#   netpipe     NetPIPE (`NPopenmpi`, Debian's netpipe-openmpi), 2 ranks, messages of up to
#               64 bytes, 20000 round trips a size: ~1.4 M messages between one pair, ~2 x 100 MB
#   netpipe-short  the same with 2500 round trips a size, an eighth as long (~2 x 11 MB):
#               beside `netpipe`, whether an export's cost per byte grows with the run
#   lammps-8    LAMMPS (`lmp`, Debian's lammps), 8 ranks: the Lennard-Jones melt of
#               tests/consumers/real_programs.py (tiled communication, rebalancing, irregular
#               exchanges, reductions) run for $LAMMPS_STEPS steps (default 4000), ~8 x 9 MB
#   halo-20k    benches/c/halo.c, 2 ranks, 20000 steps of a halo exchange (4 messages a step,
#   halo-160k   an allreduce every 100): the same run at two lengths, ~3.6 and ~31 MB a rank
#
# usage: benches/real-traces.sh [NAME...]     (default: every set above)
#
# Adding a program: a function `record_NAME DIR` that leaves DIR/rank*.bin, and NAME in `all`.
# Every set found is a row of each `real_*` group of the bench.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
out="${WAFFLE_BENCH_TRACES:-$target/bench-traces}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
all=(netpipe netpipe-short lammps-8 halo-20k halo-160k)
sets=("${@:-${all[@]}}")

# waffle-mpi apart: with --bin, cargo builds binaries only, and not its library.
cargo build --release --quiet -p waffle-mpi
cargo build --release --quiet -p waffle-decode --bin waffle-decode
lib="$(cd "$target/release" && pwd)/libwaffle_mpi.so"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The flags of tests/consumers/real_programs.py: as root, more ranks than cores, shared memory
# only, and a rank waiting for a message yields its core.
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none
        --mca btl self,vader --mca btl_vader_single_copy_mechanism none --mca plm_rsh_agent ""
        --mca mpi_yield_when_idle 1)

traced() { # traced DIR RANKS PROGRAM ARGS...: runs it in $work with the library preloaded
    local dir="$1" ranks="$2"
    shift 2
    if ! (cd "$work" && "${mpirun[@]}" -np "$ranks" -x "LD_PRELOAD=$lib" \
        -x "WAFFLE_OUTPUT=$dir/rank%r.bin" "$@" >"$work/log" 2>&1); then
        cat "$work/log" >&2
        return 1
    fi
}

netpipe() { # netpipe DIR ROUND_TRIPS
    traced "$1" 2 NPopenmpi -u 64 -n "$2" -o "$work/np.out"
}
record_netpipe() { netpipe "$1" 20000; }
record_netpipe-short() { netpipe "$1" 2500; }

record_lammps-8() {
    # The consumer tests' input, with its runs made longer: `run 200` and `run 50` become
    # LAMMPS_STEPS and a quarter of it.
    local steps="${LAMMPS_STEPS:-4000}"
    python3 - "$work/in.melt" "$steps" <<'EOF'
import ast, sys
source = open("tests/consumers/real_programs.py").read()
text = next(ast.literal_eval(node.value) for node in ast.parse(source).body
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "LAMMPS_INPUT")
steps = int(sys.argv[2])
text = text.replace("run             200", f"run             {steps}")
text = text.replace("run             50", f"run             {max(steps // 4, 1)}")
open(sys.argv[1], "w").write(text)
EOF
    traced "$1" 8 lmp -in in.melt -log none -screen none
}

halo() { # halo DIR STEPS
    mpicc -O2 -o "$work/halo" benches/c/halo.c
    traced "$1" 2 "$work/halo" "$2"
}
record_halo-20k() { halo "$1" 20000; }
record_halo-160k() { halo "$1" 160000; }

for name in "${sets[@]}"; do
    if ! declare -F "record_$name" >/dev/null; then
        echo "real-traces.sh: no set named $name (there are: ${all[*]})" >&2
        exit 2
    fi
    dir="$out/$name"
    rm -rf "$dir"
    mkdir -p "$dir"
    start=$SECONDS
    "record_$name" "$dir"
    if ! ls "$dir"/rank*.bin >/dev/null 2>&1; then
        echo "real-traces.sh: $name left no trace in $dir" >&2
        exit 1
    fi
    echo "$name: $(ls "$dir" | wc -l) files, $(du -sh "$dir" | cut -f1), recorded in $((SECONDS - start)) s"
done
