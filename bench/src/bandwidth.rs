//! The memory roofs of this machine, measured: per cache level (L1, L2, L3) and main memory,
//! the bandwidth of a read-only sum and of a STREAM-like triad (`a = b + s * c`, three arrays
//! counted, no write-allocate, as `../shared/tools/machine-check` counts STREAM) on all the
//! kernels' threads, each thread on its own slice of a working set sized for the level. A
//! memory-bound workload is then held against the probe run at the bytes it must move at
//! least once (its inputs and outputs), named by the level that holds them: `search` prints
//! the share it reaches.
//!
//! The probe is plain C with OpenMP, compiled with the target's compiler and flags as the
//! kernels are, so its loads and stores are the vector width the kernels get.

use crate::cprobe::CProbe;
use crate::mathroof::{MathFloor, MathRates};
use anyhow::{Result, bail};
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::target::Target;

const PROBE_C: &str = r#"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
/* argv: threads, then working sets in bytes (the whole set, split between the threads).
   Prints per set: bytes, read GB/s, triad GB/s. Best of repeats, each >= 20 ms. */
int main(int argc, char** argv) {
  int th = atoi(argv[1]);
  for (int a = 2; a < argc; a++) {
    long ws = atol(argv[a]);
    long n = ws / 4 / 3 / th / 128 * 128;           /* floats per array per thread */
    if (n < 128) n = 128;
    float* buf = aligned_alloc(64, (size_t)(3 * n * th) * 4 + 64);
    volatile float sink = 0;
    double best_r = 1e30, best_t = 1e30;
    long reps = 1;
#pragma omp parallel num_threads(th)
    { float* b = buf + 3 * n * omp_get_thread_num(); for (long i = 0; i < 3 * n; i++) b[i] = 1.0f; }
    /* Calibrate: enough passes for ~20 ms. */
    for (;;) {
      double t0 = now();
#pragma omp parallel num_threads(th)
      { float* b = buf + 3 * n * omp_get_thread_num(); for (long r = 0; r < reps; r++) {
#pragma omp simd
        for (long i = 0; i < n; i++) b[i] = b[n + i] + 0.5f * b[2 * n + i]; } }
      if (now() - t0 > 0.02) break;
      reps *= 2;
    }
    for (int k = 0; k < 7; k++) {
      double t0 = now();
#pragma omp parallel num_threads(th)
      { float* b = buf + 3 * n * omp_get_thread_num(); float acc[128] = {0};
        /* 128 partial sums: eight 512-bit accumulators, so the adds' latency is hidden. */
        for (long r = 0; r < reps; r++) {
          for (long i = 0; i < 3 * n; i += 128)
            for (int j = 0; j < 128; j++) acc[j] += b[i + j];
          b[r % (3 * n)] = acc[r % 128] * 1e-30f; }
        float s = 0; for (int j = 0; j < 128; j++) s += acc[j];
        sink += s; }
      double t = now() - t0; if (t < best_r) best_r = t;
      t0 = now();
#pragma omp parallel num_threads(th)
      { float* b = buf + 3 * n * omp_get_thread_num(); for (long r = 0; r < reps; r++) {
#pragma omp simd
        for (long i = 0; i < n; i++) b[i] = b[n + i] + 0.5f * b[2 * n + i]; } }
      t = now() - t0; if (t < best_t) best_t = t;
    }
    double bytes = 3.0 * n * th * 4;
    printf("%.0f %.2f %.2f\n", bytes, bytes * reps / best_r * 1e-9, bytes * reps / best_t * 1e-9);
    free(buf);
  }
  return 0;
}
"#;

/// One memory level's measured bandwidth.
#[derive(Debug, Clone)]
pub struct Level {
    /// `L1`, `L2`, `L3` or `DRAM`.
    pub name: String,
    /// The largest working set this level holds for all threads together (bytes); for DRAM,
    /// unbounded.
    pub capacity: u64,
    /// The working set the probe used (bytes).
    pub probed: u64,
    pub read_gbs: f64,
    pub triad_gbs: f64,
}

/// The measured levels, innermost first.
#[derive(Debug, Clone)]
pub struct Roofs {
    pub levels: Vec<Level>,
}

/// The roof of one workload: the probe at its own working set.
#[derive(Debug, Clone)]
pub struct Roof {
    /// The level that holds the working set (`L2`, `L3`, `DRAM`...).
    pub level: String,
    /// The working set the probe used (bytes).
    pub probed: u64,
    pub read_gbs: f64,
    pub triad_gbs: f64,
    /// The kernel mostly reads: the read roof applies.
    pub read_mostly: bool,
    /// The bytes the kernel must move at least once.
    pub bytes: u64,
    /// The vector-math floor, for a kernel that calls `expf`, `tanhf`...
    pub math: Option<MathFloor>,
}

