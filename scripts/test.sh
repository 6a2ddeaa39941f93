#!/usr/bin/env bash
# Runs every check and test of the project: formatting, lints, the bare-metal build of the core,
# waffle-metal's demo firmware under QEMU, the Rust test suites (stress tests in release, the
# buffer hand-off under ThreadSanitizer), the fuzz targets for a bounded time, and the Python
# consumer tests. Installs what it needs (a rustup target, a nightly toolchain with rust-src,
# cargo-fuzz, a local Python virtual environment) and nothing system-wide, except Open MPI
# (apt-get) for waffle-mpi and the MPI tests when mpicc is missing, Clang (apt-get) for the C++20
# coroutine tests when clang++ is, the real MPI programs the
# consumer tests trace (Debian's lammps, netpipe-openmpi, hpcc; apt-get) when one is, Chromium
# (apt-get) for the diff page's consumer test when chromium is, and QEMU (apt-get, by
# scripts/embedded-demo.sh) when qemu-system-arm is. Jaeger v2 is built once with Go (needed
# then) into ~/.cache/waffle by scripts/build-jaeger.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n== %s\n' "$*"; }

step "toolchain pieces"
rustup component add rustfmt clippy >/dev/null 2>&1 || true
rustup target add thumbv7em-none-eabihf
# Nightly with the standard library's source, for ThreadSanitizer and cargo-fuzz below (an
# installed nightly is kept as it is, so that its build caches stay valid).
cargo +nightly --version >/dev/null 2>&1 || rustup toolchain install nightly --profile minimal
rustup component add rust-src --toolchain nightly

step "ARCHITECTURE.md names every source file"
./scripts/check-architecture.sh

step "no source file over 400 lines without a reason at its top"
./scripts/check-file-length.sh

step "no import circle between files, each type's methods in its own file"
./scripts/check-import-cycles.py

step "cargo fmt --check"
cargo fmt --all --check

step "Open MPI (mpicc, mpirun): waffle-mpi builds with it, and the MPI tests run it"
if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update
    $sudo apt-get install -y --no-install-recommends openmpi-bin libopenmpi-dev
fi
# Before clippy: clippy and the tests take --workspace, which includes waffle-mpi, whose build
# needs mpicc. With this set, the MPI tests fail instead of skipping when MPI is missing.
export WAFFLE_REQUIRE_MPI=1

step "cargo clippy --all-targets -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
# The workspace build turns on waffle-export's `send` (the command line needs it); without it,
# the exporters alone must build clean too.
cargo clippy -p waffle-export --all-targets -- -D warnings

step "waffle builds for bare metal (no_std, no alloc)"
cargo build -p waffle --no-default-features --target thumbv7em-none-eabihf

step "the frame grammar builds for bare metal (no_std + alloc: waffle's \"frames\" feature)"
cargo build -p waffle --no-default-features --features frames --target thumbv7em-none-eabihf
cargo build -p waffle-wire --no-default-features --target thumbv7em-none-eabihf

step "waffle-metal for bare metal, and its demo firmware: clippy and fmt for thumbv7em-none-eabihf"
cargo clippy -p waffle-metal --target thumbv7em-none-eabihf -- -D warnings
# The firmware is its own workspace (never part of the host builds above); with and without
# the trace (the size baseline of benches/README.md).
embedded_target="$(realpath -m "${CARGO_TARGET_DIR:-target}")/embedded"
(cd core/metal/demo && cargo fmt --check \
    && CARGO_TARGET_DIR="$embedded_target" cargo clippy --release --all-targets -- -D warnings \
    && CARGO_TARGET_DIR="$embedded_target" cargo clippy --release --all-targets --no-default-features --features compile-out -- -D warnings)

