"""Why a real run is slow: `waffle-decode waits`, `critical-path` and `profile` on the real MPI
programs of `real_programs.py` (LAMMPS, NetPIPE, HPCC, mpi4py), read back by independent
consumers.

- `profile --json`: per rank and span name, as many spans as the OTLP export of the same files
  holds (read with OpenTelemetry's classes, `test_real_programs.decoded`), self time within
  total time; the message matrix counts each receive event of the export once, with its bytes.
- `waits --json`: every rank listed, every wait of a known kind in an MPI call, and every
  nanosecond of waiting charged once to a root cause.
- `critical-path --json`: segments that follow each other without gap or overlap and sum to
  the length, which is the run's (its first span's begin to its last span's end).
- `-o run.pftrace --waits` (LAMMPS on 4 ranks): the trace, the waits tracks under each rank's
  process track, the flows from the causes to the waits and the critical path track, read by
  the import rules of trace_processor that `test_perfetto.py` states.
- `profile --html` (LAMMPS on 4 ranks) loaded in headless Chromium, which runs its inline
  script: a bar per rank and a cell per pair of ranks, their numbers those of the JSON.

Environment: as `test_real_programs.py`; Chromium as `test_diff.py`.
"""

import json
import subprocess
from collections import Counter
from html.parser import HTMLParser

import pytest

import test_perfetto
from real_programs import PROGRAMS
from test_diff import chromium
from test_real_programs import attrs, decoded
from waffle_bins import binary, run

KINDS = {"late_sender", "late_receiver", "wait_at_nxn", "wait_at_barrier", "late_broadcast_root", "early_reduce",
         "linked_wait"}


def analysed(command, files, *args):
    return json.loads(run(binary("waffle-decode"), command, *files, "--json", *args).stdout)


@pytest.mark.parametrize("name", PROGRAMS)
def test_profile_counts_agree_with_the_exported_spans(real_runs, name):
    files = real_runs.traced(name)
    profile = analysed("profile", files)
    trace = decoded(real_runs, name)
    exported = Counter((rank, s.name) for rank, s in trace.spans.values() if not attrs(s).get("waffle.event"))
    counted = {(r["rank"], r["name"]): r["count"] for r in profile["rows"]}
    assert counted == dict(exported)
    for r in profile["rows"]:
        assert 0 <= r["self_ns"] <= r["total_ns"], r
    assert [r["rank"] for r in profile["ranks"]] == list(range(len(files)))
    for r in profile["ranks"]:
        assert 0 < r["mpi_ns"] <= r["wall_ns"] * r["threads"], r
    events = [e for r in trace.ranks.values() for _, e in r.received]
    matrix = profile["messages"]
    assert sum(map(sum, matrix["count"])) == len(events)
    assert sum(map(sum, matrix["bytes"])) == sum(attrs(e)["bytes"] for e in events)


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_nanosecond_of_waiting_is_charged_once_and_the_path_is_the_run(real_runs, name):
    files = real_runs.traced(name)
    waits = analysed("waits", files)
    assert [r["rank"] for r in waits["per_rank"]] == list(range(len(files)))
    assert waits["total_wait_ns"] == sum(w["wait_ns"] for w in waits["waits"]) > 0
    assert sum(c["caused_wait_ns"] for c in waits["root_causes"]) == waits["total_wait_ns"]
    for w in waits["waits"]:
        assert w["kind"] in KINDS and w["call"].startswith("MPI_") and w["wait_ns"] > 0, w
    path = analysed("critical-path", files)
    segments = path["segments"]
    assert segments and sum(s["dur_ns"] for s in segments) == path["length_ns"]
    for a, b in zip(segments, segments[1:]):
        assert a["start_ns"] + a["dur_ns"] == b["start_ns"], (a, b)
    assert (segments[0]["start_ns"], path["end_ns"]) == (path["start_ns"], path["start_ns"] + path["length_ns"])
    profile = analysed("profile", files)
    assert path["length_ns"] >= max(r["wall_ns"] for r in profile["ranks"])


def test_the_waits_and_the_path_lie_over_the_perfetto_trace(real_runs, tmp_path):
    files = real_runs.traced("lammps-4")
    out = tmp_path / "run.pftrace"
    run(binary("waffle-decode"), *files, "-o", out, "--waits")
    tracks, flowing = test_perfetto.parse(out.read_bytes())
    arrows = test_perfetto.flow_arrows(flowing)
    processes = {u: t for u, t in tracks.items() if t.descriptor.HasField("process")}
    waits = [t for t in tracks.values() if t.descriptor.name.startswith("waits")]
    under = sorted(processes[t.descriptor.parent_uuid].descriptor.name for t in waits)
    assert [n.split(" (")[0] for n in under] == ["rank 0", "rank 1", "rank 2", "rank 3"], under
    report = analysed("waits", files)
    kinds = Counter(s.name for t in waits for s in t.slices if not s.name.startswith("cause: "))
    assert kinds == Counter(w["kind"] for w in report["waits"])
    caused = [(a, b) for a, b in arrows if a.name.startswith("cause: ")]
    assert caused and all(b.name.endswith(" ends") for _, b in caused), caused[:5]
    assert {a.name for a, _ in caused} <= {f"cause: {c['span']}" for c in report["root_causes"]}
    [path] = [t for t in tracks.values() if t.descriptor.name == "critical path"]
    expected = analysed("critical-path", files)
    assert sum(s.end - s.ts for s in path.slices) == expected["length_ns"]
    assert len(path.slices) == len(expected["segments"])


class Page(HTMLParser):
    """The profile page as Chromium drew it: its rank bars and matrix cells."""

    def __init__(self):
        super().__init__()
        self.ranks, self.cells = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "g" and a.get("class") == "rank":
            self.ranks.append(int(a["data-rank"]))
        elif tag == "rect" and a.get("class") == "cell":
            self.cells.append({k: int(a[f"data-{k}"]) for k in ("from", "to", "count", "bytes")})


def test_chromium_draws_the_profile_page(real_runs, tmp_path):
    files = real_runs.traced("lammps-4")
    page = tmp_path / "profile.html"
    run(binary("waffle-decode"), "profile", *files, "--html", page)
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    drawn = Page()
    drawn.feed(proc.stdout)
    assert drawn.ranks == [0, 1, 2, 3]
    profile = analysed("profile", files)
    m = profile["messages"]
    assert len(drawn.cells) == 16
    for c in drawn.cells:
        i, j = m["ranks"].index(c["from"]), m["ranks"].index(c["to"])
        assert (c["count"], c["bytes"]) == (m["count"][i][j], m["bytes"][i][j]), c
    assert sum(c["count"] for c in drawn.cells) > 0
