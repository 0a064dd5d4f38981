"""The peer of `tunehub-bench network`: ONNX Runtime's CPU latency on the same models.

Exports ResNet-18 and MobileNetV2 (torchvision's definitions, weights=None: nothing is
downloaded), a BERT-base encoder layer (sequence 128) and a GPT-2 (small) decoder step at
batch 1 (torch modules defined here) to ONNX, opset 17, then times each with ONNX Runtime on
the given number of threads (the cores tunehub's kernels run on). Prints one JSON line per
model and writes the models into --out for `tunehub-bench network`.

    /tmp/onnxpeer/bin/python bench/onnx_peer.py --out bench-out/onnx --threads 2
"""

import argparse
import json
import math
import os
import statistics
import time

import numpy as np
import torch
import torch.nn as nn


class BertLayer(nn.Module):
    """BERT-base's encoder layer: self-attention, residual, post layer norm, FFN with GELU."""

    def __init__(self, hidden=768, heads=12, ffn=3072):
        super().__init__()
        self.h, self.d = heads, hidden // heads
        self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.o = nn.Linear(hidden, hidden)
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.f1, self.f2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
        self.act = nn.GELU()

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.h, self.d).transpose(1, 2)

    def forward(self, x, mask):
        b, s, hid = x.shape
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d) + mask
        ctx = torch.matmul(att.softmax(-1), v).transpose(1, 2).reshape(b, s, hid)
        h = self.ln1(self.o(ctx) + x)
        return self.ln2(self.f2(self.act(self.f1(h))) + h)


class Gpt2Step(nn.Module):
    """GPT-2 (small)'s decoder layer for one new token, keys and values of earlier ones given."""

    def __init__(self, hidden=768, heads=12, ffn=3072):
        super().__init__()
        self.h, self.d = heads, hidden // heads
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.o = nn.Linear(hidden, hidden)
        self.f1, self.f2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
        self.act = nn.GELU(approximate="tanh")

    def split(self, x):
        return x.view(1, 1, self.h, self.d).transpose(1, 2)

    def forward(self, x, past_k, past_v):
        h = self.ln1(x)
        q, k, v = self.split(self.q(h)), self.split(self.k(h)), self.split(self.v(h))
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        att = (torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d)).softmax(-1)
        ctx = torch.matmul(att, v).transpose(1, 2).reshape(1, 1, self.h * self.d)
        a = self.o(ctx) + x
        return self.f2(self.act(self.f1(self.ln2(a)))) + a


def models():
    import torchvision

    past = 127
    return {
        "resnet18": (torchvision.models.resnet18(weights=None), (torch.randn(1, 3, 224, 224),),
                     ["input"]),
        "mobilenet_v2": (torchvision.models.mobilenet_v2(weights=None),
                         (torch.randn(1, 3, 224, 224),), ["input"]),
        "bert_layer": (BertLayer(), (torch.randn(1, 128, 768), torch.zeros(1, 1, 1, 128)),
                       ["hidden", "mask"]),
        "gpt2_step": (Gpt2Step(), (torch.randn(1, 1, 768), torch.randn(1, 12, past, 64),
                                   torch.randn(1, 12, past, 64)),
                      ["hidden", "past_key", "past_value"]),
    }


def export(name, model, args, names, path):
    model.eval()
    kw = dict(input_names=names, output_names=["output"], opset_version=17)
    with torch.no_grad():
        try:
            # The TorchScript exporter folds batch norm into the convolutions (eval mode).
            torch.onnx.export(model, args, path, dynamo=False, **kw)
        except (TypeError, RuntimeError):
            torch.onnx.export(model, args, path, **kw)


def latency_ms(path, args, threads, runs, warmup):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return statistics.median(times), times[len(times) // 10]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="bench-out/onnx")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--models", default="resnet18,mobilenet_v2,bert_layer,gpt2_step")
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--export-only", action="store_true")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    all_models = models()
    for name in a.models.split(","):
        model, args, names = all_models[name]
        path = os.path.join(a.out, f"{name}.onnx")
        export(name, model, args, names, path)
        row = {"model": name, "file": path, "threads": a.threads}
        if not a.export_only:
            med, p10 = latency_ms(path, args, a.threads, a.runs, a.warmup)
            row.update({"ort_ms": round(med, 4), "ort_ms_p10": round(p10, 4),
                        "runs": a.runs})
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    np.random.seed(0)
    main()
