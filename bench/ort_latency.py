"""ONNX Runtime's latency on one ONNX file: the peer `tunehub-bench network --ort-python` runs
beside the model tunehub built from the same file, on the same thread count.

    /tmp/ortvenv/bin/python bench/ort_latency.py MODEL.onnx --threads 2 --runs 200

Random inputs of the model's (fixed) shapes; `--warmup` runs first, then `--runs` timed ones;
prints one JSON line: median_ms, p90_ms, runs, threads, onnxruntime's version.
"""

import argparse
import json
import statistics
import time

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    a = ap.parse_args()
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {
        i.name: rng.uniform(-1, 1, size=i.shape).astype(np.float32) for i in s.get_inputs()
    }
    for _ in range(a.warmup):
        s.run(None, feeds)
    times = []
    for _ in range(a.runs):
        t = time.perf_counter()
        s.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    print(
        json.dumps(
            {
                "median_ms": statistics.median(times),
                "p90_ms": times[int(round(0.9 * (len(times) - 1)))],
                "runs": a.runs,
                "threads": a.threads,
                "onnxruntime": ort.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
