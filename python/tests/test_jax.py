"""The JAX example (a distributed matmul on a simulated 2-device mesh against a CPU matmul) run
on CPU JAX, its Jaeger output checked by the Jaeger UI rules of `tests/consumers/test_jaeger.py`
and its Perfetto output by Perfetto's protobuf classes; and `waffle.jax`'s compile spans."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import consumer_module

pytest.importorskip("jax")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "jax_matmul.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("jax")
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    res = subprocess.run([sys.executable, str(EXAMPLE), "--out", str(out), "--size", "512", "256", "256"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "Experiment complete" in res.stdout
    return out


def test_jaeger_output_follows_the_ui_rules(run):
    jaeger = consumer_module("test_jaeger")
    trace = jaeger.check_trace(json.loads((run / "jax-matmul.jaeger.json").read_text()))
    assert [p["serviceName"] for p in trace["processes"].values()] == ["jax-matmul-comparison"]
    spans = trace["spans"]
    by_id = {s["spanID"]: s for s in spans}

    def parent(s):
        refs = [r for r in s["references"] if r["refType"] == "CHILD_OF"]
        return by_id[refs[0]["spanID"]]["operationName"] if refs else None

    def ancestors(s):
        out = []
        while True:
            refs = [r for r in s["references"] if r["refType"] == "CHILD_OF"]
            if not refs:
                return out
            s = by_id[refs[0]["spanID"]]
            out.append(s["operationName"])

    named = {}
    for s in spans:
        named.setdefault(s["operationName"], []).append(s)
    (root,) = named["matmul_comparison_experiment"]
    assert parent(root) is None
    for name in ("distributed_gpu_execution", "local_cpu_execution", "create_data"):
        assert [parent(s) for s in named[name]] == ["matmul_comparison_experiment"]
    (dist,) = named["distributed_matmul"]
    assert "distributed_gpu_execution" in ancestors(dist)
    want = {"A.shape": "(512, 256)", "A.dtype": "float32", "B.shape": "(256, 256)"}
    assert want.items() <= jaeger.tags(dist).items()
    (cpu,) = named["cpu_matmul"]
    assert parent(cpu) == "local_cpu_execution"
    assert sorted(parent(s) for s in named["data_transfer_to_cpu"] + named["jnp.matmul_on_cpu"]) == ["cpu_matmul"] * 2
    # waffle.jax: the jitted function's compile phases, inside the span that called it.
    compiles = [s for s in named["jax.backend_compile"] if jaeger.tags(s).get("fun_name") == "jit(distributed_matmul)"]
    assert len(compiles) == 1 and "distributed_gpu_execution" in ancestors(compiles[0])
    assert any(parent(s) == "distributed_gpu_execution" for s in named["jax.jaxpr_trace"])


def test_perfetto_output_imports(run):
    perfetto = consumer_module("test_perfetto")
    tracks = perfetto.read((run / "jax-matmul.pftrace").read_bytes())
    names = {s.name for t in tracks.values() for s in t.slices}
    assert {"matmul_comparison_experiment", "distributed_matmul", "cpu_matmul", "jax.backend_compile"} <= names
