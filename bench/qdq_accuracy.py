"""A built quantized model's accuracy against ONNX Runtime running the same QDQ file: issue
62's figure (top-1 agreement over random inputs, the largest absolute difference of the
logits), beside the f32 model's own distance from the quantized one for scale.

    PYTHONPATH=clients/python /tmp/ortvenv/bin/python bench/qdq_accuracy.py \
        BUILT_DIR QDQ.onnx [--f32 F32.onnx] --inputs 100

Inputs are uniform in [-1, 1) from `--seed`, one model input, its last output the logits
(rows of the first axis). Prints one JSON line.
"""

import argparse
import json

import numpy as np
import onnxruntime as ort
from tunehub.model import Model


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("built")
    ap.add_argument("qdq")
    ap.add_argument("--f32", help="the f32 model it was quantized from")
    ap.add_argument("--inputs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    ours = Model(a.built)
    ref = session(a.qdq)
    f32 = session(a.f32) if a.f32 else None
    inp = ref.get_inputs()[0]
    rng = np.random.default_rng(a.seed)
    agree = agree_f32 = 0
    worst = worst_f32 = 0.0
    scale = 0.0
    for _ in range(a.inputs):
        x = rng.uniform(-1, 1, size=inp.shape).astype(np.float32)
        want = ref.run(None, {inp.name: x})[-1]
        got = list(ours({inp.name: x}).values())[-1].reshape(want.shape)
        agree += int(np.all(want.argmax(-1) == got.argmax(-1)))
        worst = max(worst, float(np.abs(want - got).max()))
        scale = max(scale, float(np.abs(want).max()))
        if f32 is not None:
            full = f32.run(None, {inp.name: x})[-1]
            agree_f32 += int(np.all(want.argmax(-1) == full.argmax(-1)))
            worst_f32 = max(worst_f32, float(np.abs(want - full).max()))
    out = {
        "inputs": a.inputs,
        "top1_agreement": agree / a.inputs,
        "max_abs_logit_diff": worst,
        "max_abs_logit": scale,
        "onnxruntime": ort.__version__,
    }
    if f32 is not None:
        out["f32_top1_agreement_with_ort_int8"] = agree_f32 / a.inputs
        out["f32_max_abs_logit_diff_from_ort_int8"] = worst_f32
    print(json.dumps(out))


if __name__ == "__main__":
    main()
