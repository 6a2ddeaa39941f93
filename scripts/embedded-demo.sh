#!/usr/bin/env bash
# The bare-metal demo end to end: builds the firmware of core/metal/demo for a Cortex-M4F
# (thumbv7em-none-eabihf), runs it on QEMU's mps2-an386 board with a time limit, decodes the
# trace.bin it wrote through semihosting into OUT.pftrace with waffle-decode, and checks the
# exact tree with Perfetto's protobuf classes (tests/consumers/test_embedded.py).
#
# Installs what it lacks as scripts/test.sh does: the rustup target, QEMU (apt-get), and the
# Python packages of tests/consumers in .venv. Honours CARGO_TARGET_DIR (default target/).
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-embedded.pftrace}")"
target_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")"

rustup target add thumbv7em-none-eabihf >/dev/null
if ! command -v qemu-system-arm >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update
    $sudo apt-get install -y --no-install-recommends qemu-system-arm
fi

# The firmware: its own workspace, its target and link scripts in core/metal/demo/.cargo.
firmware_dir="$target_dir/embedded"
(cd core/metal/demo && CARGO_TARGET_DIR="$firmware_dir" cargo build --release --quiet)
firmware="$firmware_dir/thumbv7em-none-eabihf/release/waffle-metal-demo"

run_dir="$(mktemp -d)"
trap 'rm -rf "$run_dir"' EXIT
# The firmware exits QEMU through semihosting (0 when every sample was filtered in time); the
# time limit catches a firmware that never exits.
status=0
(cd "$run_dir" && timeout 60 qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic \
    -monitor none -serial none -semihosting-config enable=on,target=native \
    -kernel "$firmware") || status=$?
if [ "$status" -ne 0 ]; then
    echo "embedded-demo: the firmware under QEMU exited with status $status (124: time limit)" >&2
    exit 1
fi
if [ ! -s "$run_dir/trace.bin" ]; then
    echo "embedded-demo: the firmware wrote no trace.bin" >&2
    exit 1
fi

cargo build --quiet -p waffle-decode --bin waffle-decode
"$target_dir/debug/waffle-decode" "$run_dir/trace.bin" -o "$out"

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r tests/consumers/requirements.txt
WAFFLE_EMBEDDED_PFTRACE="$out" .venv/bin/python -m pytest -q tests/consumers/test_embedded.py
echo "open $out in https://ui.perfetto.dev (Open trace file)"