step "bare metal under QEMU: the demo firmware on mps2-an386, its trace decoded and checked exactly"
# The Python consumer tests below check the same file again (tests/consumers/test_embedded.py).
export WAFFLE_EMBEDDED_PFTRACE="$(realpath -m "${CARGO_TARGET_DIR:-target}")/embedded.pftrace"
./scripts/embedded-demo.sh "$WAFFLE_EMBEDDED_PFTRACE"

step "Clang: the C++ tests build with it as well as with GCC (C++20 coroutines among them)"
if ! command -v clang++ >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update
    $sudo apt-get install -y --no-install-recommends clang
fi
# With this set, the tests that build with Clang fail instead of skipping when it is missing.
export WAFFLE_REQUIRE_CLANG=1

step "cargo test (waffle-ffi: header drift, C/C++ tests with -Werror, static link, MPI; waffle-mpi under mpirun)"
cargo test --workspace

step "stress: 16 threads x 1,000,000 and x 200,000 spans; traces exported to every format in bounded memory (release build)"
cargo test --release -p waffle-std --test stress -- --nocapture
cargo test --release -p waffle-decode --test bounded_memory -- --nocapture

step "ThreadSanitizer: the buffer hand-off between producer threads and the collector (nightly)"
host="$(rustc -vV | sed -n 's/^host: //p')"
# tsan.supp: the seqlock's byte copy, whose racing reads are discarded (core/src/queue/staged.rs).
RUSTFLAGS="-Zsanitizer=thread" TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/scripts/tsan.supp" \
    cargo +nightly test -Zbuild-std --target "$host" --target-dir target/tsan -p waffle --test handoff

step "fuzz: trace_reader, record_stream, roundtrip, 20 s each from fuzz/corpus"
./scripts/fuzz.sh

step "Chromium (headless): tests/consumers/test_diff.py renders the diff page in it"
if ! command -v chromium >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update
    $sudo apt-get install -y --no-install-recommends chromium
fi

step "Real MPI programs for tests/consumers/test_real_programs.py: LAMMPS, NetPIPE, HPCC (Debian)"
# Traced with libwaffle_mpi.so preloaded and counted with a PMPI counter; with
# WAFFLE_REQUIRE_MPI set (above), the tests fail rather than skip without them.
if ! command -v lmp >/dev/null 2>&1 || ! command -v NPopenmpi >/dev/null 2>&1 || ! command -v hpcc >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update
    $sudo apt-get install -y --no-install-recommends lammps netpipe-openmpi hpcc
fi

step "Jaeger v2 for the consumer tests: built from its Go module once, then taken from the cache"
# scripts/build-jaeger.sh prints the cached binary's path at once after the first build
# (minutes, with Go and the Go module proxy); the tests start it with tests/consumers/jaeger.yaml.
export WAFFLE_JAEGER_BIN="$(./scripts/build-jaeger.sh)"

step "Python consumer tests: Perfetto's protobuf classes, OpenTelemetry's protos, a real Zipkin server, a real Jaeger v2, Jaeger UI rules, xprof, the diff page in Chromium, real MPI programs"
cargo build --workspace --examples --bins   # already built by cargo test; a no-op then
cargo build -p waffle-mpi                   # libwaffle_mpi.so (a library: --bins leaves it out)
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r tests/consumers/requirements.txt
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -r tests/consumers/requirements-nodeps.txt
# mpi4py built against the Open MPI installed above (its wheel would bring another MPI).
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-binary mpi4py -r tests/consumers/requirements-mpi.txt
WAFFLE_BIN_DIR="$PWD/target/debug" .venv/bin/python -m pytest -q tests/consumers

step "Python package: waffle._native built into .venv by maturin, pytest python/tests (JAX example included)"
# maturin develop rebuilds only what changed (a few seconds on a rerun) and installs the package
# editable; the first build compiles the crates in release mode (about a minute).
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r python/requirements-dev.txt -r python/requirements-jax.txt
VIRTUAL_ENV="$PWD/.venv" .venv/bin/maturin develop --release --quiet -m python/Cargo.toml
.venv/bin/python -m pytest -q python/tests
