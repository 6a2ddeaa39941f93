#!/usr/bin/env bash
# What building each shipped artifact costs at two revisions: libwaffle.so (waffle-ffi), the
# Python wheel (waffle-python, built by maturin) and the waffle-decode binary; a program's view of
# the reader (`reader`: the library a program links to read a trace into the model); and
# `exporter-edit`, the debug rebuild of waffle-decode after a one-line change to the Zipkin
# exporter (the build before the change is not timed).
#
#   benches/build-cost.sh [BEFORE [AFTER]]      # defaults: a83e3a9 (before the recorder/decoder
#   REPS=1 benches/build-cost.sh                #   split) and HEAD; REPS builds of each (default 2)
#   ARTIFACTS=waffle-decode benches/build-cost.sh   # a subset of: libwaffle.so wheel waffle-decode
#                                               #   reader exporter-edit
#
# Each revision is checked out into a temporary git worktree under target/build-cost/. Every
# build is a clean release build in a fresh CARGO_TARGET_DIR (nothing shared, no compiler cache),
# with cargo's default -j, after `cargo fetch` so that downloads are not timed. Builds run one
# after another, the two revisions alternating for each artifact, so that both see the same
# machine load. Measured: wall-clock seconds; CPU seconds (user + system of cargo and all it runs,
# less disturbed than wall-clock by other work on the machine); crates compiled (cargo's
# `Compiling` lines); the artifact's size in bytes and the size of a stripped copy (for the
# wheel: the .whl file, and its extension module extracted and stripped). Progress goes to
# stderr, the Markdown tables to stdout; the build logs stay in target/build-cost/.
set -euo pipefail
cd "$(dirname "$0")/.."

before_rev=${1:-a83e3a9}
after_rev=${2:-HEAD}
reps=${REPS:-2}
artifacts=${ARTIFACTS:-libwaffle.so wheel waffle-decode}
root="$PWD/target/build-cost"
venv="$root/venv"
results="$root/results.txt"
log() { printf '%s\n' "$*" >&2; }

# No compiler cache: every build starts from nothing.
export RUSTC_WRAPPER="" CARGO_BUILD_RUSTC_WRAPPER=""
unset CARGO_BUILD_TARGET_DIR

declare -A sha wt
sha[before]=$(git rev-parse --verify "$before_rev^{commit}")
sha[after]=$(git rev-parse --verify "$after_rev^{commit}")

