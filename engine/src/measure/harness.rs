//! The C timing harness: a `main` compiled in the same translation unit as the kernel.
//!
//! The program is the kernel source followed by [`harness_source`] (kernel first, so compiler
//! messages about the kernel carry its own line numbers). The harness re-declares the kernel's
//! prototype from the [`ArgSpec`]s, so a kernel whose signature disagrees fails to compile.
//!
//! Command line: `number repeat min_repeat_ms warmup flush(0/1) out_path calib_ms`.
//! The program
//! 1. allocates every argument 64-byte aligned, fills inputs with the values of
//!    `data::input_typed` for their type (`tunehub_input_value` for f32) and outputs with NaN,
//!    or `INT32_MIN` for an i32 output (a value no sum of 8-bit products reaches): an element
//!    the kernel never writes keeps it and fails the check. Every value is one an 8-bit
//!    output may hold: such an output starts as values drawn from no input (the input data
//!    of stage `!stage`), so that an element never written differs from its reference by more
//!    than the check's one unit but for the 3 in 256 it lands near by chance;
//! 2. runs the kernel once and writes all outputs, in argument order, as raw native-endian
//!    (little-endian on every supported target) f64 to `out_path`: exact for f32 and i32;
//! 3. runs the FMA calibration loop for `calib_ms` on the OpenMP threads (prints
//!    `calib_before <GFLOP/s>`);
//! 4. runs `warmup` untimed runs, grows `number` (Ansor/TVM rule) until `number` runs last at
//!    least `min_repeat_ms`, then times `repeat` repeats of `number` runs, each optionally after
//!    a cache flush; without flushes the probe that reached `min_repeat_ms` is the first repeat
//!    (prints `number <n>` and `costs <s/run> ...`). A flush evicts every cache line of the
//!    kernel's arguments from every level (`clflush`, aarch64 `dc civac`), as Ansor's
//!    `enable_cpu_cache_flush` does: each run then reads its tensors from memory. It used to
//!    sweep a buffer twice the last-level cache instead; where the machine reports a large
//!    shared cache (480 MiB on a cloud Xeon) that was a 960 MiB buffer faulted in and walked
//!    before every repeat, most of a model task's time per candidate;
//! 5. calibrates again (prints `calib_after <GFLOP/s>`).
//!
//! The kernel is called through a `volatile` function pointer: in one translation unit the
//! compiler could otherwise inline it into the timing loop and hoist or drop repeated work.

use std::fmt::Write as _;

use crate::codegen::ArgSpec;
use crate::data::C_INPUT_VALUE;
use crate::ir::{DType, InputData};

/// The FMA throughput loop shared by the harness and the standalone calibration program.
///
/// 16 independent accumulator chains (12 on x86 without AVX-512, which has only 16 vector
/// registers) of native-width vector FMAs: more chains than FMA latency x pipes, so the loop
/// runs at the FMA issue rate. Every thread of the parallel region runs until a common
/// deadline; the result is all threads' flops over the region's wall time, so a thread that
/// loses its core to a neighbour lowers the figure.
const CALIBRATION_C: &str = r#"
#include <omp.h>
#include <time.h>

#if defined(__AVX512F__)
#define TUNEHUB_VBYTES 64
#elif defined(__AVX__)
#define TUNEHUB_VBYTES 32
#else
#define TUNEHUB_VBYTES 16
#endif
#if defined(__x86_64__) && !defined(__AVX512F__)
#define TUNEHUB_NACC 12
#else
#define TUNEHUB_NACC 16
#endif
#define TUNEHUB_BLOCK 4096L
typedef float tunehub_vf __attribute__((vector_size(TUNEHUB_VBYTES)));

static volatile float tunehub_sink;
static volatile float tunehub_calib_seed = 1.0f;

static double tunehub_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* TUNEHUB_BLOCK iterations of TUNEHUB_NACC independent FMA chains. acc = acc * a + b converges
   to b / (1 - a) = 1000: no overflow, no denormals. The operands come from a volatile so
   nothing folds, and each chain starts at a different value so no two chains merge. */
__attribute__((noinline)) static float tunehub_fma_block(void) {
  const float s = tunehub_calib_seed;
  const tunehub_vf va = (tunehub_vf){0} + 0.999999f * s;
  const tunehub_vf vb = (tunehub_vf){0} + 0.001f * s;
  tunehub_vf acc[TUNEHUB_NACC];
#pragma GCC unroll 16
  for (int j = 0; j < TUNEHUB_NACC; j++) acc[j] = (tunehub_vf){0} + s * (float)j;
  for (long i = 0; i < TUNEHUB_BLOCK; i++) {
#pragma GCC unroll 16
    for (int j = 0; j < TUNEHUB_NACC; j++) acc[j] = acc[j] * va + vb;
  }
  tunehub_vf t = acc[0];
#pragma GCC unroll 16
  for (int j = 1; j < TUNEHUB_NACC; j++) t += acc[j];
  float r = 0.0f;
  for (int l = 0; l < (int)(TUNEHUB_VBYTES / 4); l++) r += t[l];
  return r;
}

