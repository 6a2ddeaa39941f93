"""The Zipkin exporter, read back by a real Zipkin server.

A Zipkin server (`io.zipkin:zipkin-server:3.6.1:exec` from Maven Central, in-memory storage) is
started once per test session on 127.0.0.1 and a free port (the `zipkin` fixture of
`conftest.py`, from `zipkin_server.py`). Our Zipkin v2 JSON, from the golden
trace (`std-runtime/decoder/tests/golden/zipkin.json`) and from a real two-process run of the
`nan_allreduce` example, is POSTed to `/api/v2/spans` and must be accepted (202); then
`GET /api/v2/trace/{traceId}` must return every span with the same name (the server lowercases
names), parent, times, service, tags and annotations. A broken document must be refused (400).

The jar is taken from `WAFFLE_ZIPKIN_JAR`, or the local Maven repository (`MAVEN_REPO`, default
`~/.m2/repository`), where it is fetched with `mvn dependency:get` when missing (once; later runs
reuse it). If it cannot be had,
or Java cannot start it, the tests fail: a skipped consumer check proves nothing.

Environment:
- `WAFFLE_BIN_DIR`: where `waffle-decode` and `examples/nan_allreduce` are
  (default `<repo>/target/debug`).
- `WAFFLE_ZIPKIN_JAR`: a zipkin-server exec jar to use instead of Maven's.
- `MAVEN_REPO`: the local Maven repository to find or fetch it in.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from zipkin_server import assert_same_spans, fetch_trace, http

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "std-runtime" / "decoder" / "tests" / "golden" / "zipkin.json"


def run(*args):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def nan_allreduce_zipkin(tmp_path_factory):
    """Our Zipkin JSON for a fresh run of the two-process `nan_allreduce` example."""
    bin_dir = Path(os.environ.get("WAFFLE_BIN_DIR", REPO / "target" / "debug"))
    example, decode = bin_dir / "examples" / "nan_allreduce", bin_dir / "waffle-decode"
    for b in (example, decode):
        if not b.is_file():
            pytest.fail(f"{b} not found: build with `cargo build -p waffle-std -p waffle-decode --examples --bins` "
                        "or set WAFFLE_BIN_DIR")
    out = tmp_path_factory.mktemp("nan")
    run(example, out)
    run(decode, out / "rank0.bin", out / "rank1.bin", "-o", out / "run.zipkin.json", "-q")
    return (out / "run.zipkin.json").read_bytes()


def round_trip(base, document):
    """POSTs our spans, reads the trace back and checks it holds exactly what we sent."""
    ours = json.loads(document)
    assert ours, "no spans"
    status, body = http("POST", f"{base}/api/v2/spans", document)
    assert status == 202, f"POST /api/v2/spans: {status} {body[:1000]!r}"
    theirs = fetch_trace(base, ours[0]["traceId"], len(ours))
    assert_same_spans(ours, theirs)
    return ours, theirs


def test_golden_trace_round_trips(zipkin):
    started = time.monotonic()
    ours, theirs = round_trip(zipkin, GOLDEN.read_bytes())
    # The golden trace's story survives: the placeholder's child, the cross-rank cause.
    names = {s["id"]: s["name"] for s in theirs}
    assert names[next(s["parentId"] for s in theirs if s["name"] == "read_batch")] == \
        "(begin lost: records dropped)"
    caused = [s for s in theirs if "waffle.caused_by" in s.get("tags", {})]
    assert {s["tags"]["rank"] for s in caused} == {"0", "1"}
    print(f"golden: {len(ours)} spans round-tripped in {time.monotonic() - started:.2f} s")


def test_nan_allreduce_round_trips(zipkin, nan_allreduce_zipkin):
    started = time.monotonic()
    ours, theirs = round_trip(zipkin, nan_allreduce_zipkin)
    services = {s["localEndpoint"]["serviceName"] for s in theirs}
    assert services == {"nan_allreduce"}, services
    ranks = {s["tags"].get("rank") for s in theirs}
    assert ranks == {"0", "1"}, ranks
    allreduces = [s for s in theirs if s["name"] == "allreduce"]
    assert len(allreduces) == 8, "4 rounds on 2 ranks"
    # The NaN's cause: a round-2 allreduce names an event shown (with its id) on rank 1.
    cause = next(s["tags"]["waffle.caused_by"] for s in allreduces if "waffle.caused_by" in s["tags"])
    holder = [s for s in theirs for a in s.get("annotations", []) if f"waffle.id={cause}" in a["value"]]
    assert len(holder) == 1 and holder[0]["tags"]["rank"] == "1", holder
    print(f"nan_allreduce: {len(ours)} spans round-tripped in {time.monotonic() - started:.2f} s")


@pytest.mark.parametrize("document", [
    b'[{"traceId": "not-hex", "id": "0000000000000001", "name": "x"}]',
    b'[{"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "id": "0000000000000001", "timestamp": "soon"}]',
    b'[{"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "id": "00000000000000',
])
def test_broken_documents_are_refused(zipkin, document):
    status, body = http("POST", f"{zipkin}/api/v2/spans", document)
    assert status == 400, f"{status} {body[:500]!r}"
    assert body, "a 400 says why"


def test_unknown_trace_is_404(zipkin):
    status, _ = http("GET", f"{zipkin}/api/v2/trace/00000000000000000000000000abcdef")
    assert status == 404
