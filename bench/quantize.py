"""Quantize an f32 ONNX model as issue 62's figures do: onnxruntime.quantization's
`quant_pre_process` (shape inference, batch norms folded), then `quantize_static` with QDQ
nodes, per-channel i8 weights and u8 activations, calibrated on random inputs.

    /tmp/ortvenv/bin/python bench/quantize.py MODEL.onnx MODEL_pq.onnx [--calibration 4]
    /tmp/ortvenv/bin/python bench/quantize.py --dynamic MODEL.onnx MODEL_dq.onnx

Calibration inputs are uniform in [-1, 1) from a fixed seed (0), the same inputs
`bench/qdq_accuracy.py` draws from, so the quantized file is the same on every run.

With `--dynamic`, `quantize_dynamic` instead (after the same pre-processing): i8 weights
(symmetric, per tensor) on the convolutions and matrix products, activations quantized at
run time by `DynamicQuantizeLinear` (`MatMulInteger` / `ConvInteger`); no calibration.
"""

import argparse
import os
import tempfile

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process


class RandomInputs(CalibrationDataReader):
    def __init__(self, model, count):
        inp = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).get_inputs()[0]
        rng = np.random.default_rng(0)
        self.batches = iter(
            [{inp.name: rng.uniform(-1, 1, size=inp.shape).astype(np.float32)} for _ in range(count)]
        )

    def get_next(self):
        return next(self.batches, None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--calibration", type=int, default=4)
    ap.add_argument("--dynamic", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pre = os.path.join(tmp, "pre.onnx")
        quant_pre_process(a.model, pre)
        if a.dynamic:
            quantize_dynamic(
                pre, a.out, weight_type=QuantType.QInt8, op_types_to_quantize=["Conv", "MatMul"]
            )
            print(a.out)
            return
        quantize_static(
            pre,
            a.out,
            RandomInputs(pre, a.calibration),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
        )
    print(a.out)


if __name__ == "__main__":
    main()
