"""`waffle-decode --send`: live export to a real Zipkin server and to an OTLP/HTTP receiver.

- Zipkin: the session's real Zipkin server (`conftest.py`) gets a two-process `nan_allreduce` run
  in batches of 3 spans (`--batch-spans 3`, with `-o run.zipkin.json` in the same command); the
  trace read back from `GET /api/v2/trace/{id}` must hold every span of the file, unchanged.
- OTLP: a receiver written here (`http.server` on 127.0.0.1, a background thread) decodes every
  request with OpenTelemetry's own `ExportTraceServiceRequest`, checks the path and content
  type, and answers 200 with an empty `ExportTraceServiceResponse`, after failing the first two
  requests with 503 (the second with `Retry-After: 1`) to prove the retries. The batches put
  together must be the spans of `-o run.otlp.pb`, in order, each under its own resource, with
  their links and events.
- Failures: a 400 is not retried and its message is reported; an endpoint nobody listens on is
  exit 1 with a message naming it, within seconds (`WAFFLE_SEND_BACKOFF_MS` keeps the backoff
  short).

Environment: `WAFFLE_BIN_DIR` (default `<repo>/target/debug`) holds `waffle-decode` and
`examples/`.
"""

import json
import math
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from zipkin_server import assert_same_spans, fetch_trace, free_port

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("WAFFLE_BIN_DIR", REPO / "target" / "debug"))
FAST = {"WAFFLE_SEND_BACKOFF_MS": "20"}


def binary(*parts):
    path = BIN_DIR.joinpath(*parts)
    if not path.is_file():
        pytest.fail(f"{path} not found: build with `cargo build -p waffle-std -p waffle-decode --examples --bins` "
                    "or set WAFFLE_BIN_DIR")
    return path


