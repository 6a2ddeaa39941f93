"""``WAFFLE_OUTPUT=PATH python app.py``: a program that never calls ``waffle.start`` records from
``import waffle`` on (the native module starts the session when it is loaded), exporters read
that session's file and keep it, an explicit ``waffle.start`` replaces it, and a bad value is
one line on stderr. Each case runs a fresh interpreter, since the session starts at import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import Decoded, consumer_module
from waffle import _native

# Variables that would change what the child records.
CLEARED = (
    "WAFFLE_OUTPUT", "WAFFLE_EXPORT", "WAFFLE_RANK", "WAFFLE_TRACE_ID", "WAFFLE_TRACEPARENT",
    "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE", "SLURM_JOB_ID",
)

WORK = (
    "with waffle.span('py-auto', n=1):\n"
    "    waffle.event('inside', x=2.5)\n"
)


def run(code: str, output: str) -> tuple[int, subprocess.CompletedProcess]:
    """Runs ``code`` in a new interpreter with ``WAFFLE_OUTPUT=output``; returns the pid it
    printed first and the result."""
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["WAFFLE_OUTPUT"] = output
    code = "import os, waffle\nprint(os.getpid())\n" + code
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    return int(res.stdout.split()[0]), res


def decode(path: Path) -> Decoded:
    decoded = Decoded(_native.decode([str(path)]))
    assert decoded.warnings == []
    assert all(p["complete"] and p["dropped"] == 0 for p in decoded.doc["processes"])
    return decoded


def assert_work(d: Decoded) -> None:
    span = d.one("py-auto")
    assert span["fields"] == {"n": 1} and span["ended"]
    event = d.one("inside")
    assert event["fields"] == {"x": 2.5}
    assert d.parent_name(event) == "py-auto"


def test_import_records_with_only_waffle_output_set(tmp_path):
    code = WORK + "print(waffle.is_recording(), waffle._native.recording_path())\n"
    pid, res = run(code, str(tmp_path / "t-%p.bin"))
    path = tmp_path / f"t-{pid}.bin"
    assert res.stdout.split()[1:] == ["True", str(path)]
    assert res.stderr == ""
    assert sorted(os.listdir(tmp_path)) == [path.name]
    d = decode(path)
    assert [s["name"] for s in d.spans] == ["py-auto"] and len(d.events) == 1
    assert_work(d)
    (proc,) = d.doc["processes"]
    assert proc["pid"] == pid and int(proc["trace_id"], 16) != 0


def test_set_exporter_exports_the_automatic_file_and_keeps_it(tmp_path):
    out = tmp_path / "auto.pftrace"
    code = f"waffle.set_exporter(waffle.PerfettoExporter({str(out)!r}))\n" + WORK
    pid, res = run(code, str(tmp_path / "t-%p.bin"))
    assert res.stderr == ""
    path = tmp_path / f"t-{pid}.bin"
    assert sorted(os.listdir(tmp_path)) == sorted([path.name, out.name]), "the trace.bin is kept"
    assert_work(decode(path))
    perfetto = consumer_module("test_perfetto")
    tracks = perfetto.read(out.read_bytes())
    assert {"py-auto"} <= {s.name for t in tracks.values() for s in t.slices}


def test_an_explicit_start_replaces_the_automatic_session(tmp_path):
    explicit = tmp_path / "explicit.bin"
    code = f"assert waffle.start({str(explicit)!r}) == {str(explicit)!r}\n" + WORK
    code += "print(waffle._native.recording_path())\n"
    _, res = run(code, str(tmp_path / "t-%p.bin"))
    assert res.stdout.split()[1] == str(explicit)
    # The automatic session recorded nothing, so its file is gone.
    assert os.listdir(tmp_path) == [explicit.name]
    assert_work(decode(explicit))


def test_a_bad_value_is_one_line_and_nothing_records(tmp_path):
    value = str(tmp_path / "run-%q.bin")
    _, res = run(WORK + "print(waffle.is_recording())\n", value)
    assert res.stdout.split()[1] == "False"
    assert res.stderr == (
        f'waffle: WAFFLE_OUTPUT="{value}": unknown placeholder %q (use %r, %p, %h or %%); not recording\n'
    )
    assert os.listdir(tmp_path) == []
