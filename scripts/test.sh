#!/usr/bin/env bash
# Runs every check and test of the project: formatting, lints, the bare-metal build of the core,
# the Rust test suites, and the Python consumer tests. Installs what it needs (a rustup target,
# a local Python virtual environment) and nothing system-wide.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n== %s\n' "$*"; }

step "toolchain pieces"
rustup component add rustfmt clippy >/dev/null 2>&1 || true
rustup target add thumbv7em-none-eabihf

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy --all-targets -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "waffle builds for bare metal (no_std, no alloc)"
cargo build -p waffle --no-default-features --target thumbv7em-none-eabihf

step "cargo test"
cargo test --workspace

step "Python consumer tests: Perfetto's protobuf classes, OpenTelemetry's protos, a real Zipkin server, Jaeger UI rules"
cargo build --workspace --examples --bins   # already built by cargo test; a no-op then
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt
WAFFLE_BIN_DIR="$PWD/target/debug" .venv/bin/python -m pytest -q tests/python
