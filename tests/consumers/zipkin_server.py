"""A real Zipkin server for the tests, and what checking our spans against it takes.

The server is `io.zipkin:zipkin-server:<ZIPKIN_VERSION>:exec` from Maven Central (in-memory
storage), started on 127.0.0.1 and a free port by `serve()`; `conftest.py` runs one per test
session (the `zipkin` fixture, its base URL). The jar is taken from `WAFFLE_ZIPKIN_JAR`, or the
local Maven repository (`MAVEN_REPO`, default `~/.m2/repository`), where it is fetched with
`mvn dependency:get` when missing (once; later runs reuse it). If it cannot be had, or Java
cannot start it, the tests fail: a skipped consumer check proves nothing.
"""

import contextlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from servers import free_ports, http, stop

ZIPKIN_VERSION = "3.6.1"
ARTIFACT = f"io.zipkin:zipkin-server:{ZIPKIN_VERSION}:jar:exec"
START_TIMEOUT_S = 120


def free_port():
    """A port the system had free a moment ago."""
    return free_ports(1)[0]


def zipkin_jar():
    given = os.environ.get("WAFFLE_ZIPKIN_JAR")
    if given:
        if not Path(given).is_file():
            pytest.fail(f"WAFFLE_ZIPKIN_JAR={given} is not a file")
        return Path(given)
    m2 = Path(os.environ.get("MAVEN_REPO", Path.home() / ".m2" / "repository"))
    jar = m2 / "io/zipkin/zipkin-server" / ZIPKIN_VERSION / f"zipkin-server-{ZIPKIN_VERSION}-exec.jar"
    if jar.is_file():
        return jar
    mvn = shutil.which("mvn")
    if mvn is None:
        pytest.fail(f"{jar} is missing and Maven (mvn) is not installed to fetch {ARTIFACT}; "
                    "install Maven or set WAFFLE_ZIPKIN_JAR")
    proc = subprocess.run([mvn, "-q", "-B", "dependency:get", f"-Dartifact={ARTIFACT}",
                           "-Dtransitive=false", f"-Dmaven.repo.local={m2}"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not jar.is_file():
        pytest.fail(f"could not fetch {ARTIFACT} from Maven Central (mvn exited {proc.returncode}):\n"
                    f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return jar


@contextlib.contextmanager
def serve(log_dir):
    """A Zipkin server's base URL while the block runs; its log goes to `log_dir`."""
    java = shutil.which("java")
    if java is None:
        pytest.fail("java is not installed; the Zipkin server needs Java 17")
    jar = zipkin_jar()
    port = free_port()
    log_path = Path(log_dir) / "server.log"
    log = open(log_path, "wb")
    started = time.monotonic()
    server = subprocess.Popen(
        [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-jar", str(jar),
         f"--armeria.ports[0].port={port}", "--armeria.ports[0].ip=127.0.0.1",
         "--armeria.ports[0].protocols[0]=http"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            if server.poll() is not None:
                pytest.fail(f"the Zipkin server exited with {server.returncode}:\n"
                            f"{log_path.read_text(errors='replace')[-4000:]}")
            try:
                status, body = http("GET", f"{base}/health", timeout=2)
                if status == 200 and json.loads(body).get("status") == "UP":
                    break
            except (OSError, ValueError):
                pass
            if time.monotonic() - started > START_TIMEOUT_S:
                pytest.fail(f"the Zipkin server was not UP after {START_TIMEOUT_S} s:\n"
                            f"{log_path.read_text(errors='replace')[-4000:]}")
            time.sleep(0.2)
        print(f"\nZipkin server {ZIPKIN_VERSION} up on {base} in {time.monotonic() - started:.1f} s")
        yield base
    finally:
        stop(server, log)


def fetch_trace(base, trace_id, want, timeout_s=20):
    """The trace as the server returns it, once it holds `want` spans (storing is asynchronous)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status, body = http("GET", f"{base}/api/v2/trace/{trace_id}")
        spans = json.loads(body) if status == 200 else []
        if len(spans) >= want or time.monotonic() > deadline:
            assert status == 200, f"GET trace {trace_id}: {status} {body[:500]!r}"
            return spans
        time.sleep(0.2)


def assert_same_spans(ours, theirs):
    """The server's trace holds exactly our spans: names (lowercased), parents, times, service,
    tags and annotations."""
    assert ours, "no spans"
    trace_id = ours[0]["traceId"]
    assert len(theirs) == len(ours), f"sent {len(ours)} spans, the server has {len(theirs)}"
    by_id = {s["id"]: s for s in theirs}
    assert len(by_id) == len(theirs), "the server merged or repeated spans"
    for s in ours:
        got = by_id.get(s["id"])
        assert got is not None, f"span {s['id']} ({s['name']}) missing from the server's trace"
        where = f"span {s['id']} ({s['name']})"
        # A 128-bit id whose high half is zero comes back as 16 digits.
        assert int(got["traceId"], 16) == int(trace_id, 16), where
        assert got.get("name") == s["name"].lower(), where
        assert got.get("parentId") == s.get("parentId"), where
        assert got["timestamp"] == s["timestamp"] and got["duration"] == s["duration"], where
        assert got.get("kind") is None, where
        assert got["localEndpoint"] == s["localEndpoint"], where
        assert got.get("tags", {}) == s["tags"], where
        want_annotations = sorted((a["timestamp"], a["value"]) for a in s.get("annotations", []))
        got_annotations = sorted((a["timestamp"], a["value"]) for a in got.get("annotations", []))
        assert got_annotations == want_annotations, where