/* GFLOP/s of all OpenMP threads over about `ms` milliseconds; 0 when ms <= 0. */
static double tunehub_calibrate(double ms) {
  if (ms <= 0) return 0.0;
  const double t0 = tunehub_now();
  const double deadline = t0 + ms * 1e-3;
  long blocks = 0;
  float sink = 0.0f;
#pragma omp parallel reduction(+ : blocks, sink)
  {
    do {
      sink += tunehub_fma_block();
      blocks++;
    } while (tunehub_now() < deadline);
  }
  const double t = tunehub_now() - t0;
  tunehub_sink += sink;
  const double flops = (double)blocks * TUNEHUB_BLOCK * TUNEHUB_NACC * (TUNEHUB_VBYTES / 4) * 2.0;
  return flops / t * 1e-9;
}
"#;

/// Source of the standalone calibration program: `calib <ms>` prints `calib <GFLOP/s>` for the
/// OpenMP threads (OMP_NUM_THREADS), after a short untimed warm-up.
pub fn calibration_program_source() -> String {
    format!(
        "{CALIBRATION_C}\n#include <stdio.h>\n#include <stdlib.h>\n\
         int main(int argc, char** argv) {{\n\
         \x20 const double ms = argc > 1 ? atof(argv[1]) : 100.0;\n\
         \x20 tunehub_calibrate(ms / 10); /* wake the threads and the FMA units */\n\
         \x20 printf(\"calib %.3f\\n\", tunehub_calibrate(ms));\n\
         \x20 return 0;\n}}\n"
    )
}

/// The whole program: the kernel, then the harness.
pub fn program_source(kernel_source: &str, args: &[ArgSpec]) -> String {
    let mut s = String::with_capacity(kernel_source.len() + 8192);
    s.push_str(kernel_source);
    if !kernel_source.ends_with('\n') {
        s.push('\n');
    }
    s.push_str(&harness_source(args));
    s
}

/// The kernel's prototype (and its pack functions') as the harness calls them. Appended to a
/// kernel compiled apart from its harness, so that a kernel whose definition disagrees still
/// fails to compile rather than link into a wrong call.
pub fn kernel_declarations(args: &[ArgSpec]) -> String {
    let mut s = format!(
        "void tunehub_kernel({}); /* must match the kernel's definition */\n",
        kernel_params(args)
    );
    for (i, a) in args.iter().enumerate() {
        if a.packed_len.is_some() {
            let t = a.dtype.c_name();
            let _ = writeln!(
                s,
                "void tunehub_kernel_pack_{i}(const {t}* restrict, {t}* restrict);"
            );
        }
    }
    s
}

fn kernel_params(args: &[ArgSpec]) -> String {
    let params: Vec<String> = args.iter().map(ArgSpec::c_param).collect();
    if params.is_empty() {
        "void".to_string()
    } else {
        params.join(", ")
    }
}

/// The harness's code of an argument's element type and data (`tunehub_type[]`).
fn type_code(a: &ArgSpec) -> u32 {
    match a.dtype {
        DType::F32 | DType::F16 if a.data == InputData::Multiplier => 4,
        DType::F32 | DType::F16 => 0,
        DType::U8 => 1,
        DType::I8 => 2,
        DType::I32 => 3,
    }
}

