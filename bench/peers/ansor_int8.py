#!/usr/bin/env python3
"""Ansor (TVM 0.19 auto_scheduler) on tunehub's integer operators (`dtype=u8i8` / `i8i8`), for
issue 62's side-by-side ratios. The same set-up as ../shared/peers/ansor.py (its venv, its
runner and re-measurement), with the integer computes TVM writes for quantized models: 8-bit
data and weights cast to int32 in the product, an int32 sum (TOPI's conv2d with
out_dtype="int32"). The weight is layout-free, as tunehub packs it by default.

    TVM_NUM_THREADS=2 /tmp/peer/bin/python bench/peers/ansor_int8.py \
        'matmul(512,512,512,dtype=u8i8)' --trials 200

Only matmul and conv2d_nhwc (the forms tunehub's dot tiles take). The last line printed is one
JSON object like ansor.py's; max_abs_err is against TVM's unscheduled build (integers: 0).
"""
import argparse, json, os, re, sys, time
import numpy as np
import tvm
from tvm import auto_scheduler, te, topi

TYPES = {"u8i8": ("uint8", "int8"), "i8i8": ("int8", "int8")}


def parse(spec):
    m = re.fullmatch(r"\s*(\w+)\s*\((.*)\)\s*", spec)
    if not m or m.group(1) not in ("matmul", "conv2d_nhwc"):
        sys.exit(f"unsupported spec {spec!r}: matmul or conv2d_nhwc with dtype=")
    name = m.group(1)
    order = {"matmul": ["m", "n", "k"], "conv2d_nhwc": ["n", "h", "w", "c", "f"]}[name]
    vals = {"kh": 3, "kw": 3, "stride": 1, "pad": 0, "dilation": 1, "dtype": "f32"}
    for pos, a in enumerate(x.strip() for x in m.group(2).split(",") if x.strip()):
        if "=" in a:
            k, v = (s.strip() for s in a.split("=", 1))
            if k != "layout_free":
                vals[k] = v if k == "dtype" else int(v)
        else:
            vals[order[pos]] = int(a)
    if vals["dtype"] not in TYPES:
        sys.exit(f"dtype must be one of {', '.join(TYPES)}")
    return name, vals


@auto_scheduler.register_workload
def workload(spec):
    name, p = parse(spec)
    dt, wt = TYPES[p["dtype"]]
    if name == "matmul":
        a = te.placeholder((p["m"], p["k"]), name="A", dtype=dt)
        b = te.placeholder((p["k"], p["n"]), name="B", dtype=wt)
        k = te.reduce_axis((0, p["k"]), name="k")
        c = te.compute((p["m"], p["n"]),
                       lambda i, j: te.sum(a[i, k].astype("int32") * b[k, j].astype("int32"), axis=k),
                       name="C", attrs={"layout_free_placeholders": [b]})
        return [a, b, c]
    d = te.placeholder((p["n"], p["h"], p["w"], p["c"]), name="data", dtype=dt)
    w = te.placeholder((p["kh"], p["kw"], p["c"], p["f"]), name="kernel", dtype=wt)
    y = topi.nn.conv2d_nhwc(d, w, p["stride"], p["pad"], p["dilation"], out_dtype="int32")
    return [d, w, y]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--per-round", type=int, default=64)
    a = ap.parse_args()
    threads = int(os.environ.get("TVM_NUM_THREADS", "0")) or os.cpu_count()
    os.environ["TVM_NUM_THREADS"] = str(threads)
    from tvm.target import codegen
    target = tvm.target.Target(f"llvm -mcpu={codegen.llvm_get_system_cpu()} -num-cores {threads}")
    dev = tvm.cpu(0)
    parse(a.spec)
    task = auto_scheduler.SearchTask(func=workload, args=(a.spec,), target=target)
    log = f"/tmp/ansor-int8-{os.getpid()}.json"
    opt = auto_scheduler.TuningOptions(
        num_measure_trials=a.trials, num_measures_per_round=a.per_round,
        runner=auto_scheduler.LocalRunner(number=3, repeat=1, min_repeat_ms=100, timeout=10),
        builder=auto_scheduler.LocalBuilder(n_parallel=threads, timeout=15),
        measure_callbacks=[auto_scheduler.RecordToFile(log)], verbose=0)
    t0 = time.time()
    task.tune(opt)
    wall = time.time() - t0
    sch, args = task.apply_best(log)
    func = tvm.build(sch, args, target)
    tensors = workload(a.spec)
    naive = tvm.build(te.create_schedule(tensors[-1].op), tensors, target)
    rng = np.random.default_rng(0)
    ins = []
    for t in tensors[:-1]:
        lo, hi = (0, 256) if t.dtype == "uint8" else (-128, 128)
        ins.append(tvm.nd.array(rng.integers(lo, hi, [int(d) for d in t.shape]).astype(t.dtype), dev))
    outs = [tvm.nd.array(np.zeros([int(d) for d in tensors[-1].shape], "int32"), dev) for _ in range(2)]
    func(*ins, outs[0]); naive(*ins, outs[1])
    err = int(np.max(np.abs(outs[0].numpy().astype(np.int64) - outs[1].numpy())))
    res = np.array(func.time_evaluator(func.entry_name, dev, number=10, repeat=15, min_repeat_ms=200)(*ins, outs[0]).results)
    ops = auto_scheduler.ComputeDAG(tensors).flop_ct
    best = float(res.min())
    print(json.dumps({"tool": "ansor", "tvm": tvm.__version__, "spec": a.spec, "target": str(target),
                      "threads": threads, "trials": a.trials, "tune_wall_s": round(wall, 1),
                      "best_ms": best * 1e3, "median_ms": float(np.median(res)) * 1e3,
                      "gops": ops / best / 1e9, "max_abs_err": err}))
    os.remove(log)


if __name__ == "__main__":
    main()
