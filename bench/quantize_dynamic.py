"""Quantize an f32 ONNX model dynamically, as issue 62's `MatMulInteger` / `ConvInteger`
figures do: onnxruntime.quantization's `quant_pre_process` (shape inference, batch norms
folded), then `quantize_dynamic` with i8 weights (symmetric, per tensor; `--per-channel` for
one scale per output channel) on its convolutions and matrix products. Activations are
quantized at run time by `DynamicQuantizeLinear` nodes: no calibration.

    /tmp/ortvenv/bin/python bench/quantize_dynamic.py MODEL.onnx MODEL_dq.onnx [--per-channel]
"""

import argparse
import os
import tempfile

from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxruntime.quantization.shape_inference import quant_pre_process


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--per-channel", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pre = os.path.join(tmp, "pre.onnx")
        quant_pre_process(a.model, pre)
        quantize_dynamic(
            pre,
            a.out,
            weight_type=QuantType.QInt8,
            per_channel=a.per_channel,
            op_types_to_quantize=["Conv", "MatMul"],
        )
    print(a.out)


if __name__ == "__main__":
    main()