/// The harness `main` for a kernel with these arguments (see the module docs).
pub fn harness_source(args: &[ArgSpec]) -> String {
    let params = kernel_params(args);
    let call: Vec<String> = (0..args.len()).map(|i| format!("buf[{i}]")).collect();
    // Arrays get at least one element: C has no empty arrays.
    let list = |f: &dyn Fn(&ArgSpec) -> String| {
        if args.is_empty() {
            "0".to_string()
        } else {
            args.iter().map(f).collect::<Vec<_>>().join(", ")
        }
    };
    let lens = list(&|a| format!("(size_t){}ULL", a.num_elements().max(0)));
    let stages = list(&|a| format!("{}u", a.stage));
    let outs = list(&|a| if a.is_output { "1".into() } else { "0".into() });
    let types = list(&|a| type_code(a).to_string());
    let sizes = list(&|a| a.dtype.bytes().to_string());

    let mut s = String::new();
    s.push_str("#line 1 \"tunehub_harness.c\"\n");
    s.push_str("#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n");
    let _ = writeln!(
        s,
        "void tunehub_kernel({params}); /* must match the kernel's definition */"
    );
    // Layout-free inputs: filled in their own layout, packed once by the kernel source's
    // pack function, and the kernel gets the packed buffer.
    let mut pack = String::new();
    for (i, a) in args.iter().enumerate() {
        if let Some(n) = a.packed_len {
            let t = a.dtype.c_name();
            let _ = writeln!(
                s,
                "void tunehub_kernel_pack_{i}(const {t}* restrict, {t}* restrict);"
            );
            let bytes = (n.max(1) * a.dtype.bytes() as i64 + 63) / 64 * 64;
            let _ = write!(
                pack,
                "  {{\n    {t}* p = aligned_alloc(64, {bytes});\n    if (!p) {{ fprintf(stderr, \"tunehub harness: cannot allocate the packed argument {i}\\n\"); return 3; }}\n    tunehub_kernel_pack_{i}(buf[{i}], p);\n    free(buf[{i}]);\n    buf[{i}] = p;\n    buf_bytes[{i}] = {bytes};\n  }}\n"
            );
        }
    }
    s.push_str(C_INPUT_VALUE);
    s.push_str(CALIBRATION_C);
    let _ = write!(
        s,
        r#"
#define TUNEHUB_NARGS {nargs}
static const size_t tunehub_len[] = {{{lens}}};
static const unsigned int tunehub_stage[] = {{{stages}}};
static const int tunehub_is_output[] = {{{outs}}};
/* 0 f32, 1 u8, 2 i8, 3 i32, 4 an f32 multiplier (see `type_code`), and the element sizes. */
static const int tunehub_type[] = {{{types}}};
static const size_t tunehub_size[] = {{{sizes}}};
typedef void (*tunehub_kernel_fn)({params});

/* Evicts every cache line of the `n` buffers from every cache level (written back first),
   then waits for the evictions. 64-byte steps: the line of every x86 and of the Arm cores
   tunehub targets. */
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#define TUNEHUB_CAN_EVICT 1
#define TUNEHUB_EVICT_LINE(p) _mm_clflush(p)
#define TUNEHUB_EVICTED() _mm_mfence()
#elif defined(__aarch64__)
#define TUNEHUB_CAN_EVICT 1
#define TUNEHUB_EVICT_LINE(p) __asm__ volatile("dc civac, %0" : : "r"(p) : "memory")
#define TUNEHUB_EVICTED() __asm__ volatile("dsb ish" : : : "memory")
#else
#define TUNEHUB_CAN_EVICT 0
#define TUNEHUB_EVICT_LINE(p) ((void)(p))
#define TUNEHUB_EVICTED() ((void)0)
#endif
static void tunehub_flush(void* const* bufs, const size_t* bytes, int n) {{
  for (int a = 0; a < n; a++) {{
    const unsigned char* p = (const unsigned char*)bufs[a];
    for (size_t i = 0; i < bytes[a]; i += 64) TUNEHUB_EVICT_LINE(p + i);
  }}
  TUNEHUB_EVICTED();
}}

int main(int argc, char** argv) {{
  if (argc < 8) {{
    fprintf(stderr, "usage: %s number repeat min_repeat_ms warmup flush out_path calib_ms\n", argv[0]);
    return 2;
  }}
  long number = atol(argv[1]);
  const int repeat = atoi(argv[2]);
  const double min_repeat_ms = atof(argv[3]);
  const int warmup = atoi(argv[4]);
  const int flush = atoi(argv[5]);
  const char* out_path = argv[6];
  const double calib_ms = atof(argv[7]);
  if (number < 1) number = 1;
  if (flush && !TUNEHUB_CAN_EVICT) {{
    fprintf(stderr, "tunehub harness: no cache flush on this architecture\n");
    return 2;
  }}

  void* buf[TUNEHUB_NARGS + 1];
  size_t buf_bytes[TUNEHUB_NARGS + 1];
  for (int a = 0; a < TUNEHUB_NARGS; a++) {{
    size_t bytes = (tunehub_len[a] * tunehub_size[a] + 63) / 64 * 64;
    buf_bytes[a] = bytes;
    buf[a] = aligned_alloc(64, bytes ? bytes : 64);
    if (!buf[a]) {{
      fprintf(stderr, "tunehub harness: cannot allocate %zu bytes for argument %d\n", bytes, a);
      return 3;
    }}
    const unsigned int st = tunehub_stage[a];
    for (size_t i = 0; i < tunehub_len[a]; i++) {{
      const int out = tunehub_is_output[a];
      switch (tunehub_type[a]) {{
        case 1: ((uint8_t*)buf[a])[i] = (uint8_t)tunehub_input_u8(out ? ~st : st, (unsigned int)i); break;
        case 2: ((int8_t*)buf[a])[i] = (int8_t)tunehub_input_i8(out ? ~st : st, (unsigned int)i); break;
        case 3: ((int32_t*)buf[a])[i] = out ? INT32_MIN : tunehub_input_i32(st, (unsigned int)i); break;
        case 4: ((float*)buf[a])[i] = tunehub_input_multiplier(st, (unsigned int)i); break;
        default: ((float*)buf[a])[i] = out ? NAN : tunehub_input_value(st, (unsigned int)i);
      }}
    }}
  }}
{pack}  tunehub_kernel_fn volatile kernel = tunehub_kernel;

  /* The checked run: outputs start as NaN. */
  kernel({call});
  FILE* out = fopen(out_path, "wb");
  if (!out) {{
    fprintf(stderr, "tunehub harness: cannot open %s\n", out_path);
    return 4;
  }}
  for (int a = 0; a < TUNEHUB_NARGS; a++) {{
    if (!tunehub_is_output[a]) continue;
    for (size_t i = 0; i < tunehub_len[a]; i++) {{
      double v;
      switch (tunehub_type[a]) {{
        case 1: v = ((const uint8_t*)buf[a])[i]; break;
        case 2: v = ((const int8_t*)buf[a])[i]; break;
        case 3: v = ((const int32_t*)buf[a])[i]; break;
        default: v = ((const float*)buf[a])[i];
      }}
      if (fwrite(&v, sizeof v, 1, out) != 1) {{
        fprintf(stderr, "tunehub harness: short write to %s\n", out_path);
        return 4;
      }}
    }}
  }}
  if (fclose(out) != 0) {{
    fprintf(stderr, "tunehub harness: cannot write %s\n", out_path);
    return 4;
  }}

  printf("threads %d\n", omp_get_max_threads());
  printf("calib_before %.3f\n", tunehub_calibrate(calib_ms));
  fflush(stdout);

  for (int w = 0; w < warmup; w++) kernel({call});

  /* Ansor/TVM: grow `number` until one repeat lasts min_repeat_ms. The probe that reaches it
     is a full repeat of `number` runs, so (as TVM's time evaluator does) it counts as the
     first repeat instead of being thrown away, unless each repeat must start from a flushed
     cache. */
  double first_cost = -1.0;
  if (min_repeat_ms > 0) {{
    for (;;) {{
      const double t0 = tunehub_now();
      for (long i = 0; i < number; i++) kernel({call});
      const double ms = (tunehub_now() - t0) * 1e3;
      if (ms >= min_repeat_ms) {{
        if (!flush) first_cost = ms * 1e-3 / (double)number;
        break;
      }}
      if (number >= (1L << 40)) break;
      const double per_run = ms / (double)number;
      double next = per_run > 0 ? min_repeat_ms / per_run + 1 : (double)number * 16;
      if (next < (double)number * 1.618) next = (double)number * 1.618 + 1;
      number = next > (double)(1L << 40) ? (1L << 40) : (long)next;
    }}
  }}
  printf("number %ld\n", number);

  double* costs = malloc(sizeof(double) * (size_t)(repeat > 0 ? repeat : 1));
  if (!costs) return 3;
  for (int r = 0; r < repeat; r++) {{
    if (r == 0 && first_cost >= 0) {{
      costs[0] = first_cost;
      continue;
    }}
    if (flush) tunehub_flush(buf, buf_bytes, TUNEHUB_NARGS);
    const double t0 = tunehub_now();
    for (long i = 0; i < number; i++) kernel({call});
    costs[r] = (tunehub_now() - t0) / (double)number;
  }}
  printf("costs");
  for (int r = 0; r < repeat; r++) printf(" %.9e", costs[r]);
  printf("\n");

  printf("calib_after %.3f\n", tunehub_calibrate(calib_ms));
  fflush(stdout);
  return 0;
}}
"#,
        nargs = args.len(),
        pack = pack,
        call = call.join(", "),
    );
    s
}

