//! The memory roofs of this machine, measured: per cache level (L1, L2, L3) and main memory,
//! the bandwidth of a read-only sum and of a STREAM-like triad (`a = b + s * c`, three arrays
//! counted, no write-allocate, as `../shared/tools/machine-check` counts STREAM) on all the
//! kernels' threads, each thread on its own slice of a working set sized for the level. A
//! memory-bound workload is then held against the roof of the level that holds the bytes it
//! must move at least once (its inputs and outputs): `search` prints the share it reaches.
//!
//! The probe is plain C with OpenMP, compiled with the target's compiler and flags as the
//! kernels are, so its loads and stores are the vector width the kernels get.

use anyhow::{Context, Result, bail};
use std::process::Command;
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

impl Roofs {
    /// Compiles and runs the probe on `target.cores` threads.
    pub fn measure(target: &Target) -> Result<Roofs> {
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
        let dir = tempfile::tempdir()?;
        let src = dir.path().join("probe.c");
        let bin = dir.path().join("probe");
        std::fs::write(&src, PROBE_C)?;
        let mut cc = Command::new(&target.compiler);
        cc.args(target.compile_flags())
            .arg(&src)
            .arg("-o")
            .arg(&bin);
        let out = cc.output().context("compiling the bandwidth probe")?;
        if !out.status.success() {
            bail!(
                "the bandwidth probe did not compile: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let out = Command::new(&bin)
            .arg(target.cores.max(1).to_string())
            .args(sets.iter().map(|s| s.2.to_string()))
            .output()
            .context("running the bandwidth probe")?;
        if !out.status.success() {
            bail!("the bandwidth probe failed");
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut levels = vec![];
        for ((name, cap, _), line) in sets.into_iter().zip(text.lines()) {
            let f: Vec<f64> = line
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            let [bytes, read_gbs, triad_gbs] = f[..] else {
                bail!("the bandwidth probe printed {line:?}");
            };
            levels.push(Level {
                name,
                capacity: cap,
                probed: bytes as u64,
                read_gbs,
                triad_gbs,
            });
        }
        Ok(Roofs { levels })
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

/// What a run at `seconds` per call reached against its roof: (GB/s, level, share of the
/// roof). The roof is the triad figure of the level that holds the compulsory bytes: a kernel
/// reads and writes, and STREAM's triad is the issue's main-memory roof.
pub fn achieved(roofs: &Roofs, bytes: u64, seconds: f64) -> (f64, &Level, f64) {
    let gbs = if seconds > 0.0 {
        bytes as f64 / seconds / 1e9
    } else {
        0.0
    };
    let level = roofs.level_for(bytes);
    (gbs, level, gbs / level.triad_gbs.max(1e-9))
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
