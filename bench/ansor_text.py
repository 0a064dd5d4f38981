#!/usr/bin/env python3
"""Ansor on the bench's two text-form workloads, which `../shared/peers/ansor.py` does not take.

`tunehub-bench search` names them `layernorm` and `bias_gelu` (bench/src/search.rs holds their
text forms). This script adds the same two computations in TE to ansor.py's op table and runs
ansor.py's own `main`, so the tuning, the re-measurement and the printed JSON are the peer's:

    TVM_NUM_THREADS=2 /tmp/peer/bin/python bench/ansor_text.py 'layer_norm(m=128,n=768)' --trials 200
    TVM_NUM_THREADS=2 /tmp/peer/bin/python bench/ansor_text.py 'bias_gelu(m=128,n=3072)' --trials 200

Set-up: ansor.py's docstring (TVM 0.19 from PyPI). `ANSOR_PY` names ansor.py if it is not at
`../shared/peers/ansor.py` beside the repository.
"""
import importlib.util
import os
import sys

from tvm import auto_scheduler, te

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.environ.get("ANSOR_PY", os.path.join(HERE, "..", "..", "shared", "peers", "ansor.py"))
found = importlib.util.spec_from_file_location("ansor", PATH)
ansor = importlib.util.module_from_spec(found)
found.loader.exec_module(ansor)

ansor.P["layer_norm"] = [("m", None), ("n", None)]
ansor.P["bias_gelu"] = [("m", None), ("n", None)]
library_workload = ansor.workload


@auto_scheduler.register_workload
def text_workload(spec, layout_free):
    name, p = ansor.parse(spec)
    if name == "layer_norm":
        m, n = p["m"], p["n"]
        # As the bench's text form: mean, centre, variance, then scale and shift (eps 1e-5).
        x = te.placeholder((m, n), name="X")
        g = te.placeholder((n,), name="G")
        b = te.placeholder((n,), name="B")
        k = te.reduce_axis((0, n), name="k")
        s = te.compute((m,), lambda i: te.sum(x[i, k], axis=k), name="S")
        d = te.compute((m, n), lambda i, j: x[i, j] - s[i] * (1.0 / n), name="D")
        k2 = te.reduce_axis((0, n), name="k2")
        v = te.compute((m,), lambda i: te.sum(d[i, k2] * d[i, k2], axis=k2), name="V")
        y = te.compute((m, n), lambda i, j: d[i, j] * te.rsqrt(v[i] * (1.0 / n) + 1e-5) * g[j] + b[j],
                       name="Y")
        return [x, g, b, y]
    if name == "bias_gelu":
        m, n = p["m"], p["n"]
        a = te.placeholder((m, n), name="A")
        bias = te.placeholder((n,), name="Bias")
        t = te.compute((m, n), lambda i, j: a[i, j] + bias[j], name="T")
        y = te.compute((m, n), lambda i, j: 0.5 * t[i, j] * (1.0 + te.tanh(
            0.7978845608028654 * (t[i, j] + 0.044715 * t[i, j] * t[i, j] * t[i, j]))), name="Y")
        return [a, bias, y]
    return library_workload(spec, layout_free)


ansor.workload = text_workload

if __name__ == "__main__":
    sys.exit(ansor.main())
