#!/usr/bin/env python3
"""Hand kernels of a depthwise convolution on a small map, its rows packed into AVX-512's 16
lanes, in the ways a window's taps can be read (docs/experiments/2026-12-05-anchors.md).

Prints a C file defining `hand_kernel(data, kernel, out)` (kernel in [c][ky][kx] order) for
`depthwise_harness.c`:

    python3 bench/hand/depthwise_taps.py shift-mfma > k.c
    gcc -O3 -march=native -fopenmp -DNT=1 -DKERNEL_FILE='"k.c"' -DNAME='"shift-mfma"' \\
        bench/hand/depthwise_harness.c -o k && ./k

Modes (per window row, the vectors its taps read loaded once: the "anchors"):
- `shift-mfma`: each tap `valignd` of two anchors, its padding in a masked FMA;
- `shift-malign`: the padding in a zeroing masked `valignd`, a plain FMA;
- `shift-mmov`: the padding in a zeroing masked move, a plain FMA;
- `mix:COLS`: as `shift-mfma`, but the window columns `kx` in COLS (from 0; `2,4`: the third
  and fifth) read by a masked load and a plain FMA instead of shifted.
"""
import argparse

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("mode")
ap.add_argument("--c", type=int, default=240)
ap.add_argument("--h", type=int, default=7)
ap.add_argument("--w", type=int, default=7)
ap.add_argument("--k", type=int, default=5)
a = ap.parse_args()
C, H, W, K = a.c, a.h, a.w, a.k
P = (K - 1) // 2
n = H * W
nv = (n + 15) // 16
loaded = set(int(x) for x in a.mode.split(":")[1].split(",")) if a.mode.startswith("mix:") else set()


def mask(v, dy, dx):
    """The lanes of output vector v whose tap (dy, dx) is in the map."""
    m = 0
    for l in range(16):
        p = 16 * v + l
        if p < n and 0 <= p // W + dy < H and 0 <= p % W + dx < W:
            m |= 1 << l
    return m


def align(hi, lo, s, m=None):
    cast = "_mm512_castps_si512"
    if m is None:
        return f"_mm512_castsi512_ps(_mm512_alignr_epi32({cast}({hi}), {cast}({lo}), {s}))"
    return f"_mm512_castsi512_ps(_mm512_maskz_alignr_epi32({m}u, {cast}({hi}), {cast}({lo}), {s}))"


out = ["#include <immintrin.h>",
       "void hand_kernel(const float* restrict d, const float* restrict k, float* restrict o) {",
       "  #pragma omp parallel for num_threads(NT)",
       f"  for (int c = 0; c < {C}; c++) {{",
       f"    const float* b = d + c * {n};"]
out += [f"    __m512 acc{v} = _mm512_setzero_ps();" for v in range(nv)]
for ky in range(K):
    dy = ky - P
    out.append("    {")
    for j in range(nv + 1):
        base = W * dy - P + 16 * j
        am = sum(1 << l for l in range(16) if 0 <= base + l < n)
        load = f"_mm512_maskz_loadu_ps({am}u, b + {base})" if am else "_mm512_setzero_ps()"
        out.append(f"      __m512 L{j} = {load};")
    for kx in range(K):
        dx = kx - P
        out.append(f"      {{ __m512 w = _mm512_set1_ps(k[c * {K * K} + {ky * K + kx}]);")
        for v in range(nv):
            m = mask(v, dy, dx)
            if not m:
                continue  # every lane padding: no update
            src = f"L{v}" if kx == 0 else align(f"L{v + 1}", f"L{v}", kx)
            if kx in loaded:
                upd = f"_mm512_fmadd_ps(_mm512_maskz_loadu_ps({m}u, b + {16 * v + W * dy + dx}), w, acc{v})"
            elif a.mode in ("shift-mfma",) or a.mode.startswith("mix:"):
                upd = f"_mm512_mask3_fmadd_ps({src}, w, acc{v}, {m}u)"
            elif a.mode == "shift-malign":
                s = f"_mm512_maskz_mov_ps({m}u, L{v})" if kx == 0 else align(f"L{v + 1}", f"L{v}", kx, m)
                upd = f"_mm512_fmadd_ps({s}, w, acc{v})"
            elif a.mode == "shift-mmov":
                upd = f"_mm512_fmadd_ps(_mm512_maskz_mov_ps({m}u, {src}), w, acc{v})"
            else:
                raise SystemExit(f"unknown mode {a.mode}")
            out.append(f"        acc{v} = {upd};")
        out.append("      }")
    out.append("    }")
for v in range(nv):
    used = min(16, n - 16 * v)
    out.append(f"    _mm512_mask_storeu_ps(o + c * {n} + {16 * v}, {(1 << used) - 1}u, acc{v});")
out += ["  }", "}"]
print("\n".join(out))
