"""Live export soak: `examples/steady.rs` records for 60 s at thousands of spans a second while
`waffle-decode --follow` sends its file to a real Jaeger v2 (OTLP/HTTP) with Badger storage,
and Jaeger is stopped once mid-run and started again 5 s later on the same ports and the same
storage directory. Afterwards every span recorded (counted by decoding the file) is either in
Jaeger (counted by unique span id from `GET /api/traces/{id}`) or among the drops the follower
reported (the follower holds 5,000 spans, fewer than the outage brings, so there are drops);
the follower exits 0 on its own once the file is closed; it said the backend went
away and came back; and its resident memory, sampled every second while it runs, is flat: the
largest sample of the last third of the run is within `RSS_SLACK_MB` of the largest of the
first third. Figures of one run are in docs/live-export.md.

Durations can be shortened for a quick look with `WAFFLE_SOAK_SECS` (default 60)."""

import json
import os
import re
import secrets
import select
import subprocess
import threading
import time

import pytest

import jaeger_server
from servers import free_ports, http, stop
from waffle_bins import binary, run

SECS = int(os.environ.get("WAFFLE_SOAK_SECS", "60"))
RATE = 2000  # spans a second, over two threads
DOWN_AT_S = SECS * 0.4
DOWN_FOR_S = 5
RSS_SLACK_MB = 20
# Spans the follower holds while Jaeger is away: fewer than the outage brings (about 11,000), so
# that spans are dropped and the count of drops is checked against what Jaeger lacks.
BUFFER = 5_000
BADGER_CONFIG = jaeger_server.HERE / "jaeger-badger.yaml"


def rss_kb(pid):
    """The resident memory of process `pid` in kB, or None once it has none: a process gives its
    memory up early in its exit, and from then on its status has no `VmRSS` line (or, reaped,
    there is no status at all)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return None


def sample_rss(process, samples, every_s=1.0):
    """Appends `process`'s RSS to `samples` every `every_s` while it runs, and returns once it
    exits. The assertion compares the memory of a running follower, so a reading is kept only
    if the process had its memory when read and had not exited by the time the reading was
    done: a pidfd (opened while the child is not reaped, so it names this process and no later
    one with the same pid) becomes readable when the process exits, whoever reaps it."""
    pidfd = os.pidfd_open(process.pid)
    try:
        while True:
            kb = rss_kb(process.pid)
            exited = select.select([pidfd], [], [], 0)[0]
            if kb is None or exited:
                return
            samples.append(kb)
            if select.select([pidfd], [], [], every_s)[0]:
                return
    finally:
        os.close(pidfd)


def figure(line, pattern):
    m = re.search(pattern, line)
    assert m, f"no {pattern!r} in {line!r}"
    return int(m.group(1))


@pytest.mark.soak
def test_follow_through_a_jaeger_restart(tmp_path):
    steady, decode = binary("examples", "steady"), binary("waffle-decode")
    trace_id = secrets.token_hex(16)
    path = tmp_path / "steady.bin"
    ports = free_ports(4)
    env = {"WAFFLE_JAEGER_BADGER_DIR": str(tmp_path / "badger")}
    server, log, urls = jaeger_server.start(tmp_path, BADGER_CONFIG, ports, env, "jaeger-1.log")
    follower_err = open(tmp_path / "follow.err", "w+")
    follower = subprocess.Popen([str(decode), "--follow", str(path), "--send", f"otlp={urls.otlp}",
                                 "--stop-wait", "30", "--buffer-spans", str(BUFFER)], stderr=follower_err, stdout=subprocess.DEVNULL)
    samples = []
    sampler = threading.Thread(target=sample_rss, args=(follower, samples))
    sampler.start()
    recorder = subprocess.Popen([str(steady), str(path), str(SECS), str(RATE), "2"], stdout=subprocess.PIPE,
                                text=True, env={**os.environ, "WAFFLE_TRACE_ID": trace_id})
    try:
        started = time.monotonic()
        time.sleep(DOWN_AT_S)
        stop(server, log)
        went = time.monotonic()
        time.sleep(DOWN_FOR_S)
        server, log, urls = jaeger_server.start(tmp_path, BADGER_CONFIG, ports, env, "jaeger-2.log")
        down_s = time.monotonic() - went
        out, _ = recorder.communicate(timeout=SECS + 60)
        assert recorder.returncode == 0, out
        follower.wait(timeout=60)
        ran_s = time.monotonic() - started
        phase = time.monotonic()
        sampler.join()
        follower_err.seek(0)
        err = follower_err.read()
        assert follower.returncode == 0, err
        summary = next(line for line in err.splitlines() if line.startswith("followed to"))
        # What the file holds, counted by the ordinary decoder.
        scanned = run(decode, path, "-o", "/dev/null", "--format", "perfetto").stderr
        recorded = figure(scanned, r"(\d+) spans, \d+ events")
        assert recorded == figure(out, r"(\d+) spans recorded")
        sent = figure(summary, r"(\d+) spans sent")
        lost = sum(figure(summary, rf"{what} (\d+)") for what in ("dropped", "unsent", "refused", "rejected"))
        status, body = http("GET", f"{urls.query}/api/traces/{trace_id}", timeout=120)
        assert status == 200, body[:500]
        data = json.loads(body)["data"]
        received = len({s["spanID"] for t in data for s in t["spans"]})
        counted_s = time.monotonic() - phase
        # A sample a second over the whole run: each third holds many.
        assert len(samples) >= 3, samples
        third = len(samples) // 3
        first, last = max(samples[:third]), max(samples[-third:])
        print(f"\nSOAK {ran_s:.0f} s to the follower's exit, {counted_s:.0f} s to count; {recorded} spans recorded, {received} in Jaeger, {lost} reported lost; "
              f"Jaeger down {down_s:.1f} s; follower RSS first third max {first / 1024:.1f} MB, last third max "
              f"{last / 1024:.1f} MB, overall max {max(samples) / 1024:.1f} MB\n{summary}")
        assert received + lost == recorded, summary
        assert figure(summary, r"dropped (\d+)") > 0, summary
        assert received <= sent
        assert "is not answering" in err and "is back after" in err, err
        assert last <= first + RSS_SLACK_MB * 1024, samples
    finally:
        for p in (recorder, follower):
            if p.poll() is None:
                p.kill()
        stop(server, log)
