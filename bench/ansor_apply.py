#!/usr/bin/env python3
"""TVM's auto_scheduler (Ansor, TVM 0.19) applies the records of `tunehub records export --format ansor`.

For every workload in FILE: ApplyHistoryBest loads the file, its query gives the best state
for the record's target, the ComputeDAG of the registered TE definition applies it, tvm.build
builds it, and the kernel's output is compared with numpy on random inputs.

The TE definitions below are the ones the export targets; a TVM user registers the same:
`tunehub.<op>(params..., layout_free)`, the operator's parameters in tunehub's order with
every default written out (`tunehub ops`), then the layout-free inputs joined by ","
("" for none). Each builds tunehub's stages in tunehub's order: a padding stage only when
pad > 0, bias of shape [channels], bias and relu as one stage. The layout_free argument only
tells apart records measured with packed weights; the definitions mark no
layout_free_placeholders, so TVM builds them on the original layouts: TVM's layout rewrite
(INSERT_TRANSFORM_STAGE) computes wrong results for some tile orders tunehub's search makes
(outer tiles reordered, j before i), seen on matmul and conv2d_nchw records.

Set-up (PyPI only, as ../shared/peers/ansor.py): /tmp/peer/bin/python with TVM 0.19.
Run:     /tmp/peer/bin/python bench/ansor_apply.py FILE [--all]
Also:    --order SPEC...   prints Ansor's stage order of the definitions (what tunehub maps to)
         --tune SPEC --trials N --log OUT   writes a genuine Ansor log of a definition
"""
import argparse, json, os, sys, time
import numpy as np
import tvm
from tvm import auto_scheduler, te

PARAMS = {
    "matmul": ["m", "n", "k"],
    "batch_matmul": ["b", "m", "n", "k"],
    "dense": ["m", "n", "k", "bias", "relu"],
    "conv2d_nchw": ["n", "c", "h", "w", "f", "kh", "kw", "stride", "pad", "dilation", "bias", "relu"],
    "conv2d_nhwc": ["n", "h", "w", "c", "f", "kh", "kw", "stride", "pad", "dilation", "bias", "relu"],
    "depthwise_conv2d_nchw": ["n", "c", "h", "w", "kh", "kw", "stride", "pad", "dilation", "bias", "relu"],
}


def _epilogue(y, fdim, bias, relu, ins):
    if not bias and not relu:
        return y
    b = None
    if bias:
        b = te.placeholder((int(y.shape[fdim]),), name="bias")
        ins.append(b)
    zero = tvm.tir.const(0.0, "float32")

    def body(*ax):
        e = y(*ax)
        if b is not None:
            e = e + b[ax[fdim]]
        return te.max(e, zero) if relu else e

    name = "bias_relu" if bias and relu else ("bias_add" if bias else "relu")
    return te.compute(y.shape, body, name=name)


def _pad(x, hd, wd, pad):
    if pad == 0:
        return x
    shape = list(x.shape)
    h, w = int(shape[hd]), int(shape[wd])
    shape[hd] = h + 2 * pad
    shape[wd] = w + 2 * pad

    def body(*ax):
        idx = list(ax)
        idx[hd] = ax[hd] - pad
        idx[wd] = ax[wd] - pad
        ok = te.all(ax[hd] >= pad, ax[hd] < h + pad, ax[wd] >= pad, ax[wd] < w + pad)
        return te.if_then_else(ok, x(*idx), tvm.tir.const(0.0, "float32"))

    return te.compute(shape, body, name="pad")


def _out(i, k, s, p, d):
    return (i + 2 * p - d * (k - 1) - 1) // s + 1


def matmul(m, n, k, layout_free):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return [A, B, C]


