"""A VGG-style CNN that none of the benchmark's named models is, for checking that a gain is
not tuned to the four (issue 60): 3x3 stride-1 convolutions with batch norm and relu on 96x96,
48x48, 24x24 and 12x12 maps (24, 48, 96, 192 channels, two convolutions each), 2x2 max pools
between, a global pool and a 10-way classifier. Random weights, seeded.

    python bench/vgg_model.py vgg.onnx     # needs numpy and onnx
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)
nodes, weights = [], []


def constant(name, values):
    weights.append(numpy_helper.from_array(values.astype(np.float32), name))
    return name


def conv_bn_relu(x, c, f, i):
    """Conv (He-scaled weights), BatchNormalization (scales near 1), Relu."""
    w = constant(f"w{i}", rng.standard_normal([f, c, 3, 3]) * (2.0 / (9 * c)) ** 0.5)
    conv = f"c{i}"
    nodes.append(
        helper.make_node("Conv", [x, w], [conv], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    )
    bn = [
        constant(f"s{i}", 1 + rng.standard_normal(f) * 0.1),
        constant(f"b{i}", rng.standard_normal(f) * 0.1),
        constant(f"m{i}", rng.standard_normal(f) * 0.1),
        constant(f"v{i}", 0.5 + rng.random(f)),
    ]
    nodes.append(helper.make_node("BatchNormalization", [conv, *bn], [conv + "bn"], epsilon=1e-5))
    nodes.append(helper.make_node("Relu", [conv + "bn"], [conv + "r"]))
    return conv + "r"


def model():
    x, c, i = "image", 3, 0
    for f in [24, 48, 96, 192]:
        for _ in range(2):
            x = conv_bn_relu(x, c, f, i)
            c, i = f, i + 1
        if f != 192:
            nodes.append(
                helper.make_node("MaxPool", [x], [x + "p"], kernel_shape=[2, 2], strides=[2, 2])
            )
            x += "p"
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["g"]))
    nodes.append(helper.make_node("Flatten", ["g"], ["fl"]))
    fc = constant("fc", rng.standard_normal([10, 192]) * 0.05)
    fcb = constant("fcb", rng.standard_normal([10]) * 0.05)
    nodes.append(helper.make_node("Gemm", ["fl", fc, fcb], ["logits"], transB=1))
    graph = helper.make_graph(
        nodes,
        "vgg",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 96, 96])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        weights,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    return m


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: vgg_model.py OUT.onnx")
    onnx.save(model(), sys.argv[1])
