"""A tiny JAX model trained for a few steps, traced with waffle: the steps, each compiled call's
dispatch (a host span) and device time (a slice on the device's track), JAX's compile phases,
and the XLA ops of a ``jax.profiler`` profile merged into the same trace on one time base.

Runs on CPU JAX::

    pip install -r python/requirements-jax.txt
    python python/examples/jax_steps.py --out /tmp/jax-steps

Writes ``jax-steps.bin`` (waffle's trace), ``jax-steps.pftrace`` (open it in ui.perfetto.dev)
and the profile under ``profile/``, then prints an outline of the trace: each step with its
dispatch span, its device slice (dispatch to outputs ready) and the XLA ops the profile saw.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import waffle  # noqa: E402
import waffle.jax  # noqa: E402


def init(key, sizes):
    """A two-layer perceptron's weights and biases."""
    params = []
    for n_in, n_out in zip(sizes, sizes[1:]):
        key, sub = jax.random.split(key)
        params.append((jax.random.normal(sub, (n_in, n_out)) / jnp.sqrt(n_in), jnp.zeros(n_out)))
    return params


def loss(params, x, y):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return jnp.mean((x @ w + b - y) ** 2)


# The host span `train_step` around each dispatch and its device time on the track `cpu:0`.
@waffle.jax.timed
@jax.jit
def train_step(params, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    return [(w - 0.05 * gw, b - 0.05 * gb) for (w, b), (gw, gb) in zip(params, grads)], value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("."), help="directory for the outputs")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    trace = args.out / "jax-steps.bin"
    waffle.start(trace, process_name="jax-steps")
    waffle.set_exporter(waffle.PerfettoExporter(args.out / "jax-steps.pftrace"))
    waffle.jax.install()  # compile phases as spans

    with waffle.span("train", steps=args.steps):
        kx, ky, kp = jax.random.split(jax.random.PRNGKey(0), 3)
        x = jax.random.normal(kx, (256, 32))
        y = jnp.sin(x[:, :1]) + 0.1 * jax.random.normal(ky, (256, 1))
        params = init(kp, [32, 64, 1])
        # jax.profiler.trace, merged into the trace when the block ends.
        with waffle.jax.profile(args.out / "profile") as merged:
            for i in range(args.steps):
                with waffle.jax.step(i):
                    params, value = train_step(params, x, y)
                    value = float(value)  # waits for the step's result inside the step
                waffle.event("loss", step=i, value=value)
    waffle.shutdown()
    print(f"{args.steps} steps, last loss {value:.4f}; merged {sum(merged.values())} XLA ops")
    print(outline(trace))


def outline(path: Path) -> str:
    """The trace, step by step: durations of the step span, its dispatch span, its device slice
    and the XLA ops within the step (read with the decoder's plain-dict view)."""
    from waffle._native import decode

    (process,) = decode([str(path)])["processes"]
    items = [x for t in process["threads"] for x in t["spans"] + t["events"]]
    # A device track's slices are the spans of the thread `thread` names, on the host's time.
    slices = [
        (track["name"], x["name"], x["start_ns"], x["end_ns"], x)
        for track in process["tracks"]
        for x in process["threads"][track["thread"]]["spans"]
    ]
    tracks = {track["name"] for track in process["tracks"]}
    us = lambda ns: f"{ns / 1e3:,.0f} us"  # noqa: E731
    lines = [f"tracks: {', '.join(sorted(tracks))}"]
    for s in sorted((x for x in items if x["name"] == "step"), key=lambda x: x["start_ns"]):
        dispatch = next(x for x in items if x["parent"] == s["id"] and x["name"] == "train_step" and "track" not in x["fields"])
        lines.append(f"step {s['fields']['step']}: {us(s['end_ns'] - s['start_ns'])}")
        lines.append(f"  train_step   host span (dispatch)         {us(dispatch['end_ns'] - dispatch['start_ns'])}")
        for track, name, begin, end, x in slices:
            if x["links"][:1] != [dispatch["id"]]:
                continue
            lines.append(f"  {track:<12} slice (dispatch to ready)    {us(end - begin)}")
        # The step waits for its result, so its ops lie inside it.
        ops = [(o[3] - o[2], o[1]) for o in slices if " / " in o[0] and s["start_ns"] <= o[2] <= o[3] <= s["end_ns"]]
        ops.sort(reverse=True)
        longest = ", ".join(f"{n} {us(d)}" for d, n in ops[:3])
        lines.append(f"  XLA ops      {len(ops)} from the profile, {us(sum(d for d, _ in ops))}: {longest}, ...")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
