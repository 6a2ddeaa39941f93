#!/usr/bin/env bash
# The bare-metal figures of benches/README.md ("Bare metal"): the flash and RAM waffle adds to
# the demo firmware (built with and without its `trace` feature, sizes read from the ELF), and
# the cost of a span under QEMU's instruction count against a hand-written span
# (core/metal/demo/src/bin/span_cost.rs). Needs what scripts/embedded-demo.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")/embedded"
elf="$target_dir/thumbv7em-none-eabihf/release"

sizes() { # text (flash: code and constants), data (flash and RAM), bss (RAM), of one ELF
    llvm-size -A "$1" | awk '
        $1 == ".vector_table" || $1 == ".text" || $1 == ".rodata" || $1 == "linkm2_CALLSITES" { text += $2 }
        $1 == ".data" || $1 == "linkme_CALLSITES" { data += $2 }
        $1 == ".bss" || $1 == ".uninit" { bss += $2 }
        END { printf "%d %d %d\n", text, data, bss }'
}

cd core/metal/demo
CARGO_TARGET_DIR="$target_dir" cargo build --release --quiet --no-default-features --features compile-out
cp "$elf/waffle-metal-demo" "$elf/waffle-metal-demo-untraced"
CARGO_TARGET_DIR="$target_dir" cargo build --release --quiet --bins
cd - >/dev/null

read -r t0 d0 b0 < <(sizes "$elf/waffle-metal-demo-untraced")
read -r t1 d1 b1 < <(sizes "$elf/waffle-metal-demo")
printf '%-22s %8s %8s %8s %10s %10s\n' firmware text data bss flash RAM
printf '%-22s %8d %8d %8d %10d %10d\n' "untraced" "$t0" "$d0" "$b0" $((t0 + d0)) $((d0 + b0))
printf '%-22s %8d %8d %8d %10d %10d\n' "traced" "$t1" "$d1" "$b1" $((t1 + d1)) $((d1 + b1))
printf '%-22s %8d %8d %8d %10d %10d\n' "added by waffle" $((t1 - t0)) $((d1 - d0)) $((b1 - b0)) \
    $((t1 + d1 - t0 - d0)) $((d1 + b1 - d0 - b0))

# -icount shift=0: one instruction per virtual ns; the 25 MHz timer ticks every 40.
report="$(timeout 120 qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic -monitor none \
    -serial none -semihosting-config enable=on,target=native -icount shift=0 \
    -kernel "$elf/span-cost")"
echo "$report"
echo "$report" | awk '
    /^spans/ { n = $2; loop = $4; hand = $6; waffle = $8 }
    /^trace_bytes/ { bytes = $2; head = $4; dropped = $6 }
    END {
        h = (hand - loop) * 40 / n; w = (waffle - loop) * 40 / n
        printf "instructions per span: hand-written %.1f, waffle %.1f, ratio %.2f (loop overhead %.1f removed)\n", h, w, w / h, loop * 40 / n
        printf "trace bytes per span: %.2f (frames and chunk heads included, file head excluded); dropped %d\n", (bytes - head) / n, dropped
    }'
