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
- `device_queue.bin`: its device track is the `/device:GPU:0` plane's `GPU 0` line.

xprof writes a cache of what it computed beside the file it reads, so each file is read in a
directory of its own, with `use_saved_result` off. Environment: `WAFFLE_BIN_DIR` (default
`<repo>/target/debug`).
"""

import json

import pytest

from xprof.convert import raw_to_tool_data
from waffle_bins import REPO, BIN_DIR, binary, run

HOST_PID = None  # xprof's pid for the host plane, read from its process_name metadata


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


def test_device_tracks_are_device_planes(tmp_path):
    """`device_queue`'s GPU 0 track: xprof's trace viewer shows a `/device:GPU:0` process with a
    `GPU 0` line holding the 60 kernels, beside the host's threads."""
    trace_bin = tmp_path / "device_queue.bin"
    run(binary("examples", "device_queue"), trace_bin)
    out = tmp_path / "xplane"
    out.mkdir()
    run(binary("waffle-decode"), trace_bin, "-o", out / "dq.xplane.pb")
    events = tool(out / "dq.xplane.pb", "trace_viewer")["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    [gpu] = [pid for pid, name in processes.items() if name == "/device:GPU:0"]
    lines = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name" and e["pid"] == gpu}
    assert list(lines.values()) == ["GPU 0"]
    kernels = [e["name"] for e in events if e.get("ph") == "X" and e["pid"] == gpu]
    assert len(kernels) == 60 and kernels[:3] == ["gemm", "softmax", "allreduce"]
