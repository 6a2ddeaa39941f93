"""How late ``waffle.jax.timed`` sees a compiled call's outputs ready, on CPU JAX.

Each mode makes ``--calls`` calls of a jitted function (four 384 x 384 matmuls) through
``timed`` under ``jax.profiler.trace``, merges the profile, decodes the trace and compares each
call's device slice with the XLA ops the profiler saw for it (by ``run_id``, in call order):
how long after the call's last op ended the slice ends. What the calling thread does after each
call decides it, since the watcher needs the GIL to read its clock:

- ``sleep``: sleeps 20 ms (waiting on I/O or data);
- ``block``: ``block_until_ready`` on the result, then the next call;
- ``busy``: runs Python code for 20 ms (a busy loop).

    JAX_PLATFORMS=cpu .venv/bin/python python/benches/bench_jax_timed.py     # about 10 s

The figures in ``docs/jax.md`` come from this script.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import waffle  # noqa: E402
import waffle.jax as wj  # noqa: E402
from waffle._native import decode  # noqa: E402


@jax.jit
def work(x):
    for _ in range(4):
        x = jnp.tanh(x @ x)
    return x


def after_call(mode: str, out) -> None:
    if mode == "block":
        out.block_until_ready()
    elif mode == "sleep":
        time.sleep(0.02)
    else:
        deadline = time.perf_counter() + 0.02
        while time.perf_counter() < deadline:
            pass


def run(mode: str, calls: int, tmp: Path) -> list[float]:
    """How late (us) each call's slice ends after its last XLA op."""
    timed = wj.timed(work)
    x = jnp.full((384, 384), 0.01, jnp.float32)
    work(x).block_until_ready()
    trace, logdir = tmp / f"{mode}.bin", tmp / f"profile-{mode}"
    waffle.start(trace)
    with jax.profiler.trace(str(logdir)):
        for _ in range(calls):
            out = timed(x)
            after_call(mode, out)
        out.block_until_ready()
        wj.wait()
    wj.merge_profile(logdir)
    waffle.shutdown()
    threads = decode([str(trace)])["processes"][0]["threads"]
    spans = [s for t in threads for s in t["spans"] if s["fields"].get("track") == t["name"]]
    runs: dict[int, float] = {}
    for op in spans:
        if "run_id" in op["fields"]:
            run_id = op["fields"]["run_id"]
            runs[run_id] = max(runs.get(run_id, 0), op["end_ns"])
    slices = sorted((s for s in spans if s["name"] == "work"), key=lambda s: s["start_ns"])
    op_ends = sorted(runs.values())
    assert len(slices) == len(op_ends) == calls, (len(slices), len(op_ends))
    return [(s["end_ns"] - end) / 1e3 for s, end in zip(slices, op_ends)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    print(f"{'mode':<6} {'median us':>10} {'min us':>8} {'max us':>9}   ({args.calls} calls, {os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("sleep", "block", "busy"):
            late = run(mode, args.calls, Path(tmp))
            print(f"{mode:<6} {statistics.median(late):>10,.0f} {min(late):>8,.0f} {max(late):>9,.0f}")


if __name__ == "__main__":
    main()
