"""The XSpace exporter (`.xplane.pb`), read by TensorBoard's profile plugin itself.

PyPI `xprof` converts an XSpace offline (`xprof.convert.raw_to_tool_data.xspace_to_tool_data`)
into the data its tools show: the trace viewer's events and the Overview page's step times.
This runs the `profile_steps` example, exports its files, and reads back what xprof makes of
them:
- `loop.bin` with `--step-span iteration`: five steps, named `iteration 0` to `iteration 4` by
  xprof's step grouping, each step's time the `iteration` span's duration; without the option
  there are no steps;
- `batches.bin` to a directory: the file lands at `plugins/profile/<run>/<host>.xplane.pb`, and
  its `batch` spans (a `step` field, 10 to 13) are steps numbered by that field; the loader
  thread is a line of its own;
- `device_queue.bin` (host spans launching kernels on the `GPU 0` track, 20 steps): its track is
  the `/device:GPU:0` plane's `GPU 0` line, and the Overview page has its steps;
- the `gpu_profile` example's files, a JAX run's shape (`step` markers, kernels named like XLA
  fusions on `gpu:0 / Stream #14` and `#15` as a merged `jax.profiler` profile has them, no
  launcher): `merged.bin`, each step's kernels inside it, and `timed.bin`, the host running
  ahead of the GPU with each call timed on the `gpu:0` track: the Overview page has the steps.

With a GPU plane, xprof takes the steps from the device alone: each kernel in the step of the
host event whose `correlation_id` it carries, a step's time the span of its device events. The
tests check that every kernel lands in the step it ran for and each step's time is its kernels'
span (or, timed, its call's). xprof 2.24.2 leaves out the first and the last step of more than
five as possibly incomplete (`step_events_to_steps_db.cc`), so 20 steps show as 18.

xprof writes a cache of what it computed beside the file it reads, so each file is read in a
directory of its own, with `use_saved_result` off. Environment: `WAFFLE_BIN_DIR` (default
`<repo>/target/debug`).
"""

import json

import pytest

from xprof.convert import raw_to_tool_data
from waffle_bins import REPO, BIN_DIR, binary, run

HOST_PID = None  # xprof's pid for the host plane, read from its process_name metadata


def shown(steps):
    """The step numbers (group ids, from 0) the Overview page shows of `steps` device steps."""
    return [str(n) for n in (range(1, steps - 1) if steps > 5 else range(steps))]


def tool(path, name):
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], name, {"use_saved_result": False})
    assert data, f"xprof made no {name} of {path}"
    return json.loads(data.decode() if isinstance(data, bytes) else data)


class Profile:
    """What xprof shows of one file: trace viewer slices, thread names, and the steps."""

    def __init__(self, path):
        trace = tool(path, "trace_viewer")
        events = trace["traceEvents"]
        [host] = [e for e in events if e.get("name") == "process_name" and e["args"]["name"] == "/host:CPU"]
        self.threads = {e["tid"]: e["args"]["name"] for e in events
                        if e.get("name") == "thread_name" and e["pid"] == host["pid"]}
        self.slices = [e for e in events if e.get("ph") == "X" and e["pid"] == host["pid"]]
        overview = tool(path, "overview_page")
        [steps] = [t for t in overview if "steptime_ms_average" in t.get("p", {})]
        self.average_ms = float(steps["p"]["steptime_ms_average"])
        columns = [c["id"] for c in steps["cols"]]
        self.steps = [{col: cell.get("v") for col, cell in zip(columns, row["c"])} for row in steps["rows"]]

    def named(self, prefix):
        return [s for s in self.slices if s["name"].startswith(prefix)]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("xspace")
    run(binary("examples", "profile_steps"), tmp)
    return tmp


def export(recorded, tmp, name, *args):
    out = tmp / name
    out.mkdir()
    run(binary("waffle-decode"), *args, "-o", out / f"{name}.xplane.pb")
    return out / f"{name}.xplane.pb"


