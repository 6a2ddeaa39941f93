"""A distributed JAX matmul on a 2-device mesh against a local CPU matmul, traced with waffle.

Runs on CPU-only JAX: the two "devices" are host devices that XLA simulates
(``XLA_FLAGS=--xla_force_host_platform_device_count=2``, set below if unset). Writes a Jaeger
trace (load it with the Jaeger UI's *Upload JSON*) and a Perfetto trace::

    pip install -r python/requirements-jax.txt
    python python/examples/jax_matmul.py --out /tmp/jax-run          # 512 x 256 x 256
    python python/examples/jax_matmul.py --size 8192 4096 4096         # the full-size run

The trace: ``matmul_comparison_experiment`` holding ``distributed_gpu_execution`` (the jitted
``distributed_matmul``, whose span records ``A.shape``/``A.dtype`` of the tracers JAX passes
while it traces, and JAX's compile phases from ``waffle.jax``) and ``local_cpu_execution``
(``cpu_matmul`` with its data transfer and matmul spans).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

import waffle  # noqa: E402
import waffle.jax  # noqa: E402


# The span is named after the function; its arguments (arrays) become shape/dtype fields.
@waffle.instrument
def distributed_matmul(A, B):
    return jnp.matmul(A, B)


@waffle.instrument
def cpu_matmul(A, B):
    cpu_device = jax.devices("cpu")[0]
    with waffle.span("data_transfer_to_cpu"):
        A_cpu = jax.device_put(A, cpu_device)
        B_cpu = jax.device_put(B, cpu_device)

    with waffle.span("jnp.matmul_on_cpu"):
        return jnp.matmul(A_cpu, B_cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", nargs=3, type=int, default=[512, 256, 256], metavar=("M", "K", "N"))
    parser.add_argument("--out", type=Path, default=Path("."), help="directory for the traces")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    # Jaeger for the causal tree, Perfetto for the timeline.
    waffle.set_exporter(
        waffle.JaegerExporter(
            service_name="jax-matmul-comparison", path=args.out / "jax-matmul.jaeger.json"
        ),
        waffle.PerfettoExporter(args.out / "jax-matmul.pftrace"),
    )
    waffle.jax.install()  # JAX's compile phases as spans

    with waffle.span("matmul_comparison_experiment"):
        # 1. A simulated distributed mesh: two devices, split along 'data'.
        devices = jax.devices()
        if len(devices) < 2:
            raise SystemExit("needs 2 devices: set XLA_FLAGS=--xla_force_host_platform_device_count=2")
        mesh = Mesh(np.array(devices[:2]).reshape(2, 1), axis_names=("data", "model"))
        sharding_A = NamedSharding(mesh, PartitionSpec("data", None))
        sharding_B = NamedSharding(mesh, PartitionSpec(None, "model"))

        # 2. Data.
        M, K, N = args.size
        with waffle.span("create_data", M=M, K=K, N=N):
            key_a, key_b = jax.random.split(jax.random.PRNGKey(0))
            A = jax.random.normal(key_a, (M, K))
            B = jax.random.normal(key_b, (K, N))

        # 3. The distributed execution (compiled, then run on the mesh).
        with waffle.span("distributed_gpu_execution", devices=len(mesh.devices.flat)):
            dist_fn = jax.jit(
                distributed_matmul, out_shardings=NamedSharding(mesh, PartitionSpec("data", "model"))
            )
            result_dist = dist_fn(jax.device_put(A, sharding_A), jax.device_put(B, sharding_B))
            result_dist.block_until_ready()

        # 4. The local CPU execution.
        with waffle.span("local_cpu_execution"):
            result_cpu = cpu_matmul(A, B)
            result_cpu.block_until_ready()

        with waffle.span("compare_results"):
            max_err = float(np.max(np.abs(np.asarray(result_dist) - np.asarray(result_cpu))))
        waffle.event("results_compared", max_abs_error=max_err, ok=max_err < 1e-2)

    written = waffle.shutdown()  # also happens at exit; here to print where the traces went
    print(f"Experiment complete (max |dist - cpu| = {max_err:.2e}). Traces: {', '.join(written)}")


if __name__ == "__main__":
    main()