def decode(*args, env=None, want=0):
    """Runs waffle-decode; asserts its exit code and that it did not panic."""
    proc = subprocess.run([str(binary("waffle-decode")), *map(str, args)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})
    assert "panicked" not in proc.stderr, proc.stderr
    assert proc.returncode == want, f"exited {proc.returncode}, not {want}:\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory):
    """The directory of a fresh two-process `nan_allreduce` run (rank0.bin, rank1.bin)."""
    out = tmp_path_factory.mktemp("send-nan")
    proc = subprocess.run([str(binary("examples", "nan_allreduce")), str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def ranks(run_dir):
    return [run_dir / "rank0.bin", run_dir / "rank1.bin"]


@dataclass
class Request:
    at: float
    path: str
    content_type: str
    body: bytes
    message: ExportTraceServiceRequest
    status: int


class OtlpReceiver:
    """An OTLP/HTTP receiver on 127.0.0.1 and a free port, serving from a background thread.

    It answers the first requests with `script` ((status, headers, body) each), then 200 with an
    empty `ExportTraceServiceResponse`. A request to another path, of another content type or
    whose body does not parse is refused (404, 415, 400) and recorded in `problems`."""

    def __init__(self, script=()):
        self.script = list(script)
        self.requests, self.problems = [], []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the client expects

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.answer(self, body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def answer(self, handler, body):
        content_type = handler.headers.get("Content-Type", "")
        message, problem = ExportTraceServiceRequest(), None
        try:
            message.ParseFromString(body)
        except DecodeError as e:
            problem = (400, f"not an ExportTraceServiceRequest: {e}")
        if content_type != "application/x-protobuf":
            problem = (415, f"content type {content_type!r}")
        if handler.path != "/v1/traces":
            problem = (404, f"path {handler.path!r}")
        with self.lock:
            if problem:
                status, headers, reply = problem[0], {"Content-Type": "text/plain"}, problem[1].encode()
                self.problems.append(problem)
            elif self.script:
                status, headers, reply = self.script.pop(0)
            else:
                status, headers = 200, {"Content-Type": "application/x-protobuf"}
                reply = ExportTraceServiceResponse().SerializeToString()
            self.requests.append(Request(time.monotonic(), handler.path, content_type, body, message, status))
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(reply)))
        handler.end_headers()
        handler.wfile.write(reply)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def assert_no_unknown_fields(msg):
    """A field number or wire type we got wrong would land here instead of in its field."""
    assert len(UnknownFieldSet(msg)) == 0, f"unknown fields in {msg.DESCRIPTOR.name}"
    for fd, value in msg.ListFields():
        if fd.message_type is not None:
            for sub in value if fd.is_repeated else [value]:
                assert_no_unknown_fields(sub)


def spans_of(req):
    """(resource, span) of every span of a request, in order."""
    return [(rs.resource, s) for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]


def summary_line(stderr, kind, url):
    [line] = [line for line in stderr.splitlines() if line.startswith("sent ") and f" {kind} endpoint {url}" in line]
    return line


def test_zipkin_in_batches_of_three_round_trips(zipkin, nan_run, tmp_path):
    started = time.monotonic()
    out = tmp_path / "run.zipkin.json"
    proc = decode(*ranks(nan_run), "--send", f"zipkin={zipkin}", "--batch-spans", "3", "-o", out)
    ours = json.loads(out.read_text())
    batches = math.ceil(len(ours) / 3)
    assert len(ours) > 3 and batches > 1
    line = summary_line(proc.stderr, "zipkin", f"{zipkin}/api/v2/spans")
    assert line.startswith(f"sent {len(ours)} spans to zipkin endpoint {zipkin}/api/v2/spans "
                           f"in {batches} requests (0 retries, "), line
    theirs = fetch_trace(zipkin, ours[0]["traceId"], len(ours))
    assert_same_spans(ours, theirs)
    assert {s["tags"]["rank"] for s in theirs} == {"0", "1"}
    print(f"zipkin --send: {len(ours)} spans in {batches} requests, read back in "
          f"{time.monotonic() - started:.2f} s")


def test_otlp_batches_are_retried_and_carry_every_span(nan_run, tmp_path):
    reference_file = tmp_path / "run.otlp.pb"
    script = [(503, {"Content-Type": "text/plain"}, b"warming up"), (503, {"Retry-After": "1"}, b"")]
    started = time.monotonic()
    with OtlpReceiver(script) as rx:
        proc = decode(*ranks(nan_run), "--send", f"otlp={rx.url}", "--batch-spans", "5",
                      "-o", reference_file, env=FAST)
    elapsed = time.monotonic() - started
    assert rx.problems == []
    reference = spans_of(ExportTraceServiceRequest.FromString(reference_file.read_bytes()))
    n, batches = len(reference), math.ceil(len(reference) / 5)

    # Two 503s, then every batch once; the first batch was sent again as it was.
    assert [r.status for r in rx.requests] == [503, 503] + [200] * batches
    assert rx.requests[0].body == rx.requests[1].body == rx.requests[2].body
    assert rx.requests[2].at - rx.requests[1].at >= 1.0, "Retry-After: 1 was not honoured"
    assert all(r.path == "/v1/traces" and r.content_type == "application/x-protobuf" for r in rx.requests)
    accepted = [r.message for r in rx.requests if r.status == 200]
    sizes = [len(spans_of(m)) for m in accepted]
    assert sizes == [5] * (batches - 1) + [n - 5 * (batches - 1)], sizes
    for m in accepted:
        assert_no_unknown_fields(m)

    # Put together, the batches are the file's spans, in order, each under its own resource:
    # attributes, events and links included.
    got = spans_of(ExportTraceServiceRequest(resource_spans=[rs for m in accepted for rs in m.resource_spans]))
    assert len(got) == n
    for (want_resource, want), (got_resource, span) in zip(reference, got):
        assert span == want and got_resource == want_resource, span.name
    ids = {s.span_id for _, s in got}
    links = [link for _, s in got for link in s.links]
    events = [e.name for _, s in got for e in s.events]
    assert links and all(link.span_id in ids for link in links), "a link to a span never sent"
    assert "Input buffer contains NaN" in events and "Output buffer is NaN after AllReduce" in events
    line = summary_line(proc.stderr, "otlp", f"{rx.url}/v1/traces")
    assert line.startswith(f"sent {n} spans to otlp endpoint {rx.url}/v1/traces in {batches} requests "
                           "(2 retries, "), line
    print(f"otlp --send: {n} spans, {len(links)} links, {len(events)} events in {batches} batches "
          f"after 2 retries, {elapsed:.2f} s")


def test_a_client_error_is_not_retried_and_its_message_is_shown(nan_run):
    script = [(400, {"Content-Type": "text/plain"}, b"span 1: trace_id\nis invalid")]
    with OtlpReceiver(script) as rx:
        proc = decode(*ranks(nan_run), "--send", f"otlp={rx.url}", "-q", env=FAST, want=1)
    assert len(rx.requests) == 1
    assert proc.stderr.startswith(f"waffle-decode: error: sending to otlp endpoint {rx.url}/v1/traces "
                                  "failed: HTTP 400 Bad Request: span 1: trace_id is invalid; not retried "
                                  "(1 attempt, "), proc.stderr
    assert proc.stderr.rstrip().endswith("nothing was sent"), proc.stderr


def test_an_endpoint_that_is_down_fails_fast_and_says_so(nan_run, tmp_path):
    port = free_port()  # bound, then let go: nobody listens
    out = tmp_path / "run.pftrace"
    started = time.monotonic()
    proc = decode(*ranks(nan_run), "-o", out, "--send", f"zipkin=http://127.0.0.1:{port}",
                  "-q", env=FAST, want=1)
    elapsed = time.monotonic() - started
    assert elapsed < 5, f"{elapsed:.1f} s"
    assert out.is_file(), "-o is written whatever becomes of --send"
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"waffle-decode: error: sending to zipkin endpoint "
                           f"http://127.0.0.1:{port}/api/v2/spans failed: "), line
    assert "refused" in line.lower() and "gave up after 5 attempts in " in line, line
    assert line.endswith("; nothing was sent"), line
    print(f"endpoint down: exit 1 after {elapsed:.2f} s: {line}")


def test_send_or_output_is_required(nan_run):
    proc = decode(*ranks(nan_run), want=2)
    assert "--output <OUT>|--send <KIND=URL>" in proc.stderr, proc.stderr
    proc = decode(*ranks(nan_run), "--send", "jaeger=http://127.0.0.1:1", want=2)
    assert "unknown kind `jaeger`" in proc.stderr, proc.stderr
