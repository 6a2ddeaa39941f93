"""One run, every format, one story: each example's files and a real MPI program's, exported to
every format by `waffle-decode`, read back by each format's own consumer's rules and compared,
every pair of formats (`story.check_formats_agree`; what is compared, and what a format cannot
carry, is in `story.py`).

- The examples the other consumer tests run: two processes with a link, a correlation, a
  context entered on another thread and an async span (`causal_pair`); ranks with correlated
  collectives and a cause across them (`nan_allreduce`); a thread pool (`dispatch`); a device
  track (`device_queue`), whose definition and syncs must show in no format as a span or an
  event; threads (`heat`, `skeleton`); steps (`profile_steps`, `diff_model`).
- `ffi/mpi/tests/programs/ring.c` under `mpirun -np 3` with `libwaffle_mpi.so` preloaded: sends
  and receives, nonblocking ones completed by `MPI_Waitall`, a broadcast, an allreduce and
  wildcard receives. Needs Open MPI (`mpicc`, `mpirun`): skipped without it, unless
  `WAFFLE_REQUIRE_MPI` is set (as `scripts/test.sh` sets it), then it fails.

Environment: `WAFFLE_BIN_DIR` (default `<repo>/target/debug`) holds `waffle-decode`,
`examples/` and `libwaffle_mpi.so` (`cargo build --workspace --examples --bins`).
"""

import json
import os
import shutil
import subprocess
from collections import Counter

import pytest

import story
from waffle_bins import REPO, binary, run

# Example -> (its arguments, with {dir} its output directory; the traces it writes there, each
# one or several files).
EXAMPLES = {
    "causal_pair": (["{dir}"], [["a.bin", "b.bin"]]),
    "nan_allreduce": (["{dir}"], [["rank0.bin", "rank1.bin"]]),
    "dispatch": (["{dir}/trace.bin"], [["trace.bin"]]),
    "device_queue": (["{dir}/trace.bin"], [["trace.bin"]]),
    "heat": (["{dir}/trace.bin"], [["trace.bin"]]),
    "skeleton": (["{dir}/trace.bin"], [["trace.bin"]]),
    "profile_steps": (["{dir}"], [["loop.bin"], ["batches.bin"]]),
    "diff_model": (["{dir}/trace.bin"], [["trace.bin"]]),
}
# Examples whose runs hold causes, so that each format must show cause->effect pairs.
CAUSAL = {"causal_pair", "nan_allreduce", "device_queue"}
# `mpirun` flags that work in a container as root (as the Rust MPI tests run it).
MPIRUN_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader",
                "--mca", "btl_vader_single_copy_mechanism", "none", "--mca", "plm_rsh_agent", ""]


def recorded(example, tmp_path):
    """The example's traces, each as its list of files."""
    args, traces = EXAMPLES[example]
    run(binary("examples", example), *[a.format(dir=tmp_path) for a in args])
    return [[tmp_path / f for f in files] for files in traces]


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_every_format_tells_the_examples_story(example, tmp_path):
    for n, files in enumerate(recorded(example, tmp_path)):
        stories = story.check_formats_agree(files, tmp_path / f"out{n}")
        for s in stories.values():
            assert s.spans(), f"{s.format}: no spans read"
            assert s.pairs or example not in CAUSAL, f"{s.format}: no cause->effect pairs read"


def test_no_format_shows_a_device_tracks_definition_or_syncs(tmp_path):
    """`device_queue`'s track `GPU 0` is defined by an event `track` and placed by events
    `track.sync`: records of the file that place the slices, which every format shows, each
    after its launch; never spans or events of their own."""
    [files] = recorded("device_queue", tmp_path)
    stories = story.check_formats_agree(files, tmp_path / "out")
    for s in stories.values():
        names = Counter(i.name for i in s.items.values())
        assert not {"track", "track.sync"} & set(names), f"{s.format} shows {names}"
        slices = [i for i in s.spans() if i.thread == "GPU 0"]
        assert len(slices) == 60, f"{s.format}: {len(slices)} slices on GPU 0"
        launched = {s.lift(e) for e, c, _ in s.pairs if s.items[s.lift(c)].name == "launch"}
        assert {i.key for i in slices} <= launched, f"{s.format}: a slice without its launch"


def mpi_tools():
    """`mpicc` and `mpirun`; skips (or fails, with `WAFFLE_REQUIRE_MPI`) without them."""
    tools = shutil.which("mpicc"), shutil.which("mpirun")
    if None in tools:
        if os.environ.get("WAFFLE_REQUIRE_MPI") or os.environ.get("CI") == "true":
            pytest.fail("Open MPI (mpicc, mpirun) is missing and WAFFLE_REQUIRE_MPI is set: "
                        "apt-get install openmpi-bin libopenmpi-dev")
        pytest.skip("Open MPI (mpicc, mpirun) is not installed; WAFFLE_REQUIRE_MPI makes this a failure")
    return tools


@pytest.fixture(scope="module")
def ring(tmp_path_factory):
    """ring.c's three rank files, recorded by the preloaded library."""
    mpicc, mpirun = mpi_tools()
    library = binary("libwaffle_mpi.so")
    tmp = tmp_path_factory.mktemp("ring")
    run(mpicc, REPO / "ffi" / "mpi" / "tests" / "programs" / "ring.c", "-o", tmp / "ring")
    # Nothing of an enclosing launcher or session may leak into the ranks.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WAFFLE_", "OMPI_COMM_WORLD", "PMI", "PMIX", "SLURM"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               WAFFLE_OUTPUT=str(tmp / "out" / "rank%r.bin"))
    proc = subprocess.run([mpirun, "-np", "3", *MPIRUN_FLAGS, "-x", "WAFFLE_OUTPUT", "-x",
                           f"LD_PRELOAD={library}", tmp / "ring"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", f"{proc.stdout}\n{proc.stderr}"
    assert "waffle:" not in proc.stderr, proc.stderr
    return [tmp / "out" / f"rank{r}.bin" for r in range(3)]


def test_every_format_tells_the_mpi_rings_story(ring, tmp_path):
    stories = story.check_formats_agree(ring, tmp_path)
    # ring.c's docs: 6 messages around the ring, 6 by Isend/Irecv, 2 to wildcard receives; a
    # broadcast and an allreduce over 3 ranks, each member after the first to the first.
    kinds = Counter(kind for *_, kind in stories["otlp"].pairs)
    assert kinds == {"message": 14, "correlated": 4}, kinds
    # Every message is a FOLLOWS_FROM reference in Jaeger, which its UI shows, none only a tag:
    # each receive posted before its send hangs under the send.
    trace = json.loads((tmp_path / "trace.jaeger.json").read_text())["data"][0]
    for s in trace["spans"]:
        if s["operationName"] in ("MPI_Recv", "MPI_Waitall"):
            follows = [r for r in s["references"] if r["refType"] == "FOLLOWS_FROM"]
            assert follows, f"{s['operationName']} {s['spanID']}: no reference"
        assert all(t["key"] != "waffle.follows_from" for t in s["tags"]), s
