"""A real Jaeger v2 for the tests: the all-in-one `jaeger` binary with in-memory storage.

The binary is `WAFFLE_JAEGER_BIN` when set (`scripts/test.sh` sets it), else what
`scripts/build-jaeger.sh` prints: it builds `github.com/jaegertracing/jaeger/cmd/jaeger` from
its Go module once and caches it under `${XDG_CACHE_HOME:-~/.cache}/waffle/`, so later runs
start at once. `serve()` starts it with `jaeger.yaml` (OTLP/HTTP and Zipkin receivers, memory
storage, the query API) on 127.0.0.1 and four free ports, waits until the query API answers and
both receivers accept connections, and stops it at the end. If it cannot be built or started,
the tests fail with its output: a skipped consumer check proves nothing.
"""

import contextlib
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from servers import free_ports, http, listening, stop

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CONFIG = HERE / "jaeger.yaml"
BUILD = REPO / "scripts" / "build-jaeger.sh"
START_TIMEOUT_S = 60


@dataclass
class Jaeger:
    """Where a running Jaeger listens."""

    query: str  # the query API and UI base URL
    otlp: str  # the OTLP/HTTP receiver's base URL (`/v1/traces` below it)
    zipkin: str  # the Zipkin receiver's base URL (`/api/v2/spans` below it)


def jaeger_binary():
    given = os.environ.get("WAFFLE_JAEGER_BIN")
    if given:
        if not os.access(given, os.X_OK):
            pytest.fail(f"WAFFLE_JAEGER_BIN={given} is not an executable file")
        return Path(given)
    proc = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        pytest.fail(f"{BUILD} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def serve(log_dir):
    """A running Jaeger (a `Jaeger` of its URLs) while the block runs; its log goes to `log_dir`."""
    server, log, urls = start(log_dir, CONFIG, free_ports(4))
    try:
        yield urls
    finally:
        stop(server, log)


def start(log_dir, config, ports, env=None, log_name="jaeger.log"):
    """Starts Jaeger with `config` on `ports` (query, query gRPC, OTLP/HTTP, Zipkin) and extra
    `env`, and waits until it is ready: returns the process, its open log and its URLs. The
    caller stops it with `servers.stop(process, log)`."""
    binary = jaeger_binary()
    query, grpc, otlp, zipkin = ports
    env = {**os.environ, **(env or {}), "WAFFLE_JAEGER_QUERY_PORT": str(query),
           "WAFFLE_JAEGER_QUERY_GRPC_PORT": str(grpc), "WAFFLE_JAEGER_OTLP_HTTP_PORT": str(otlp),
           "WAFFLE_JAEGER_ZIPKIN_PORT": str(zipkin)}
    log_path = Path(log_dir) / log_name
    log = open(log_path, "wb")
    started = time.monotonic()
    server = subprocess.Popen([str(binary), "--config", str(config)], env=env, stdout=log,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{query}"
    try:
        while True:
            if server.poll() is not None:
                pytest.fail(f"Jaeger ({binary}) exited with {server.returncode} "
                            f"(a port taken meanwhile? ports {query}, {grpc}, {otlp}, {zipkin}):\n"
                            f"{log_path.read_text(errors='replace')[-4000:]}")
            try:
                status, body = http("GET", f"{base}/api/services", timeout=2)
                if status == 200 and "data" in json.loads(body) and listening(otlp) and listening(zipkin):
                    break
            except (OSError, ValueError):
                pass
            if time.monotonic() - started > START_TIMEOUT_S:
                pytest.fail(f"Jaeger was not ready after {START_TIMEOUT_S} s:\n"
                            f"{log_path.read_text(errors='replace')[-4000:]}")
            time.sleep(0.1)
    except BaseException:
        stop(server, log)
        raise
    print(f"\nJaeger {binary} up on {base} in {time.monotonic() - started:.1f} s")
    urls = Jaeger(query=base, otlp=f"http://127.0.0.1:{otlp}", zipkin=f"http://127.0.0.1:{zipkin}")
    return server, log, urls


def fetch_trace(query, trace_id, want, timeout_s=20):
    """`GET /api/traces/{id}`'s trace once it holds `want` spans."""
    deadline = time.monotonic() + timeout_s
    while True:
        status, body = http("GET", f"{query}/api/traces/{trace_id}")
        data = json.loads(body).get("data") if status == 200 else None
        spans = data[0]["spans"] if data else []
        if len(spans) >= want or time.monotonic() > deadline:
            assert status == 200 and data, f"GET /api/traces/{trace_id}: {status} {body[:500]!r}"
            assert len(data) == 1, f"{len(data)} traces for one id"
            return data[0]
        time.sleep(0.1)