/// The arguments of one harness run, in command-line order.
#[derive(Debug, Clone, PartialEq)]
pub struct HarnessArgs {
    pub number: u32,
    pub repeat: u32,
    pub min_repeat_ms: u32,
    pub warmup: u32,
    pub flush: bool,
    pub out_path: std::path::PathBuf,
    pub calib_ms: u32,
}

impl HarnessArgs {
    pub fn to_argv(&self) -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> =
            [self.number, self.repeat, self.min_repeat_ms, self.warmup]
                .iter()
                .map(|n| n.to_string().into())
                .collect();
        v.push(if self.flush { "1" } else { "0" }.into());
        v.push(self.out_path.clone().into_os_string());
        v.push(self.calib_ms.to_string().into());
        v
    }
}

/// What the harness printed.
#[derive(Debug, Clone, PartialEq)]
pub struct HarnessReport {
    /// OpenMP threads the harness ran with.
    pub threads: u32,
    /// Calibration GFLOP/s before and after timing (0 when calibration was off).
    pub calib_before: f64,
    pub calib_after: f64,
    /// Runs per repeat after growth.
    pub number: u64,
    /// Seconds per run, one per repeat.
    pub costs: Vec<f64>,
}

impl HarnessReport {
    /// Parses the harness's stdout; `repeat` costs are required.
    pub fn parse(stdout: &str, repeat: u32) -> Result<HarnessReport, String> {
        let (mut threads, mut before, mut after, mut number, mut costs) =
            (None, None, None, None, None);
        for line in stdout.lines() {
            let mut words = line.split_whitespace();
            let Some(tag) = words.next() else { continue };
            let rest: Vec<&str> = words.collect();
            let one = |what: &str| -> Result<&str, String> {
                match rest.as_slice() {
                    [v] => Ok(*v),
                    _ => Err(format!("malformed `{what}` line: {line:?}")),
                }
            };
            let num = |what: &str| -> Result<f64, String> {
                one(what)?
                    .parse::<f64>()
                    .map_err(|_| format!("malformed `{what}` line: {line:?}"))
            };
            match tag {
                "threads" => threads = Some(num(tag)? as u32),
                "calib_before" => before = Some(num(tag)?),
                "calib_after" => after = Some(num(tag)?),
                "number" => number = Some(num(tag)? as u64),
                "costs" => {
                    let c: Result<Vec<f64>, _> = rest.iter().map(|w| w.parse::<f64>()).collect();
                    costs = Some(c.map_err(|_| format!("malformed `costs` line: {line:?}"))?);
                }
                _ => {}
            }
        }
        let costs = costs.ok_or("no `costs` line")?;
        if costs.len() != repeat as usize {
            return Err(format!("{} costs for {repeat} repeats", costs.len()));
        }
        if let Some(c) = costs.iter().find(|c| !c.is_finite() || **c < 0.0) {
            return Err(format!("invalid cost {c}"));
        }
        Ok(HarnessReport {
            threads: threads.ok_or("no `threads` line")?,
            calib_before: before.ok_or("no `calib_before` line")?,
            calib_after: after.ok_or("no `calib_after` line")?,
            number: number.ok_or("no `number` line")?,
            costs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(name: &str, shape: &[i64], stage: usize, is_output: bool) -> ArgSpec {
        ArgSpec {
            name: name.into(),
            shape: shape.to_vec(),
            stage,
            is_output,
            dtype: DType::F32,
            packed_len: None,
            data: Default::default(),
        }
    }

    #[test]
    fn harness_declares_the_signature_in_order() {
        let s = harness_source(&[arg("A", &[4, 8], 0, false), arg("C", &[4], 2, true)]);
        assert!(s.contains("void tunehub_kernel(const float* restrict, float* restrict);"));
        assert!(s.contains("(size_t)32ULL, (size_t)4ULL"));
        assert!(s.contains("{0u, 2u}"));
        assert!(s.contains("kernel(buf[0], buf[1]);"));
        assert!(harness_source(&[]).contains("void tunehub_kernel(void);"));
    }

    #[test]
    fn report_parses_and_rejects() {
        let out =
            "threads 2\ncalib_before 200.5\nnumber 16\ncosts 1.0e-3 2.0e-3\ncalib_after 210\n";
        let r = HarnessReport::parse(out, 2).unwrap();
        assert_eq!(r.costs, vec![1e-3, 2e-3]);
        assert_eq!(
            (r.threads, r.number, r.calib_before, r.calib_after),
            (2, 16, 200.5, 210.0)
        );
        assert!(
            HarnessReport::parse(out, 3)
                .unwrap_err()
                .contains("2 costs for 3")
        );
        assert!(HarnessReport::parse("threads 1\n", 1).is_err());
        assert!(HarnessReport::parse("costs x\n", 1).is_err());
        assert!(HarnessReport::parse("costs nan\n", 1).is_err());
    }
}
