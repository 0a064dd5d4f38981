"""Small ONNX models written as protobuf bytes by hand, so that the tests of `submit_model` need
no ONNX package (the client has no ONNX import: the server extracts the tasks).

Only the fields the server's extraction reads are written (onnx.proto's numbers): ModelProto
ir_version 1, graph 7, opset_import 8; GraphProto node 1, name 2, initializer 5, input 11,
output 12; NodeProto input 1, output 2, name 3, op_type 4; TensorProto dims 1, data_type 2,
name 8, raw_data 9; ValueInfoProto name 1, type 2; TypeProto tensor_type 1; its Tensor
elem_type 1, shape 2; TensorShapeProto dim 1; Dimension dim_value 1, dim_param 2.
"""

from __future__ import annotations

import struct


def weight_values(n: int) -> list[float]:
    """The values of a filled weight of `n` elements: small, varied, exact in float32."""
    return [((i * 37) % 17 - 8) / 16 for i in range(n)]

FLOAT = 1


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _int(field: int, v: int) -> bytes:
    return _varint(field << 3) + _varint(v)


def _len(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _str(field: int, s: str) -> bytes:
    return _len(field, s.encode())


def _value_info(name: str, dims: list[int | str] | None) -> bytes:
    tensor = _int(1, FLOAT)
    if dims is not None:
        shape = b"".join(_len(1, _str(2, d) if isinstance(d, str) else _int(1, d)) for d in dims)
        tensor += _len(2, shape)
    return _str(1, name) + _len(2, _len(1, tensor))


class Model:
    """A graph built node by node: `input`, `weight` (zeros), `node`, `output`, then `encode`."""

    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.inits: list[bytes] = []
        self.inputs: list[bytes] = []
        self.outputs: list[bytes] = []
        self.count = 0
        self.node_names: list[str] = []

    def input(self, name: str, dims: list[int | str]) -> str:
        """A graph input; a str dimension is dynamic (a dim_param of that name)."""
        self.inputs.append(_value_info(name, dims))
        return name

    def weight(self, dims: list[int], filled: bool = False) -> str:
        """A float initializer: zeros, or with `filled` the values `weight_values(n)`."""
        self.count += 1
        name = f"w{self.count}"
        n = 1
        for d in dims:
            n *= d
        tensor = b"".join(_int(1, d) for d in dims) + _int(2, FLOAT) + _str(8, name)
        raw = struct.pack(f"<{n}f", *weight_values(n)) if filled else bytes(4 * n)
        self.inits.append(tensor + _len(9, raw))
        return name

    def node(self, op: str, *inputs: str) -> str:
        self.count += 1
        out, name = f"t{self.count}", f"{op}_{self.count}"
        self.node_names.append(name)
        self.nodes.append(
            b"".join(_str(1, i) for i in inputs) + _str(2, out) + _str(3, name) + _str(4, op)
        )
        return out

    def output(self, name: str) -> None:
        self.outputs.append(_value_info(name, None))

    def encode(self) -> bytes:
        graph = (
            b"".join(_len(1, n) for n in self.nodes)
            + _str(2, "python-tests")
            + b"".join(_len(5, t) for t in self.inits)
            + b"".join(_len(11, i) for i in self.inputs)
            + b"".join(_len(12, o) for o in self.outputs)
        )
        opset = _int(2, 17)
        return _int(1, 8) + _len(7, graph) + _len(8, opset)


def two_dense(batch: int | str = 1, n: int = 16, filled: bool = False) -> bytes:
    """x[batch, n] -> MatMul -> Relu -> MatMul -> Relu: two occurrences of one task (weights
    `weight_values(n * n)` each with `filled`, else zeros)."""
    m = Model()
    h = m.input("x", [batch, n])
    for _ in range(2):
        h = m.node("Relu", m.node("MatMul", h, m.weight([n, n], filled)))
    m.output(h)
    return m.encode()


def with_unsupported() -> tuple[bytes, str]:
    """A MatMul, then Sin (unsupported): the model and the Sin node's name."""
    m = Model()
    h = m.node("MatMul", m.input("x", [1, 8]), m.weight([8, 8]))
    s = m.node("Sin", h)
    m.output(s)
    return m.encode(), m.node_names[-1]
