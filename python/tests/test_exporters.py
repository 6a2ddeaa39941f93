"""Every exporter this build has, written from a Python trace and read back by the checks of
the repository's consumer tests (`tests/consumers/`): Perfetto's own protobuf classes, the Jaeger
UI's rules, OpenTelemetry's protos, the Chrome trace-event reader. An exporter whose format the
build lacks must say so with `NotImplementedError`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import waffle
from waffle import _native

from conftest import consumer_module

EXPORTERS = {
    "perfetto": lambda d: waffle.PerfettoExporter(d / "t.pftrace"),
    "jaeger": lambda d: waffle.JaegerExporter(service_name="py-svc", path=d / "t.jaeger.json"),
    "zipkin": lambda d: waffle.ZipkinExporter(service_name="py-svc", path=d / "t.zipkin.json"),
    "otlp": lambda d: waffle.OtlpExporter(service_name="py-svc", path=d / "t.otlp.json"),
    "chrome": lambda d: waffle.ChromeExporter(d / "t.chrome.json"),
}


def record_sample() -> None:
    """A small causal story: nested spans with fields, a cause and its effect, an async span."""
    cause = waffle.event("Input buffer contains NaN", rank=1)
    with waffle.span("experiment", run="a", lr=0.5):
        with waffle.span("allreduce", caused_by=cause, count=4):
            _native._test_rust_work(2)
        waffle.event("done", ok=True)

    async def task(i):
        with waffle.span("task", i=i):
            await asyncio.sleep(0.001)

    async def main():
        await asyncio.gather(task(0), task(1))

    asyncio.run(main())


def write(tmp_path: Path, kind: str) -> Path:
    exporter = EXPORTERS[kind](tmp_path)
    if exporter.format is None:
        with pytest.raises(NotImplementedError, match="cannot write"):
            waffle.set_exporter(exporter)
        pytest.skip(f"this build has no {kind} exporter")
    waffle.shutdown()
    waffle.set_exporter(exporter)  # starts a session with a temporary trace.bin
    assert waffle.is_recording()
    record_sample()
    assert waffle.shutdown() == [exporter.path]
    waffle.set_exporter()
    return Path(exporter.path)


def test_perfetto(tmp_path):
    out = write(tmp_path, "perfetto")
    perfetto = consumer_module("test_perfetto")
    tracks, flowing = perfetto.parse(out.read_bytes())
    slices = {s.name: s for t in tracks.values() for s in t.slices}
    for name in ("experiment", "allreduce", "rust_work", "rust_step", "task"):
        assert name in slices, sorted(slices)
    assert [c.name for c in slices["experiment"].children] == ["allreduce"]
    assert [c.name for c in slices["allreduce"].children] == ["rust_work"]
    assert slices["experiment"].args.get("run") == ("string_value", "a")
    # the causal link draws a flow arrow into "allreduce"
    assert any(s.name == "allreduce" for s in flowing)


def test_jaeger(tmp_path):
    out = write(tmp_path, "jaeger")
    jaeger = consumer_module("test_jaeger")
    trace = jaeger.check_trace(json.loads(out.read_text()))
    assert {p["serviceName"] for p in trace["processes"].values()} == {"py-svc"}
    spans = {s["operationName"]: s for s in trace["spans"]}
    refs = {r["refType"]: r["spanID"] for r in spans["allreduce"]["references"]}
    assert refs["CHILD_OF"] == spans["experiment"]["spanID"]
    assert "FOLLOWS_FROM" in refs  # the cause
    assert spans["rust_work"]["references"][0]["spanID"] == spans["allreduce"]["spanID"]
    assert jaeger.tags(spans["experiment"])["run"] == "a"


def test_zipkin(tmp_path):
    out = write(tmp_path, "zipkin")
    spans = json.loads(out.read_text())
    assert isinstance(spans, list) and spans
    by_name = {}
    for s in spans:
        assert {"traceId", "id", "name", "timestamp", "duration", "localEndpoint"} <= set(s), s
        assert s["localEndpoint"]["serviceName"] == "py-svc"
        by_name.setdefault(s["name"], s)
    assert by_name["allreduce"]["parentId"] == by_name["experiment"]["id"]
    assert by_name["rust_work"]["parentId"] == by_name["allreduce"]["id"]


def test_otlp(tmp_path):
    out = write(tmp_path, "otlp")
    otlp = consumer_module("test_otlp")
    spans = otlp.check_rules(otlp.parse_json(out.read_text()))
    by_name = {s.name: (res, s) for res, s in spans}
    res, allreduce = by_name["allreduce"]
    assert res["service.name"] == "py-svc"
    assert allreduce.parent_span_id == by_name["experiment"][1].span_id
    assert allreduce.links, "the cause is a native link"


def test_chrome(tmp_path):
    out = write(tmp_path, "chrome")
    chrome = consumer_module("test_chrome")
    trace = chrome.Chrome(json.loads(out.read_text()))
    names = {s.name for s in trace.slices}
    assert {"experiment", "allreduce", "rust_work", "task"} <= names


class Backend:
    """A local HTTP server standing in for Zipkin (`POST /api/v2/spans` → 202) and an OTLP/HTTP
    receiver (`POST /v1/traces` → 200, an empty `ExportTraceServiceResponse`)."""

    def __init__(self):
        import http.server
        import threading

        self.posts = []
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                backend.posts.append((self.path, self.headers["Content-Type"], body))
                self.send_response(202 if self.path == "/api/v2/spans" else 200)
                self.send_header("Content-Type", "application/json" if self.path == "/api/v2/spans" else "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def test_endpoints_send_to_a_running_backend(tmp_path):
    if not hasattr(_native, "send"):
        pytest.skip("this build cannot send")
    backend = Backend()
    try:
        waffle.shutdown()
        zipkin = waffle.ZipkinExporter(service_name="py-svc", endpoint=backend.url)
        otlp = waffle.OtlpExporter(service_name="py-svc", endpoint=backend.url, path=tmp_path / "t.otlp.json")
        assert zipkin.path is None
        waffle.set_exporter(zipkin, otlp)
        record_sample()
        assert waffle.shutdown() == [backend.url, str(tmp_path / "t.otlp.json"), backend.url]
        waffle.set_exporter()
    finally:
        backend.close()
    paths = [p for p, _, _ in backend.posts]
    assert paths == ["/api/v2/spans", "/v1/traces"]
    spans = json.loads(backend.posts[0][2])
    assert {"experiment", "allreduce", "rust_work"} <= {s["name"] for s in spans}
    assert {s["localEndpoint"]["serviceName"] for s in spans} == {"py-svc"}
    otlp_mod = consumer_module("test_otlp")
    req = otlp_mod.ExportTraceServiceRequest.FromString(backend.posts[1][2])
    names = {s.name for _, s in otlp_mod.check_rules(req)}
    assert {"experiment", "allreduce", "rust_work"} <= names


def test_service_name_renames_the_recorded_process(tmp_path):
    """``service_name`` names every process in every format, files and sends alike, over the
    name the process was recorded under; the files are streamed (``waffle_decode::export::Files``),
    not decoded into a model."""
    made = {
        "perfetto": waffle.PerfettoExporter(tmp_path / "r.pftrace", service_name="renamed"),
        "jaeger": waffle.JaegerExporter(service_name="renamed", path=tmp_path / "r.jaeger.json"),
        "zipkin": waffle.ZipkinExporter(service_name="renamed", path=tmp_path / "r.zipkin.json"),
        "otlp": waffle.OtlpExporter(service_name="renamed", path=tmp_path / "r.otlp.json"),
        "chrome": waffle.ChromeExporter(tmp_path / "r.chrome.json", service_name="renamed"),
    }
    files = {kind: e for kind, e in made.items() if e.format is not None}
    sending = hasattr(_native, "send")
    backend = Backend() if sending else None
    exporters = list(files.values())
    if backend is not None:
        exporters.append(waffle.ZipkinExporter(service_name="renamed", endpoint=backend.url))
        exporters.append(waffle.OtlpExporter(service_name="renamed", endpoint=backend.url))
    trace_bin = tmp_path / "trace.bin"
    try:
        waffle.shutdown()
        waffle.start(trace_bin, process_name="recorded")
        waffle.set_exporter(*exporters)
        record_sample()
        assert len(waffle.shutdown()) == len(exporters)
    finally:
        waffle.set_exporter()
        if backend is not None:
            backend.close()

    # Without service_name, the recorded name is the one written.
    if "jaeger" in files:
        plain = tmp_path / "plain.jaeger.json"
        assert _native.export([str(trace_bin)], str(plain)) == []
        processes = json.loads(plain.read_text())["data"][0]["processes"].values()
        assert {p["serviceName"] for p in processes} == {"recorded"}

    def read(kind):
        return Path(files[kind].path).read_bytes()

    names = {}
    if "perfetto" in files:
        tracks = consumer_module("test_perfetto").read(read("perfetto"))
        processes = [t.descriptor.process for t in tracks.values() if t.descriptor.HasField("process")]
        names["perfetto"] = {p.process_name for p in processes}
    if "jaeger" in files:
        trace = consumer_module("test_jaeger").check_trace(json.loads(read("jaeger")))
        names["jaeger"] = {p["serviceName"] for p in trace["processes"].values()}
    if "zipkin" in files:
        names["zipkin"] = {s["localEndpoint"]["serviceName"] for s in json.loads(read("zipkin"))}
    if "otlp" in files:
        otlp = consumer_module("test_otlp")
        names["otlp"] = {res["service.name"] for res, _ in otlp.check_rules(otlp.parse_json(read("otlp")))}
    if "chrome" in files:
        chrome = consumer_module("test_chrome").Chrome(json.loads(read("chrome")))
        names["chrome"] = set(chrome.process_names.values())
    if backend is not None:
        zipkin_posts = [body for path, _, body in backend.posts if path == "/api/v2/spans"]
        otlp_posts = [body for path, _, body in backend.posts if path == "/v1/traces"]
        assert zipkin_posts and otlp_posts
        sent = [s for body in zipkin_posts for s in json.loads(body)]
        names["zipkin sent"] = {s["localEndpoint"]["serviceName"] for s in sent}
        otlp = consumer_module("test_otlp")
        requests = [otlp.ExportTraceServiceRequest.FromString(b) for b in otlp_posts]
        names["otlp sent"] = {res["service.name"] for r in requests for res, _ in otlp.check_rules(r)}
    assert names and names == {kind: {"renamed"} for kind in names}, names


def test_endpoint_failure_is_reported_not_raised(tmp_path, capsys):
    if not hasattr(_native, "send"):
        pytest.skip("this build cannot send")
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "still.pftrace"
    try:
        waffle.shutdown()
        dead = waffle.ZipkinExporter(endpoint=f"http://127.0.0.1:{port}", timeout=0.2)
        waffle.set_exporter(dead, waffle.PerfettoExporter(out))
        with waffle.span("x"):
            pass
        assert waffle.shutdown() == [str(out)]
    finally:
        waffle.set_exporter()
    assert "failed" in capsys.readouterr().err


def test_endpoint_and_unknown_formats_are_refused():
    with pytest.raises(NotImplementedError, match="no live protocol"):
        waffle.PerfettoExporter(endpoint="http://localhost:4318")
    with pytest.raises(ValueError, match="http"):
        _native.send([], "zipkin=ftp://x")
    with pytest.raises(NotImplementedError, match="cannot write"):
        waffle.set_exporter("trace.unknown-format")
    assert waffle.exporter_for_path("a.jaeger.json").kind == "Jaeger"
    assert isinstance(waffle.exporter_for_path("a.pftrace"), waffle.PerfettoExporter)
    assert waffle.JaegerExporter(service_name="svc").path == "svc.jaeger.json"


def test_exported_at_interpreter_exit(tmp_path):
    """No shutdown() call: the atexit hook stops the session and writes the file; the
    temporary trace.bin is removed."""
    out = tmp_path / "exit.pftrace"
    code = (
        "import threading, waffle\n"
        f"waffle.set_exporter(waffle.PerfettoExporter({str(out)!r}))\n"
        "def work():\n"
        "    with waffle.span('in_thread'):\n"
        "        pass\n"
        "t = threading.Thread(target=work); t.start(); t.join()\n"
        "with waffle.span('at_exit_root', n=1):\n"
        "    waffle.event('last')\n"
        "print(waffle._native.recording_path())\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    bin_path = Path(res.stdout.strip())
    assert not bin_path.exists(), "the temporary trace.bin is removed after export"
    perfetto = consumer_module("test_perfetto")
    tracks = perfetto.read(out.read_bytes())
    names = {s.name for t in tracks.values() for s in t.slices}
    assert {"in_thread", "at_exit_root"} <= names


def test_waffle_export_environment_variable(tmp_path):
    out = tmp_path / "env.pftrace"
    code = "import waffle\nwith waffle.span('from_env'):\n    pass\n"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "WAFFLE_EXPORT": str(out)})
    assert out.stat().st_size > 0