impl Roof {
    /// The roof that applies, as GB/s of the kernel's bytes, and its name: the read or triad
    /// bandwidth, or the vector-math floor where it is the slower (`exp-bound`).
    pub fn applies(&self) -> (f64, String) {
        let (gbs, kind) = if self.read_mostly {
            (self.read_gbs, "read")
        } else {
            (self.triad_gbs, "triad")
        };
        if let Some(m) = &self.math {
            let math_gbs = self.bytes as f64 / m.seconds / 1e9;
            if math_gbs < gbs {
                let names: Vec<&str> = m.calls.iter().map(|c| c.0).collect();
                return (math_gbs, format!("{}-bound", names.join("+")));
            }
        }
        (gbs, kind.to_string())
    }
}

/// Per level the capacity the kernels' threads share: private levels (L1, L2) times the
/// threads, the last level once (the usual layout; sysfs' sharing lists are not read).
fn capacities(target: &Target) -> Vec<(String, u64)> {
    let c = &target.cache_bytes;
    let th = target.cores.max(1) as u64;
    let mut out = vec![];
    for (i, &b) in c.iter().enumerate() {
        let last = i + 1 == c.len();
        out.push((format!("L{}", i + 1), if last { b } else { b * th }));
    }
    out
}

/// The probe, compiled once: it measures any working set on the kernels' threads.
pub struct Prober(CProbe);

impl Prober {
    /// Compiles the probe with the target's compiler and flags.
    pub fn new(target: &Target) -> Result<Prober> {
        Ok(Prober(CProbe::compile(
            target,
            "the bandwidth probe",
            PROBE_C,
        )?))
    }

    /// Per working set (bytes, split between the threads): the bytes probed, read GB/s and
    /// triad GB/s.
    pub fn probe(&self, sets: &[u64]) -> Result<Vec<(u64, f64, f64)>> {
        let args: Vec<String> = sets.iter().map(u64::to_string).collect();
        let text = self.0.run(&args)?;
        let mut rows = vec![];
        for line in text.lines() {
            let f: Vec<f64> = line
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            let [bytes, read_gbs, triad_gbs] = f[..] else {
                bail!("the bandwidth probe printed {line:?}");
            };
            rows.push((bytes as u64, read_gbs, triad_gbs));
        }
        if rows.len() != sets.len() {
            bail!(
                "the bandwidth probe printed {} of {} sets",
                rows.len(),
                sets.len()
            );
        }
        Ok(rows)
    }
}

impl Roofs {
    /// Runs the probe at half of each level's capacity and at 8x the last level.
    pub fn measure(target: &Target, prober: &Prober) -> Result<Roofs> {
        let caps = capacities(target);
        if caps.is_empty() {
            bail!("the target's cache sizes are unknown");
        }
        let llc = caps.last().map(|c| c.1).unwrap_or(32 << 20);
        // Half of each level (the other half for the stack, code and the neighbour level's
        // lines); main memory at 8x the last level.
        let mut sets: Vec<(String, u64, u64)> = caps
            .iter()
            .map(|(n, cap)| (n.clone(), *cap, cap / 2))
            .collect();
        sets.push(("DRAM".into(), u64::MAX, llc * 8));
        let rows = prober.probe(&sets.iter().map(|s| s.2).collect::<Vec<_>>())?;
        let levels = sets
            .into_iter()
            .zip(rows)
            .map(
                |((name, capacity, _), (probed, read_gbs, triad_gbs))| Level {
                    name,
                    capacity,
                    probed,
                    read_gbs,
                    triad_gbs,
                },
            )
            .collect();
        Ok(Roofs { levels })
    }

    /// The roof of a kernel of `dag`: the probe run at the kernel's own compulsory bytes, so
    /// that a share does not depend on how full the level is at half its capacity (a VM's
    /// "300 MB" L3 is shared with its host's other tenants: the half-level probe read 52 GB/s
    /// there, a 67 MB matrix-vector product 61-66). The read roof applies to a kernel that writes
    /// less than a third of its bytes (a triad writes a third), the triad's otherwise.
    /// With `math`, the kernel's vector-math floor joins the roof (see [`Roof::applies`]).
    pub fn roof_for(
        &self,
        prober: &Prober,
        math: Option<&MathRates>,
        dag: &ComputeDag,
    ) -> Result<Roof> {
        let bytes = compulsory_bytes(dag);
        let [(probed, read_gbs, triad_gbs)] = prober.probe(&[bytes])?[..] else {
            bail!("the bandwidth probe printed no row");
        };
        Ok(Roof {
            level: self.level_for(bytes).name.clone(),
            probed,
            read_gbs,
            triad_gbs,
            read_mostly: 3 * output_bytes(dag) < bytes,
            bytes,
            math: math.and_then(|m| m.floor(dag)),
        })
    }