def test_named_step_spans_give_the_overview_its_step_times(recorded, tmp_path):
    profile = Profile(export(recorded, tmp_path, "loop", recorded / "loop.bin", "--step-span", "iteration"))
    iterations = profile.named("iteration")
    assert sorted(s["name"] for s in iterations) == [f"iteration {i}" for i in range(5)], \
        "xprof grouped each iteration as a step and named it by step_num"
    assert len(profile.named("compute")) == 5
    for s in profile.named("compute"):
        assert s["args"]["waffle.parent"], "causal fields are stats, shown as args"
        assert s["args"]["i"] in {str(i) for i in range(5)}
    assert [s["stepnum"] for s in profile.steps] == [f"iteration {i}" for i in range(5)]
    by_name = {s["name"]: s["dur"] / 1000 for s in iterations}  # µs -> ms
    for step in profile.steps:
        assert step["stepTimeMs"] == pytest.approx(by_name[step["stepnum"]], abs=1e-3), step
        assert step["hostComputeTimeMs"] > 2.5, "the compute span (3 ms) is host compute in its step"
    mean = sum(by_name.values()) / len(by_name)
    assert 3.0 <= mean < 50
    assert profile.average_ms == pytest.approx(mean, abs=0.051), "the average shown with one decimal"


def test_without_step_spans_there_are_no_steps(recorded, tmp_path):
    profile = Profile(export(recorded, tmp_path, "nosteps", recorded / "loop.bin"))
    assert profile.steps == [] and profile.average_ms == 0.0
    assert sorted(s["name"] for s in profile.named("iteration")) == ["iteration"] * 5


def test_a_directory_gets_the_profile_layout_and_step_fields_number_steps(recorded, tmp_path):
    logdir = tmp_path / "logdir"
    said = run(binary("waffle-decode"), recorded / "batches.bin", "--run", "run1", "-o", f"{logdir}/").stderr
    [path] = list((logdir / "plugins" / "profile" / "run1").glob("*.xplane.pb"))
    assert str(path) in said
    profile = Profile(path)
    assert [s["stepnum"] for s in profile.steps] == [f"batch {n}" for n in range(10, 14)]
    assert all(1.5 < s["stepTimeMs"] < 50 for s in profile.steps)
    assert sorted(profile.threads.values()) == ["loader", "main"]
    [loader] = [tid for tid, name in profile.threads.items() if name == "loader"]
    prefetch = profile.named("prefetch")
    assert len(prefetch) == 4 and all(s["tid"] == loader for s in prefetch)
    assert all(s["args"]["step"] in {"10", "11", "12", "13"} for s in profile.named("batch"))


class Planes:
    """The trace viewer's processes (planes) by name: each a dict of its lines' names to their
    complete events (`ph` X), in time order."""

    def __init__(self, path):
        events = tool(path, "trace_viewer")["traceEvents"]
        names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
        lines = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
        self.planes = {name: {} for name in names.values()}
        for e in sorted((e for e in events if e.get("ph") == "X"), key=lambda e: e["ts"]):
            self.planes[names[e["pid"]]].setdefault(lines[(e["pid"], e["tid"])], []).append(e)

    def host(self, prefix):
        return [e for line in self.planes["/host:CPU"].values() for e in line if e["name"].startswith(prefix)]


def device_steps(path, by_step):
    """Checks the Overview page of `path` against its device events, `by_step[n]` those that
    ran for step `n` (trace viewer events): each in the group of its host step, each step shown
    (all, but as `shown` says) and its time the span of its events. Returns the steps' group
    ids by step number."""
    planes, profile = Planes(path), Profile(path)
    group = {int(s["args"]["step"]): s["args"]["group_id"] for s in planes.host("step ")}
    assert sorted(group) == list(range(len(by_step))), "xprof grouped every step marker"
    for n, events in enumerate(by_step):
        for e in events:
            assert e["args"].get("group_id") == group[n], f"a device event in step {n}, the step it ran for: {e}"
    assert [s["stepnum"] for s in profile.steps] == shown(len(by_step))
    for step in profile.steps:
        [n] = [n for n, g in group.items() if g == step["stepnum"]]
        mine = by_step[n]
        span = (max(e["ts"] + e["dur"] for e in mine) - min(e["ts"] for e in mine)) / 1000  # µs -> ms
        assert step["stepTimeMs"] == pytest.approx(span, abs=1e-3), step
        assert step["deviceComputeTimeMs"] > 0
    assert profile.average_ms > 0
    assert profile.average_ms == pytest.approx(
        sum(s["stepTimeMs"] for s in profile.steps) / len(profile.steps), abs=0.051)
    return group


def threes(events):
    """`events` three at a time: a step's kernels, run in order."""
    return [events[i:i + 3] for i in range(0, len(events), 3)]


