#!/usr/bin/env bash
# Records the traces of real MPI programs that `benches/decode.rs` exports (group `real`): each
# program run under `mpirun` with `libwaffle_mpi.so` preloaded, one file per rank, into
# target/bench-traces/PROGRAM/rank*.bin (or $WAFFLE_BENCH_TRACES/PROGRAM/).
#
#   benches/real-traces.sh                  # netpipe and lammps (about 20 MB each, a minute)
#   benches/real-traces.sh netpipe-long     # any of: netpipe netpipe-long lammps
#
# - netpipe: NetPIPE's ping-pong between 2 ranks, blocks of 1 to 64 bytes, 2,500 round trips
#   per size (`-n`): 165,000 messages each way, 12 MB per rank.
# - netpipe-long: the same with 20,000 round trips per size, 8 times as long (95 MB per rank):
#   beside `netpipe`, it shows whether an export's cost per byte grows with the run.
# - lammps: LAMMPS' Lennard-Jones melt (2,048 atoms, tiled communication, load balancing every
#   50 steps) for 4,000 steps on 4 ranks: halo exchanges with several peers, collectives, 5 MB
#   per rank.
#
# Needs Open MPI's `mpirun`, NetPIPE (`NPopenmpi`) and LAMMPS (`lmp`) on the PATH.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
out=${WAFFLE_BENCH_TRACES:-$target/bench-traces}
programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=(netpipe lammps)

cargo build --release -p waffle-mpi --manifest-path "$root/Cargo.toml" >&2
lib=$target/release/libwaffle_mpi.so

# Flags that work as root in a container and on fewer cores than ranks (yield when idle, or
# two spinning ranks on two busy cores take many times as long).
flags=(--allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader
       --mca btl_vader_single_copy_mechanism none --mca plm_rsh_agent "" --mca mpi_yield_when_idle 1)

# record NAME RANKS ARGV...: runs ARGV in a scratch directory, the traces into $out/NAME.
record() {
    local name=$1 ranks=$2
    shift 2
    local dir=$out/$name
    rm -rf "$dir"
    mkdir -p "$dir/run"
    [ -z "${input:-}" ] || printf '%s' "$input" >"$dir/run/in.bench"
    echo "real-traces: $name ($ranks ranks): $*" >&2
    (cd "$dir/run" && mpirun "${flags[@]}" -np "$ranks" -x LD_PRELOAD="$lib" \
        -x WAFFLE_OUTPUT="$dir/rank%r.bin" "$@" >"$dir/run.log" 2>&1) ||
        { cat "$dir/run.log" >&2; exit 1; }
    rm -rf "$dir/run"
    ls -l "$dir"/rank*.bin >&2
}

lammps_input='units           lj
atom_style      atomic
lattice         fcc 0.8442
region          box block 0 8 0 8 0 8
create_box      1 box
create_atoms    1 box
mass            1 1.0
velocity        all create 3.0 87287 loop geom
pair_style      lj/cut 2.5
pair_coeff      1 1 1.0 1.0 2.5
neighbor        0.3 bin
neigh_modify    every 20 delay 0 check no
fix             1 all nve
comm_style      tiled
balance         1.0 rcb
fix             2 all balance 50 1.0 rcb
thermo          50
run             4000
'

for program in "${programs[@]}"; do
    case $program in
        netpipe) input='' record netpipe 2 NPopenmpi -u 64 -n 2500 -o np.out ;;
        netpipe-long) input='' record netpipe-long 2 NPopenmpi -u 64 -n 20000 -o np.out ;;
        lammps) input=$lammps_input record lammps 4 lmp -in in.bench -log none -screen none ;;
        *) echo "real-traces: unknown program $program (netpipe, netpipe-long, lammps)" >&2; exit 2 ;;
    esac
done