    /// The level that holds `bytes` (the innermost whose capacity is at least that), DRAM
    /// past the last level.
    pub fn level_for(&self, bytes: u64) -> &Level {
        self.levels
            .iter()
            .find(|l| bytes <= l.capacity)
            .unwrap_or_else(|| self.levels.last().expect("at least DRAM"))
    }

    pub fn print(&self) {
        println!("memory roofs (GB/s on all threads; triad counts 3 arrays, as STREAM):");
        for l in &self.levels {
            println!(
                "  {:<4} working set {:>9.1} KiB: read {:>7.1}, triad {:>7.1}",
                l.name,
                l.probed as f64 / 1024.0,
                l.read_gbs,
                l.triad_gbs
            );
        }
    }
}

/// The bytes a kernel of `dag` must move at least once: every input read and every output
/// written, 4 bytes an element (every tensor is f32).
pub fn compulsory_bytes(dag: &ComputeDag) -> u64 {
    dag.placeholders()
        .into_iter()
        .chain(dag.outputs())
        .map(|s| dag.stages[s].num_elements() as u64 * 4)
        .sum()
}

/// What a run at `seconds` per call reached against `roof`: (GB/s of the roof's bytes, share
/// of the roof).
pub fn achieved(roof: &Roof, seconds: f64) -> (f64, f64) {
    let gbs = if seconds > 0.0 {
        roof.bytes as f64 / seconds / 1e9
    } else {
        0.0
    };
    (gbs, gbs / roof.applies().0.max(1e-9))
}

/// The bytes a kernel of `dag` writes at least once: its outputs.
pub fn output_bytes(dag: &ComputeDag) -> u64 {
    dag.outputs()
        .into_iter()
        .map(|s| dag.stages[s].num_elements() as u64 * 4)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compulsory_bytes_count_inputs_and_outputs_once() {
        let dag = tunehub_engine::ops::build_op("dense(m=1,n=8,k=4,bias=1,relu=0)").unwrap();
        // data 1x4, weight 8x4, bias 8, out 1x8.
        assert_eq!(compulsory_bytes(&dag), 4 * (4 + 32 + 8 + 8));
    }

    #[test]
    fn a_matrix_vector_product_mostly_reads_and_softmax_does_not() {
        let gemv = tunehub_engine::ops::build_op("dense(m=1,n=8,k=4,bias=1,relu=0)").unwrap();
        // The output row, 1x8, of 4 * (4 + 32 + 8 + 8) bytes moved.
        assert_eq!(output_bytes(&gemv), 4 * 8);
        assert!(3 * output_bytes(&gemv) < compulsory_bytes(&gemv));
        let softmax = tunehub_engine::ops::build_op("softmax(m=4,n=8)").unwrap();
        assert_eq!(2 * output_bytes(&softmax), compulsory_bytes(&softmax));
    }

    #[test]
    fn the_vector_math_floor_applies_only_where_it_is_the_lower_roof() {
        let roof = |seconds: f64| Roof {
            level: "L2".into(),
            probed: 1000,
            read_gbs: 200.0,
            triad_gbs: 100.0,
            read_mostly: false,
            bytes: 1000,
            math: Some(MathFloor {
                calls: vec![("exp", 10), ("tanh", 10)],
                seconds,
            }),
        };
        // 1000 bytes in 20 ns: 50 GB/s, under the triad's 100.
        let (gbs, kind) = roof(20e-9).applies();
        assert!(
            (gbs - 50.0).abs() < 1e-9 && kind == "exp+tanh-bound",
            "{gbs} {kind}"
        );
        // In 5 ns: 200 GB/s, over it: the triad applies.
        assert_eq!(roof(5e-9).applies(), (100.0, "triad".to_string()));
    }

    #[test]
    fn the_level_is_the_innermost_that_holds_the_bytes() {
        let l = |name: &str, capacity| Level {
            name: name.into(),
            capacity,
            probed: 0,
            read_gbs: 1.0,
            triad_gbs: 1.0,
        };
        let r = Roofs {
            levels: vec![l("L1", 64), l("L2", 1024), l("DRAM", u64::MAX)],
        };
        assert_eq!(r.level_for(64).name, "L1");
        assert_eq!(r.level_for(65).name, "L2");
        assert_eq!(r.level_for(1 << 20).name, "DRAM");
    }
}