def test_device_queue_has_its_device_lines_and_steps(tmp_path):
    """`device_queue`: the trace viewer shows a `/device:GPU:0` process with the `GPU 0` line
    holding the 60 kernels (and xprof's own `Steps` line), beside the host's threads; each
    kernel and its `launch` span carry one `correlation_id`, and the Overview page has the
    steps, each the span of its three kernels."""
    trace_bin = tmp_path / "device_queue.bin"
    run(binary("examples", "device_queue"), trace_bin)
    out = tmp_path / "xplane"
    out.mkdir()
    run(binary("waffle-decode"), trace_bin, "-o", out / "dq.xplane.pb")
    planes = Planes(out / "dq.xplane.pb").planes
    assert sorted(planes["/device:GPU:0"]) == ["GPU 0", "Steps"], "our line, and the steps xprof drew"
    kernels = planes["/device:GPU:0"]["GPU 0"]
    assert [k["name"] for k in kernels[:3]] == ["gemm", "softmax", "allreduce"]
    assert len(kernels) == 60
    device_steps(out / "dq.xplane.pb", threes(kernels))
    launches = {s["args"]["correlation_id"]: s for s in Planes(out / "dq.xplane.pb").host("launch")}
    assert len(launches) == 60
    for k in kernels:
        launch = launches[k["args"]["correlation_id"]]
        assert launch["args"]["waffle.id"] == k["args"]["waffle.caused_by"], "tied to its own launch"
        assert launch["args"]["group_id"] == k["args"]["group_id"]


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu")
    run(binary("examples", "gpu_profile"), tmp, 8)
    return tmp


def stream_kernels(planes):
    streams = {name: line for name, line in planes["/device:GPU:0"].items() if name.startswith("gpu:0 / Stream")}
    assert sorted(streams) == ["gpu:0 / Stream #14", "gpu:0 / Stream #15"], "the merged streams' lines"
    assert {k["name"] for k in streams["gpu:0 / Stream #15"]} == {"input_reduce_fusion"}
    return sorted((k for line in streams.values() for k in line), key=lambda k: k["ts"])


def test_a_merged_profile_steps_its_kernels_by_their_step(gpu_run, tmp_path):
    """`merged.bin`: kernels with no launcher, each inside its step: each joins its step."""
    path = export(gpu_run, tmp_path, "merged", gpu_run / "merged.bin")
    planes = Planes(path)
    kernels = stream_kernels(planes.planes)
    assert len(kernels) == 24
    steps = {int(s["args"]["step"]): s for s in planes.host("step ")}
    for i, k in enumerate(kernels):
        step = steps[i // 3]
        assert step["ts"] <= k["ts"] < step["ts"] + step["dur"], "each kernel ran inside its step"
        assert k["args"]["correlation_id"] == step["args"]["correlation_id"]
        assert k["args"]["field.correlation_id"], "the profiler's own id, kept under another name"
        assert k["args"]["hlo_op"] in {"dot.3", "add.7", "reduce.2"}
    device_steps(path, threes(kernels))


def test_timed_calls_step_the_kernels_that_ran_after_their_step(gpu_run, tmp_path):
    """`timed.bin`: the host dispatched every step before the GPU ran any, so each kernel ran
    after its step had ended; each joins its step through the timed call's slice it ran in,
    and a step's time is its call's."""
    path = export(gpu_run, tmp_path, "timed", gpu_run / "timed.bin")
    planes = Planes(path)
    kernels = stream_kernels(planes.planes)
    calls = planes.planes["/device:GPU:0"]["gpu:0"]
    assert len(kernels) == 24
    steps = {int(s["args"]["step"]): s for s in planes.host("step ")}
    dispatches = planes.host("train_step")
    assert len(calls) == len(dispatches) == 8
    for n, (call, dispatch) in enumerate(zip(calls, dispatches)):
        assert call["args"]["correlation_id"] == dispatch["args"]["correlation_id"]
        mine = kernels[3 * n:3 * n + 3]
        assert all(k["ts"] >= steps[n]["ts"] + steps[n]["dur"] for k in mine), "the host ran ahead"
        assert all(call["ts"] <= k["ts"] < call["ts"] + call["dur"] for k in mine)
        assert all(k["args"]["correlation_id"] == call["args"]["correlation_id"] for k in mine)
    # A step's device events: its call and the kernels in it, whose span is the call's.
    device_steps(path, [[call] + mine for call, mine in zip(calls, threes(kernels))])
