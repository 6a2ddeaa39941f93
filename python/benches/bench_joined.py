"""What a Python span costs when this module records into a session another copy of waffle
runs (docs/one-recorder.md), against the same span in the module's own session, each beside
the floor of a ``with`` statement (a ``threading.Lock``) measured in the same process.

Two child interpreters, run alternately ``--runs`` times:

- **own**: ``waffle.start(...)``, the module's own session;
- **joined**: ``LD_PRELOAD=libwaffle.so`` with ``WAFFLE_OUTPUT``: the preloaded library's
  copy of waffle starts the session when it loads, and the module joins it on import, so each
  record crosses to that copy.

Each child times ``--rounds`` rounds of ``--number`` spans (``timeit``) and reports its median
round; the table gives the median over runs, ns per span, and the ratio to the floor.

With ``--instructions`` the children run under ``valgrind --tool=callgrind`` instead, once
with no iteration and once with ``--number`` of them, and the table gives instructions per
iteration (the difference over the number): exact and repeatable on a shared, loaded machine,
where times are not.

    cargo build --release -p waffle-ffi
    .venv/bin/python python/benches/bench_joined.py                    # about 20 s
    .venv/bin/python python/benches/bench_joined.py --instructions --number 20000   # about 3 min
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import json, statistics, sys, threading, timeit
import waffle
if sys.argv[1] == "own":
    waffle.start(sys.argv[2])
assert waffle.is_recording()
lock = threading.Lock()
def floor():
    with lock:
        pass
def span():
    with waffle.span("bench"):
        pass
def fields(i=7):
    with waffle.span("bench2", n=i, x=1.5):
        pass
number, rounds = int(sys.argv[3]), int(sys.argv[4])
out = {}
for name, f in (("floor", floor), ("span", span), ("fields", fields)):
    times = [timeit.timeit(f, number=number) / number * 1e9 for _ in range(rounds)]
    out[name] = statistics.median(times)
print(json.dumps(out))
"""


# A child for --instructions: `number` iterations of one case, nothing else.
COUNTED = """
import sys, threading
import waffle
if sys.argv[1] == "own":
    waffle.start(sys.argv[2])
assert waffle.is_recording()
lock = threading.Lock()
number, case = int(sys.argv[3]), sys.argv[4]
if case == "floor":
    for _ in range(number):
        with lock:
            pass
elif case == "span":
    for _ in range(number):
        with waffle.span("bench"):
            pass
else:
    for i in range(number):
        with waffle.span("bench2", n=i, x=1.5):
            pass
"""


def child_env(mode: str, lib: Path, trace: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAFFLE_") and k != "LD_PRELOAD"}
    if mode == "joined":
        env["LD_PRELOAD"] = str(lib)
        env["WAFFLE_OUTPUT"] = str(trace)
    return env


def instructions(mode: str, lib: Path, tmp: Path, number: int) -> dict[str, float]:
    """Instructions per iteration of each case, from two callgrind runs (0 and `number`)."""
    out = {}
    for case in ("floor", "span", "fields"):
        totals = []
        for n in (0, number):
            trace = tmp / f"{mode}-{case}-{n}.bin"
            res = subprocess.run(
                ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", COUNTED,
                 mode, str(trace), str(n), case],
                capture_output=True, text=True, env=child_env(mode, lib, trace), check=True,
            )
            totals.append(int(re.search(r"Collected : (\d+)", res.stderr).group(1)))
        out[case] = (totals[1] - totals[0]) / number
    return out


def run(mode: str, lib: Path, tmp: Path, number: int, rounds: int) -> dict[str, float]:
    trace = tmp / f"{mode}.bin"
    res = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(trace), str(number), str(rounds)],
        capture_output=True, text=True, env=child_env(mode, lib, trace), check=True,
    )
    return json.loads(res.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=100_000)
    ap.add_argument("--lib", type=Path, default=REPO / "target" / "release" / "libwaffle.so")
    ap.add_argument("--instructions", action="store_true", help="count instructions with callgrind")
    args = ap.parse_args()
    if not args.lib.is_file():
        sys.exit(f"{args.lib} is missing: cargo build --release -p waffle-ffi")
    if args.instructions:
        with tempfile.TemporaryDirectory() as d:
            counted = {mode: instructions(mode, args.lib, Path(d), args.number) for mode in ("own", "joined")}
        print(f"{'session':<8} {'case':<8} {'instr/it':>9} {'- floor':>8}")
        for mode, cases in counted.items():
            for case, n in cases.items():
                print(f"{mode:<8} {case:<8} {n:9.0f} {n - cases['floor']:8.0f}")
        return
    results: dict[str, list[dict[str, float]]] = {"own": [], "joined": []}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(args.runs):
            for mode in results:
                results[mode].append(run(mode, args.lib, Path(d), args.number, args.rounds))
    print(f"{'session':<8} {'case':<8} {'ns/span':>8} {'x floor':>8}")
    for mode, runs in results.items():
        floor = statistics.median(r["floor"] for r in runs)
        print(f"{mode:<8} {'floor':<8} {floor:8.0f} {1.0:8.2f}")
        for case in ("span", "fields"):
            ns = statistics.median(r[case] for r in runs)
            print(f"{mode:<8} {case:<8} {ns:8.0f} {ns / floor:8.2f}")


if __name__ == "__main__":
    main()
