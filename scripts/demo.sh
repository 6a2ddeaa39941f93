#!/usr/bin/env bash
# Builds waffle, runs the traced heat-diffusion example and decodes its trace for Perfetto UI.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-heat.pftrace}"
cargo build --release -p waffle-std --example heat -p waffle-decode --bin waffle-decode
./target/release/examples/heat heat.bin
./target/release/waffle-decode heat.bin -o "$out"
echo "open $out in https://ui.perfetto.dev (Open trace file)"