cleanup() {
    for side in before after; do
        if [ -n "${wt[$side]:-}" ]; then git worktree remove --force "${wt[$side]}" || true; fi
    done
    rm -rf "$root/target" "$root/out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$root"
: >"$results"

# maturin in a virtual environment of its own, pinned as scripts/test.sh installs it (from
# python/requirements-dev.txt).
if [ ! -x "$venv/bin/maturin" ]; then
    log "== maturin into $venv"
    python3 -m venv "$venv"
    spec=$(grep -m1 '^maturin==' python/requirements-dev.txt || echo 'maturin>=1.16,<2')
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec"
fi

for side in before after; do
    wt[$side]="$root/src-$side"
    # A worktree left by an interrupted run is replaced.
    git worktree remove --force "${wt[$side]}" 2>/dev/null || rm -rf "${wt[$side]}"
    git worktree add --quiet --force --detach "${wt[$side]}" "${sha[$side]}"
    log "== $side: $(git log -1 --format='%h %s' "${sha[$side]}")"
    (cd "${wt[$side]}" && cargo fetch --quiet)
done

# build ARTIFACT SIDE RUN: one clean build, one line appended to $results.
build() {
    local art=$1 side=$2 run=$3 src=${wt[$2]} tgt="$root/target" out="$root/out"
    local blog="$root/$art-$side-$run.log" cmd file pkg
    rm -rf "$tgt" "$out"
    mkdir -p "$out"
    case $art in
    libwaffle.so) cmd=(cargo build --release --offline -p waffle-ffi) ;;
    wheel) cmd=("$venv/bin/maturin" build --release --offline -m python/Cargo.toml
        -i "$venv/bin/python" --out "$out") ;;
    waffle-decode)
        # Before the split the binary belonged to waffle-std; after it, to waffle-decode.
        pkg=waffle-std
        if [ -f "$src/std-runtime/decoder/Cargo.toml" ]; then pkg=waffle-decode; fi
        cmd=(cargo build --release --offline -p "$pkg" --bin waffle-decode) ;;
    reader)
        # Before the layers, the reader was waffle-decode's library without its command line.
        if [ -f "$src/std-runtime/read/Cargo.toml" ]; then
            cmd=(cargo build --release --offline -p waffle-read --lib)
        else
            cmd=(cargo build --release --offline -p waffle-decode --lib --no-default-features)
        fi ;;
    exporter-edit)
        zipkin=std-runtime/export/src/zipkin.rs
        [ -f "$src/$zipkin" ] || zipkin=std-runtime/decoder/src/export/zipkin.rs
        log "-- $art, $side, run $run: the build before the change (not timed)"
        env -C "$src" CARGO_TARGET_DIR="$tgt" cargo build --offline -p waffle-decode --bin waffle-decode >"$blog" 2>&1
        printf '\n/// Changed by benches/build-cost.sh.\nconst _EDIT: u32 = %d;\n' "$run" >>"$src/$zipkin"
        cmd=(cargo build --offline -p waffle-decode --bin waffle-decode) ;;
    esac
    log "-- $art, $side, run $run: ${cmd[*]}"
    local real user sys TIMEFORMAT='%R %U %S'
    # A simple command (env -C, not a subshell), so that `time` reports to the group's stderr.
    if ! { time env -C "$src" CARGO_TARGET_DIR="$tgt" "${cmd[@]}" >"$blog" 2>&1; } 2>"$root/time"; then
        tail -n 40 "$blog" >&2
        log "build failed; full log: $blog"
        exit 1
    fi
    read -r real user sys <"$root/time"
    if [ "$art" = exporter-edit ]; then git -C "$src" checkout --quiet -- "$zipkin"; fi
    case $art in
    libwaffle.so) file="$tgt/release/libwaffle.so" ;;
    waffle-decode) file="$tgt/release/waffle-decode" ;;
    exporter-edit) file="$tgt/debug/waffle-decode" ;;
    reader)
        file="$tgt/release/libwaffle_read.rlib"
        [ -f "$file" ] || file="$tgt/release/libwaffle_decode.rlib" ;;
    wheel) file=$(ls "$out"/*.whl) ;;
    esac
    local bin=$file
    if [ "$art" = wheel ]; then
        unzip -q -o -j "$file" '*.so' -d "$out/so"
        bin=$(ls "$out"/so/*.so)
    fi
    # An rlib is not stripped: its size is that of the library as linked into a program.
    if [ "$art" = reader ]; then cp "$bin" "$out/stripped"; else strip -o "$out/stripped" "$bin"; fi
    printf '%s %s %s %.1f %.1f %d %d %d\n' "$art" "$side" "$run" "$real" \
        "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" \
        "$(grep -c '^ *Compiling ' "$blog")" "$(stat -c %s "$file")" "$(stat -c %s "$out/stripped")" >>"$results"
    rm -rf "$tgt" "$out"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for art in $artifacts; do
    for run in $(seq "$reps"); do
        for side in before after; do build "$art" "$side" "$run"; done
    done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# The tables. Sizes and crate counts do not vary between runs; times are the fastest run's.
echo "Before: \`$(git log -1 --format='%h %s' "${sha[before]}")\`"
echo
echo "After: \`$(git log -1 --format='%h %s' "${sha[after]}")\`"
echo
echo "$(nproc) cores (\`nproc\`), $(rustc --version | cut -d' ' -f1-2), $("$venv/bin/maturin" --version)," \
    "$reps run(s) of each build, default -j; load average (1, 5, 15 min) $load_start at the start," \
    "$load_end at the end."
echo
echo "| artifact | wall s, before → after | CPU s | crates compiled | bytes | stripped bytes |"
echo "|---|---:|---:|---:|---:|---:|"
awk '
    { k = $1 SUBSEP $2
      if (!(k in w) || $4 < w[k]) w[k] = $4
      if (!(k in u) || $5 < u[k]) u[k] = $5
      c[k] = $6; b[k] = $7; x[k] = $8
      if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
    function cell(a, k1, k2, fmt) {
        return sprintf(fmt " → " fmt " (%.2f×)", a[k1], a[k2], a[k2] / a[k1]) }
    END { for (i = 1; i <= n; i++) { r = order[i]; p = r SUBSEP "before"; q = r SUBSEP "after"
        printf "| %s | %s | %s | %s | %s | %s |\n", (r == "wheel" ? "wheel (.whl; stripped: its .so)" : r),
            cell(w, p, q, "%.1f"), cell(u, p, q, "%.1f"), cell(c, p, q, "%d"), cell(b, p, q, "%d"),
            cell(x, p, q, "%d") } }
' "$results"
echo
echo "Every build, in the order run:"
echo
echo "| artifact | revision | run | wall s | CPU s | crates | bytes | stripped bytes |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
awk '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$results"