def batch_matmul(b, m, n, k, layout_free):
    A = te.placeholder((b, m, k), name="A")
    B = te.placeholder((b, k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((b, m, n), lambda z, i, j: te.sum(A[z, i, r] * B[z, r, j], axis=r), name="C")
    return [A, B, C]


def dense(m, n, k, bias, relu, layout_free):
    X = te.placeholder((m, k), name="data")
    W = te.placeholder((n, k), name="weight")
    r = te.reduce_axis((0, k), name="k")
    Y = te.compute((m, n), lambda i, j: te.sum(X[i, r] * W[j, r], axis=r), name="dense")
    ins = [X, W]
    out = _epilogue(Y, 1, bias, relu, ins)
    return ins + [out]


def conv2d_nchw(n, c, h, w, f, kh, kw, stride, pad, dilation, bias, relu, layout_free):
    D = te.placeholder((n, c, h, w), name="data")
    K = te.placeholder((f, c, kh, kw), name="kernel")
    src = _pad(D, 2, 3, pad)
    oh, ow = _out(h, kh, stride, pad, dilation), _out(w, kw, stride, pad, dilation)
    rc = te.reduce_axis((0, c), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    Y = te.compute((n, f, oh, ow), lambda nn, ff, yy, xx: te.sum(
        src[nn, rc, yy * stride + ry * dilation, xx * stride + rx * dilation] * K[ff, rc, ry, rx],
        axis=[rc, ry, rx]), name="conv")
    ins = [D, K]
    out = _epilogue(Y, 1, bias, relu, ins)
    return ins + [out]


def conv2d_nhwc(n, h, w, c, f, kh, kw, stride, pad, dilation, bias, relu, layout_free):
    D = te.placeholder((n, h, w, c), name="data")
    K = te.placeholder((kh, kw, c, f), name="kernel")
    src = _pad(D, 1, 2, pad)
    oh, ow = _out(h, kh, stride, pad, dilation), _out(w, kw, stride, pad, dilation)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rc = te.reduce_axis((0, c), name="rc")
    Y = te.compute((n, oh, ow, f), lambda nn, yy, xx, ff: te.sum(
        src[nn, yy * stride + ry * dilation, xx * stride + rx * dilation, rc] * K[ry, rx, rc, ff],
        axis=[ry, rx, rc]), name="conv")
    ins = [D, K]
    out = _epilogue(Y, 3, bias, relu, ins)
    return ins + [out]


def depthwise_conv2d_nchw(n, c, h, w, kh, kw, stride, pad, dilation, bias, relu, layout_free):
    D = te.placeholder((n, c, h, w), name="data")
    K = te.placeholder((c, 1, kh, kw), name="kernel")
    src = _pad(D, 2, 3, pad)
    oh, ow = _out(h, kh, stride, pad, dilation), _out(w, kw, stride, pad, dilation)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    Y = te.compute((n, c, oh, ow), lambda nn, cc, yy, xx: te.sum(
        src[nn, cc, yy * stride + ry * dilation, xx * stride + rx * dilation] * K[cc, 0, ry, rx],
        axis=[ry, rx]), name="depthwise")
    ins = [D, K]
    out = _epilogue(Y, 1, bias, relu, ins)
    return ins + [out]


DEFS = {f.__name__: f for f in [matmul, batch_matmul, dense, conv2d_nchw, conv2d_nhwc, depthwise_conv2d_nchw]}
for _name, _f in DEFS.items():
    auto_scheduler.register_workload("tunehub." + _name, f=_f)


# numpy references, in float64
def _conv_ref(x, k, p, nhwc, depthwise):
    s, pad, d = p["stride"], p["pad"], p["dilation"]
    if nhwc:
        xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
        h, w = x.shape[1], x.shape[2]
    else:
        xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        h, w = x.shape[2], x.shape[3]
    oh, ow = _out(h, p["kh"], s, pad, d), _out(w, p["kw"], s, pad, d)
    out = None
    for ry in range(p["kh"]):
        for rx in range(p["kw"]):
            ys = slice(ry * d, ry * d + s * (oh - 1) + 1, s)
            xs = slice(rx * d, rx * d + s * (ow - 1) + 1, s)
            if nhwc:
                t = np.einsum("nyxc,cf->nyxf", xp[:, ys, xs, :], k[ry, rx])
            elif depthwise:
                t = xp[:, :, ys, xs] * k[:, 0, ry, rx][None, :, None, None]
            else:
                t = np.einsum("ncyx,fc->nfyx", xp[:, :, ys, xs], k[:, :, ry, rx])
            out = t if out is None else out + t
    return out


def reference(op, p, ins):
    x = [a.astype(np.float64) for a in ins]
    if op == "matmul":
        return x[0] @ x[1]
    if op == "batch_matmul":
        return np.matmul(x[0], x[1])
    if op == "dense":
        y, fdim = x[0] @ x[1].T, 1
    else:
        y = _conv_ref(x[0], x[1], p, op == "conv2d_nhwc", op == "depthwise_conv2d_nchw")
        fdim = 3 if op == "conv2d_nhwc" else 1
    if p["bias"]:
        shape = [1] * y.ndim
        shape[fdim] = -1
        y = y + x[2].reshape(shape)
    if p["relu"]:
        y = np.maximum(y, 0)
    return y


def build_and_compare(task, state, op, p):
    """Builds `state` of `task` with tvm.build; its output's largest difference from numpy."""
    sch, args = task.compute_dag.apply_steps_from_state(state)
    func = tvm.build(sch, args, task.target)
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    ins = [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32") for t in args[:-1]]
    out = tvm.nd.array(np.zeros([int(d) for d in args[-1].shape], "float32"), dev)
    func(*[tvm.nd.array(a, dev) for a in ins], out)
    return float(np.max(np.abs(out.numpy() - reference(op, p, ins))))


def check_file(path, every):
    records = list(auto_scheduler.load_records(path))
    keys = {}
    for inp, res in records:
        keys.setdefault(inp.task.workload_key, inp.task.target)
    print(f"{path}: {len(records)} records, {len(keys)} workloads")
    ctx = auto_scheduler.ApplyHistoryBest(path)
    worst = 0.0
    for key, target in keys.items():
        wl = json.loads(key)
        op = wl[0].split(".", 1)[1]
        p = dict(zip(PARAMS[op], wl[1:-1]))
        task = auto_scheduler.SearchTask(workload_key=key, target=target)
        state = ctx.query(target, key, True, task.compute_dag, wl[0])
        if state is None:
            print(f"  {key}: ApplyHistoryBest has no best state")
            return 1
        t0 = time.time()
        err = build_and_compare(task, state, op, p)
        build_s = time.time() - t0
        worst = max(worst, err)
        steps = len(state.transform_steps)
        print(f"  {key}: best of the file applied ({steps} steps), built and run in {build_s:.2f} s, "
              f"max |tvm - numpy| = {err:.2e}")
    if every:
        errs = [build_and_compare(auto_scheduler.SearchTask(workload_key=inp.task.workload_key, target=inp.task.target),
                                  inp.state, json.loads(inp.task.workload_key)[0].split(".", 1)[1],
                                  dict(zip(PARAMS[json.loads(inp.task.workload_key)[0].split(".", 1)[1]],
                                           json.loads(inp.task.workload_key)[1:-1])))
                for inp, res in records]
        worst = max([worst] + errs)
        print(f"  every record built: {len(errs)}, max |tvm - numpy| = {max(errs):.2e}")
    ok = worst < 1e-3
    print(f"{'OK' if ok else 'MISMATCH'}: {len(keys)} workloads built from tunehub's records by TVM {tvm.__version__}")
    return 0 if ok else 1


def order(specs):
    for spec in specs:
        wl = json.loads(spec)
        tensors = DEFS[wl[0].split(".", 1)[1]](*wl[1:])
        dag = auto_scheduler.ComputeDAG(tensors)
        print(spec, [op.name for op in dag.ops])


def tune(spec, trials, log, target):
    task = auto_scheduler.SearchTask(workload_key=spec, target=tvm.target.Target(target))
    opt = auto_scheduler.TuningOptions(
        num_measure_trials=trials, num_measures_per_round=trials,
        runner=auto_scheduler.LocalRunner(number=1, repeat=1, min_repeat_ms=1, timeout=10),
        measure_callbacks=[auto_scheduler.RecordToFile(log)], verbose=0)
    # A small search: a log to read, not a tuned kernel.
    policy = auto_scheduler.SketchPolicy(task, params={
        "evolutionary_search_population": 16, "evolutionary_search_num_iters": 1,
        "sample_init_min_population": 8}, verbose=0)
    task.tune(opt, search_policy=policy)
    print(f"wrote {log}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="?")
    ap.add_argument("--order", nargs="+", metavar="KEY")
    ap.add_argument("--tune", metavar="KEY")
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--log")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--all", action="store_true", help="also build every record, not only the best")
    a = ap.parse_args()
    if a.order:
        order(a.order)
        return 0
    if a.tune:
        tune(a.tune, a.trials, a.log, a.target)
        return 0
    if not a.file:
        ap.error("FILE is required")
    return check_file(a.file, a.all)


if __name__ == "__main__":
    sys.exit(main())
