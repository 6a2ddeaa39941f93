#!/usr/bin/env python3
"""Writes a PyTorch-profiler-shaped trace (Kineto's Chrome JSON) of about SIZE_MB megabytes by
repeating one small training step: a host thread running ops that launch kernels on two GPU
streams (correlation args and ac2g flows), a copy, and the step on the GPU as an annotation.

    kineto_profile.py OUT SIZE_MB [--new]

--new makes the second run of a comparison: the GEMM 1.5 times slower, bias and GELU fused.
The events are written as they are made, so the script's memory does not grow with the size.
"""
import json
import sys

out, size_mb = sys.argv[1], float(sys.argv[2])
new = "--new" in sys.argv[3:]
kernels = (
    [("sm90_xmma_gemm_f32f32", 150.0, 7), ("bias_gelu_fused", 28.0, 7), ("layer_norm_fwd", 30.0, 13)]
    if new
    else [("sm90_xmma_gemm_f32f32", 100.0, 7), ("bias_add", 10.0, 7), ("gelu_fwd", 20.0, 7), ("layer_norm_fwd", 30.0, 13)]
)
limit = size_mb * 1e6
with open(out, "w") as f:
    head = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
            "baseTimeNanoseconds": 1764000000000000000, "displayTimeUnit": "ms"}
    text = json.dumps(head)[:-1] + ', "traceEvents": [\n'
    f.write(text)
    written = len(text)
    meta = [
        {"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": 4242, "tid": 4243, "args": {"name": "main"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
    ]
    first = True

    def put(ev):
        global first, written
        text = ("" if first else ",\n") + json.dumps(ev, separators=(", ", ": "))
        first = False
        f.write(text)
        written += len(text)

    for ev in meta:
        put(ev)
    step, corr = 0, 1
    while written < limit:
        t0 = 10.0 + step * 2000.0
        host, gpu = t0 + 2.0, t0 + 50.0
        g0 = gpu
        for name, us, stream in kernels + [("Memcpy DtoD (Device -> Device)", 3.5, 7)]:
            copy = name.startswith("Memcpy")
            op = "aten::copy_" if copy else "aten::" + name
            put({"ph": "X", "cat": "cpu_op", "name": op, "pid": 4242, "tid": 4243, "ts": round(host, 3), "dur": 20.0,
                 "args": {"External id": corr, "Record function id": 0, "Sequence number": corr, "Ev Idx": corr,
                          "Input Dims": [[8, 4096], [4096, 4096]], "Input type": ["float", "float"]}})
            put({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync" if copy else "cudaLaunchKernel",
                 "pid": 4242, "tid": 4243, "ts": round(host + 5.0, 3), "dur": 6.0,
                 "args": {"External id": corr, "cbid": 41 if copy else 211, "correlation": corr}})
            put({"ph": "X", "cat": "gpu_memcpy" if copy else "kernel", "name": name, "pid": 0, "tid": stream,
                 "ts": round(gpu, 3), "dur": us,
                 "args": {"External id": corr, "device": 0, "stream": stream, "correlation": corr,
                          "registers per thread": 90, "shared memory": 0, "grid": [132, 1, 1], "block": [384, 1, 1]}})
            put({"ph": "s", "id": corr, "pid": 4242, "tid": 4243, "ts": round(host + 5.0, 3), "cat": "ac2g", "name": "ac2g"})
            put({"ph": "f", "id": corr, "pid": 0, "tid": stream, "ts": round(gpu, 3), "cat": "ac2g", "name": "ac2g", "bp": "e"})
            host += 25.0
            gpu += us + 1.0
            corr += 1
        put({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 4242, "tid": 4243,
             "ts": round(t0, 3), "dur": 1500.0, "args": {"External id": corr}})
        put({"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{step}", "pid": 0, "tid": 7,
             "ts": round(g0 - 0.5, 3), "dur": round(gpu - g0 + 1.0, 3), "args": {"External id": corr}})
        step += 1
    f.write("\n]}\n")
