"""The bare-metal demo's trace, read back by Perfetto's own protobuf classes.

`scripts/embedded-demo.sh OUT.pftrace` builds the firmware of `core/metal/demo` for a
Cortex-M4F, runs it on QEMU's `mps2-an386` board, decodes the `trace.bin` it wrote through
semihosting with `waffle-decode`, and runs this file on the result (`WAFFLE_EMBEDDED_PFTRACE`).
The firmware is deterministic in what it records, so the tree is checked exactly: SysTick's
`sample` events on a track of their own with the signal's values, the main loop's `filter`
spans each caused by its sample (one flow arrow each, nothing else), a `fir` span and an
`output` event inside each, with the filter's outputs computed here independently. The
import rules of trace_processor are those of `test_perfetto.py`.
"""

import os
from pathlib import Path

import pytest

from test_perfetto import Instant, Slice, flow_arrows, parse

SAMPLES = 48  # core/metal/demo/src/main.rs
COEFFS = [1024, 2048, 4096, 9216, 9216, 4096, 2048, 1024]  # demo/src/filter.rs, Q15


def signal(seq):
    """The demo's input: a square wave of amplitude 8000 and period 16, plus hashed noise."""
    square = 8000 if (seq // 8) % 2 == 0 else -8000
    noise = ((seq * 2654435761) % 2**32 >> 22) - 512
    return square + noise


def filtered():
    """The 8-tap FIR over the whole input, rounded to nearest in Q15 and saturated."""
    xs = [signal(n) for n in range(SAMPLES)]
    out = []
    for n in range(SAMPLES):
        acc = sum(c * xs[n - k] for k, c in enumerate(COEFFS) if n - k >= 0)
        out.append(max(-32768, min(32767, (acc + (1 << 14)) >> 15)))
    return out


@pytest.fixture(scope="module")
def trace():
    given = os.environ.get("WAFFLE_EMBEDDED_PFTRACE")
    if not given:
        pytest.skip("no WAFFLE_EMBEDDED_PFTRACE: run scripts/embedded-demo.sh OUT.pftrace")
    return parse(Path(given).read_bytes())


def test_the_exact_tree(trace):
    tracks, flowing = trace
    processes = [t for t in tracks.values() if t.descriptor.HasField("process")]
    assert [p.descriptor.process.process_name for p in processes] == ["filter-demo"]
    threads = {t.descriptor.thread.thread_name: t for t in tracks.values() if t.descriptor.HasField("thread")}
    assert sorted(threads) == ["SysTick", "main"], "one track per stream"
    tick, main = threads["SysTick"], threads["main"]

    # SysTick: the samples, in order, with the signal's values, and nothing else.
    assert tick.slices == []
    assert [i.name for i in tick.instants] == ["sample"] * SAMPLES
    for seq, s in enumerate(tick.instants):
        assert s.args["seq"] == ("uint_value", seq)
        assert s.args["x"] == ("int_value", signal(seq))

    # The main loop: filter > (fir, output) for every sample, in order, with the outputs.
    tops = [s for s in main.slices if s.depth == 0]
    assert [s.name for s in tops] == ["filter"] * SAMPLES
    assert main.instants == []
    ys = filtered()
    for seq, f in enumerate(tops):
        assert f.args["seq"] == ("uint_value", seq)
        assert [c.name for c in f.children] == ["fir"]
        assert f.children[0].args["taps"] == ("uint_value", 8)
        assert f.children[0].children == [] and f.children[0].instants == []
        assert [i.name for i in f.instants] == ["output"]
        out = f.instants[0]
        assert out.args["seq"] == ("uint_value", seq)
        assert out.args["y"] == ("int_value", ys[seq]), f"output {seq}"
        assert f.ts <= f.children[0].ts <= f.children[0].end <= out.ts <= f.end
    assert len(main.slices) == 2 * SAMPLES

    # Causality: one arrow from each sample to the filter span it caused, and no other.
    arrows = flow_arrows(flowing)
    assert len(arrows) == SAMPLES
    for src, dst in arrows:
        assert isinstance(src, Instant) and src.name == "sample"
        assert isinstance(dst, Slice) and dst.name == "filter"
        assert src.args["seq"] == dst.args["seq"]
        assert src.ts <= dst.ts, "a sample is taken before it is filtered"
        assert dst.args["waffle.caused_by"] == ("string_value", src.args["waffle.id"][1])
