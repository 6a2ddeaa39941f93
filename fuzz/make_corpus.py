#!/usr/bin/env python3
"""Makes the committed seed corpus of the fuzz targets from traces the examples wrote.

    cargo build -p waffle-std --examples
    d=$(mktemp -d); target/debug/examples/causal_pair $d; target/debug/examples/dispatch $d/dispatch.bin
    target/debug/examples/skeleton $d/skeleton.bin
    target/debug/examples/blocked $d/blocked.bin > /dev/null & sleep 0.5; kill -TERM $!
    python3 fuzz/make_corpus.py $d fuzz/corpus

trace_reader gets whole small traces, and larger ones cut at 16 KiB (as a process killed while
writing would leave them); record_stream gets chunk bodies taken from DATA frames (a large one
cut short) and from TAIL frames; roundtrip gets a few of those bytes too (any bytes are valid input for
`arbitrary`). Every file stays at or under 16 KiB so that fuzzing stays fast.
"""
import os
import struct
import sys

LIMIT = 16 << 10


def frames(data):
    """(kind, offset, end, payload) of each whole frame after the 10-byte preamble."""
    at = 10
    while at + 5 <= len(data):
        kind = data[at]
        (n,) = struct.unpack_from("<I", data, at + 1)
        end = at + 5 + n + 4
        if end > len(data):
            break
        yield kind, at, end, data[at + 5 : at + 5 + n]
        at = end


def varint(buf, at):
    v, shift = 0, 0
    while True:
        b = buf[at]
        v |= (b & 0x7F) << shift
        at += 1
        shift += 7
        if b < 0x80:
            return v, at


def chunks(payload):
    _, at = varint(payload, 0)  # stream
    while at < len(payload):
        n, at = varint(payload, at)
        yield payload[at : at + n]
        at += n


def main():
    src, out = sys.argv[1], sys.argv[2]
    traces = {}
    for name in sorted(os.listdir(src)):
        if name.endswith(".bin"):
            with open(os.path.join(src, name), "rb") as f:
                traces[name[:-4]] = f.read()
    for target in ("trace_reader", "record_stream", "roundtrip"):
        os.makedirs(os.path.join(out, target), exist_ok=True)

    def put(target, name, data):
        assert len(data) <= LIMIT, (target, name, len(data))
        with open(os.path.join(out, target, name), "wb") as f:
            f.write(data)

    bodies = []
    for name, data in traces.items():
        if len(data) <= LIMIT:
            put("trace_reader", f"{name}.bin", data)
        else:
            # The file as a process killed while writing it would leave it: cut inside a frame.
            put("trace_reader", f"{name}-cut.bin", data[:LIMIT])
        big = None
        for kind, _, _, payload in frames(data):
            if kind in (4, 7):  # DATA, TAIL
                for b in chunks(payload):
                    if len(b) <= LIMIT // 4:
                        bodies.append((name, b))
                    else:
                        big = big or b
        if big:
            # A chunk of a busy thread, cut short: real records, a wrong count.
            put("record_stream", f"{name}-chunk-cut.bin", big[: LIMIT // 4])
    # A few bodies of different sizes from different traces.
    bodies.sort(key=lambda nb: len(nb[1]))
    picked = bodies[:: max(1, len(bodies) // 6)][:6]
    for i, (name, body) in enumerate(picked):
        put("record_stream", f"{name}-chunk{i}.bin", body)
    for i, (name, body) in enumerate(picked[-3:]):
        put("roundtrip", f"{name}-bytes{i}.bin", body)


if __name__ == "__main__":
    main()
