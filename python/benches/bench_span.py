"""What a span costs from Python: waffle against the OpenTelemetry SDK, in one process and one
run, as ratios (absolute times move with the machine; ratios are what we compare).

- waffle records into a session writing a real ``trace.bin`` (its collector thread running, as
  in production);
- OpenTelemetry: ``TracerProvider`` with a ``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter`` (its standard in-process setup; the exporter is cleared between
  rounds so memory does not grow); ``--batch`` uses a ``BatchSpanProcessor`` instead.

Each case runs ``--rounds`` rounds; in a round the waffle and OpenTelemetry variants run back to
back (``timeit``, ``--number`` iterations, the OpenTelemetry one a tenth of that). The table
shows the best and the median round per operation, and OTel / waffle for both.

    .venv/bin/python python/benches/bench_span.py            # about 30 s
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import timeit

import waffle
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def cases(tracer):
    """(name, waffle statement, OpenTelemetry statement) triples, as zero-argument functions."""

    def w_span():
        with waffle.span("bench"):
            pass

    def o_span():
        with tracer.start_as_current_span("bench"):
            pass

    def w_fields(i=7):
        with waffle.span("bench2", n=i, x=1.5):
            pass

    def o_fields(i=7):
        with tracer.start_as_current_span("bench2", attributes={"n": i, "x": 1.5}):
            pass

    @waffle.instrument
    def w_func(n, x):
        return n

    def o_func(n, x):
        with tracer.start_as_current_span("o_func", attributes={"n": n, "x": x}):
            return n

    def w_nested():
        with waffle.span("outer"):
            with waffle.span("inner"):
                pass

    def o_nested():
        with tracer.start_as_current_span("outer"):
            with tracer.start_as_current_span("inner"):
                pass

    return [
        ("`with span(\"bench\")`", w_span, o_span),
        ("`with span(\"bench2\", n=i, x=1.5)`", w_fields, o_fields),
        ("decorated function, 2 args as fields", lambda: w_func(7, 1.5), lambda: o_func(7, 1.5)),
        ("2 nested spans", w_nested, o_nested),
    ]


def per_op_ns(fn, number):
    return timeit.Timer(fn).timeit(number=number) / number * 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=100_000, help="waffle iterations per round")
    ap.add_argument("--batch", action="store_true", help="OpenTelemetry BatchSpanProcessor")
    args = ap.parse_args()

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = BatchSpanProcessor(exporter) if args.batch else SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")

    fd, bin_path = tempfile.mkstemp(suffix=".bin")
    os.close(fd)
    waffle.start(bin_path, process_name="bench_span")

    def empty():
        pass

    rows = []
    floor = min(per_op_ns(empty, args.number) for _ in range(3))
    for name, w, o in cases(tracer):
        ws, os_ = [], []
        for _ in range(args.rounds):
            ws.append(per_op_ns(w, args.number))
            os_.append(per_op_ns(o, max(args.number // 10, 1000)))
            processor.force_flush()
            exporter.clear()
        rows.append((name, min(ws), statistics.median(ws), min(os_), statistics.median(os_)))

    waffle.set_exporter()
    stats = waffle._native.stop()
    os.unlink(bin_path)
    disabled = min(per_op_ns(cases(tracer)[0][1], args.number) for _ in range(3))

    print(f"Python {platform.python_version()} ({sys.implementation.name}), {platform.machine()}, "
          f"{os.cpu_count()} CPUs; waffle {waffle.__version__}; OpenTelemetry SDK with "
          f"{'Batch' if args.batch else 'Simple'}SpanProcessor + InMemorySpanExporter; "
          f"{args.rounds} rounds of {args.number} (OTel {max(args.number // 10, 1000)})")
    print()
    print("| case | waffle best | waffle median | OTel best | OTel median | OTel / waffle (best) | (median) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, wb, wm, ob, om in rows:
        print(f"| {name} | {wb:,.0f} ns | {wm:,.0f} ns | {ob:,.0f} ns | {om:,.0f} ns | "
              f"{ob / wb:.1f}× | {om / wm:.1f}× |")
    print()
    print(f"Loop floor (empty function call): {floor:.0f} ns. `with span(\"bench\")` while not "
          f"recording: {disabled:.0f} ns.")
    if stats is not None:
        _, totals = stats
        print(f"waffle session: {totals['data_bytes']:,} data bytes, {totals['dropped']} records dropped.")
    worst = min(ob / wb for _, wb, _, ob, _ in rows)
    print(f"Smallest ratio: {worst:.1f}× ({'meets' if worst >= 10 else 'MISSES'} the 10× bar).")


if __name__ == "__main__":
    main()
