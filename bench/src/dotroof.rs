//! The int8 roof: 8-bit multiply-adds per second of the dot-product instruction the integer
//! kernels use (`vpdpbusd`, `codegen::dot`), beside the f32 FMA rate, both measured by one
//! probe compiled as the kernels are and run on the kernels' threads: machine-check's FMA
//! probe, with the instruction in the FMA's place. Independent chains, more than the
//! instruction's latency times its pipes, from operands the compiler cannot fold.

use crate::cprobe::CProbe;
use anyhow::{Result, bail};
use tunehub_engine::target::Target;

const PROBE_C: &str = r#"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#include <immintrin.h>
#define VB 64
#define DOT(acc, a, b) ((vi)_mm512_dpbusd_epi32((__m512i)(acc), (__m512i)(a), (__m512i)(b)))
#elif defined(__AVXVNNI__)
#include <immintrin.h>
#define VB 32
#define DOT(acc, a, b) ((vi)_mm256_dpbusd_avx_epi32((__m256i)(acc), (__m256i)(a), (__m256i)(b)))
#endif
#if defined(__AVX512F__)
#define FB 64
#else
#define FB 32
#endif
#define NACC 16
#define BLOCK 4096L
typedef float vf __attribute__((vector_size(FB)));
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static volatile int seed = 1;
static volatile float fseed = 1.0f;
static volatile long sink;

__attribute__((noinline)) static float fma_block(void) {
  const float s = fseed;
  const vf va = (vf){0} + 0.999999f * s, vb = (vf){0} + 0.001f * s;
  vf acc[NACC];
  for (int j = 0; j < NACC; j++) acc[j] = (vf){0} + s * (float)j;
  for (long i = 0; i < BLOCK; i++)
#pragma GCC unroll 16
    for (int j = 0; j < NACC; j++) acc[j] = acc[j] * va + vb;
  float r = 0;
  for (int j = 0; j < NACC; j++) r += acc[j][0];
  return r;
}

#ifdef VB
typedef int vi __attribute__((vector_size(VB)));
__attribute__((noinline)) static long dot_block(void) {
  const vi a = (vi){0} + seed * 0x01020304, b = (vi){0} + seed * 0x05060708;
  vi acc[NACC];
  for (int j = 0; j < NACC; j++) acc[j] = (vi){0} + j;
  for (long i = 0; i < BLOCK; i++)
#pragma GCC unroll 16
    for (int j = 0; j < NACC; j++) acc[j] = DOT(acc[j], a, b);
  long r = 0;
  for (int j = 0; j < NACC; j++) r += acc[j][0];
  return r;
}
#endif

/* Operations per second on all threads for about 200 ms (a multiply-add is 2). */
static double rate(int th, int dot) {
  long blocks = 0;
  double t0 = now(), deadline = t0 + 0.2;
#pragma omp parallel num_threads(th) reduction(+ : blocks)
  {
    long s = 0;
    do {
#ifdef VB
      if (dot) s += dot_block(); else
#endif
      s += (long)fma_block();
      blocks++;
    } while (now() < deadline);
    sink += s;
  }
  double t = now() - t0;
  double per_block = dot ?
#ifdef VB
    (double)BLOCK * NACC * VB * 2.0
#else
    0.0
#endif
    : (double)BLOCK * NACC * (FB / 4) * 2.0;
  return blocks * per_block / t;
}

/* argv: threads. Prints `fma <op/s>` and `dot <op/s>` (0 without the instruction), best of 5. */
int main(int argc, char** argv) {
  int th = atoi(argv[1]);
  for (int dot = 0; dot < 2; dot++) {
    double best = 0;
    rate(th, dot);
    for (int k = 0; k < 5; k++) { double r = rate(th, dot); if (r > best) best = r; }
    printf("%s %.6e\n", dot ? "dot" : "fma", best);
  }
  return 0;
}
"#;

/// The f32 FMA rate and the 8-bit dot-product rate of the kernels' threads, in operations per
/// second (a multiply-add is 2); `dot` is 0 where the target has no such instruction.
#[derive(Debug, Clone, Copy)]
pub struct DotRoof {
    pub fma: f64,
    pub dot: f64,
}

impl DotRoof {
    pub fn measure(target: &Target) -> Result<DotRoof> {
        let out = CProbe::compile(target, "the int8 probe", PROBE_C)?.run(&[])?;
        let get = |name: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
        };
        match (get("fma "), get("dot ")) {
            (Some(fma), Some(dot)) => Ok(DotRoof { fma, dot }),
            _ => bail!("the int8 probe printed {out:?}"),
        }
    }
}
