//! The vector-math roof: how many `expf`, `tanhf`, `erff` and `logf` the kernels' threads
//! evaluate per second, measured by a probe compiled as the kernels are (the same flags, the
//! kernels' own libmvec declarations, `omp simd` loops over data in L1). A kernel that must evaluate
//! N of them per call is no faster than N at that rate, whatever its bytes: softmax's exp and
//! GELU's tanh can be bound by it below the bandwidth roof of their working set.

use crate::cprobe::CProbe;
use anyhow::{Result, bail};
use tunehub_engine::codegen::VECTOR_MATH_DECLARATIONS;
use tunehub_engine::ir::{ComputeDag, Cond, Expr, UnaryOp};
use tunehub_engine::target::Target;

/// The probe's includes; the kernels' vector-math declarations follow, then `PROBE_C`.
const PROBE_INCLUDES: &str = "#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
";

const PROBE_C: &str = r#"
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
#define N 4096
/* Each pass moves one input (so that no pass repeats the last) and keeps one output. */
#define PASS(F) for (long r = 0; r < reps; r++) { _Pragma("omp simd") for (int i = 0; i < N; i++) y[i] = F(x[i]); x[r % N] = x[(r + 1) % N]; s += y[r % N]; }
/* argv: threads. Prints per function: its name and evaluations per second on all threads,
   best of 7 repeats of >= 20 ms, each thread on its own arrays of N floats in [0.05, 4). */
int main(int argc, char** argv) {
  int th = atoi(argv[1]);
  const char* names[] = {"exp", "tanh", "erf", "log"};
  for (int f = 0; f < 4; f++) {
    long reps = 1;
    double best = 1e30;
    volatile float sink = 0;
    for (int k = 0; k < 12; k++) {
      double t0 = now();
#pragma omp parallel num_threads(th)
      {
        float* x = aligned_alloc(64, 2 * N * sizeof(float));
        float* y = x + N;
        float s = 0;
        for (int i = 0; i < N; i++) x[i] = 0.05f + (float)((i * 37) % N) * (3.95f / N);
        switch (f) {
          case 0: PASS(expf) break;
          case 1: PASS(tanhf) break;
          case 2: PASS(erff) break;
          default: PASS(logf) break;
        }
        free(x);
#pragma omp critical
        sink += s;
      }
      double t = now() - t0;
      if (t < 0.02) { reps *= 2; k = -1; best = 1e30; continue; }
      if (t < best) best = t;
      if (k >= 6) break;
    }
    printf("%s %.6e\n", names[f], (double)N * th * reps / best);
  }
  return 0;
}
"#;

/// Evaluations per second of each function on all the kernels' threads.
#[derive(Debug, Clone)]
pub struct MathRates {
    pub per_second: Vec<(String, f64)>,
}

/// The vector-math floor of one workload: the evaluations one call makes at least, and the
/// time they take at the measured rates.
#[derive(Debug, Clone)]
pub struct MathFloor {
    /// The functions, with their count per call (`exp 196608`).
    pub calls: Vec<(&'static str, u64)>,
    pub seconds: f64,
}

impl MathRates {
    /// Compiles the probe as the kernels are compiled, and runs it.
    pub fn measure(target: &Target) -> Result<MathRates> {
        let declarations = if target.has_vector_math() {
            VECTOR_MATH_DECLARATIONS
        } else {
            ""
        };
        let source = format!("{PROBE_INCLUDES}{declarations}{PROBE_C}");
        let out = CProbe::compile(target, "the vector-math probe", &source)?.run(&[])?;
        let per_second = out
            .lines()
            .filter_map(|l| {
                let (name, rate) = l.split_once(' ')?;
                Some((name.to_string(), rate.trim().parse().ok()?))
            })
            .collect::<Vec<_>>();
        if per_second.len() != 4 {
            bail!("the vector-math probe printed {per_second:?}");
        }
        Ok(MathRates { per_second })
    }

    /// The floor of a kernel of `dag`, or `None` when it calls none of the functions.
    pub fn floor(&self, dag: &ComputeDag) -> Option<MathFloor> {
        let calls = calls(dag);
        let seconds = calls
            .iter()
            .map(|(name, n)| {
                let rate = self
                    .per_second
                    .iter()
                    .find(|(m, _)| m == name)
                    .map_or(f64::INFINITY, |r| r.1);
                *n as f64 / rate
            })
            .sum::<f64>();
        (!calls.is_empty()).then_some(MathFloor { calls, seconds })
    }

    pub fn print(&self) {
        let rates: Vec<String> = self
            .per_second
            .iter()
            .map(|(n, r)| format!("{n} {:.2} ns", 1e9 / r))
            .collect();
        println!(
            "vector-math roof (per evaluation, all threads): {}",
            rates.join(", ")
        );
    }
}

/// The function a unary op calls in the generated C, if it is one the probe measures
/// (sigmoid is written with `expf`).
fn function(op: UnaryOp) -> Option<&'static str> {
    match op {
        UnaryOp::Exp | UnaryOp::Sigmoid => Some("exp"),
        UnaryOp::Tanh => Some("tanh"),
        UnaryOp::Erf => Some("erf"),
        UnaryOp::Log => Some("log"),
        _ => None,
    }
}

/// The evaluations a kernel of `dag` makes at least: each stage's body once per point of its
/// space and reduction (a stage inlined into several readers makes more).
pub fn calls(dag: &ComputeDag) -> Vec<(&'static str, u64)> {
    let mut out: Vec<(&'static str, u64)> = vec![];
    for stage in &dag.stages {
        let Some(body) = stage.body() else { continue };
        let points: u64 = stage.axis_extents().iter().map(|&e| e as u64).product();
        let mut found = vec![];
        count(body, &mut found);
        for name in found {
            match out.iter_mut().find(|(n, _)| *n == name) {
                Some((_, k)) => *k += points,
                None => out.push((name, points)),
            }
        }
    }
    out
}

fn count(e: &Expr, out: &mut Vec<&'static str>) {
    match e {
        Expr::Const(_) | Expr::Load(..) | Expr::Index(_) => {}
        Expr::Unary(op, a) => {
            out.extend(function(*op));
            count(a, out);
        }
        Expr::Binary(_, a, b) => {
            count(a, out);
            count(b, out);
        }
        Expr::Select(c, a, b) => {
            count_cond(c, out);
            count(a, out);
            count(b, out);
        }
    }
}

fn count_cond(c: &Cond, out: &mut Vec<&'static str>) {
    match c {
        Cond::Index(..) => {}
        Cond::Value(_, a, b) => {
            count(a, out);
            count(b, out);
        }
        Cond::And(a, b) | Cond::Or(a, b) => {
            count_cond(a, out);
            count_cond(b, out);
        }
        Cond::Not(a) => count_cond(a, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_makes_one_exp_per_element_and_gelu_one_tanh() {
        let softmax = tunehub_engine::ops::build_op("softmax(m=3,n=7)").unwrap();
        assert_eq!(calls(&softmax), [("exp", 21)]);
        let gelu = tunehub_engine::text::parse(
            "T[i,j] = A[i,j] + B[j] where i<2, j<5
             Y[i,j] = T[i,j] * (1 + tanh(T[i,j] * 0.8)) + log(T[i,j] * T[i,j] + 1) where i<2, j<5",
        )
        .unwrap();
        assert_eq!(calls(&gelu), [("tanh", 10), ("log", 10)]);
        let matmul = tunehub_engine::ops::build_op("matmul(4,4,4)").unwrap();
        assert!(calls(&matmul).is_empty());
        let rates = MathRates {
            per_second: vec![("exp".into(), 1e9), ("tanh".into(), 5e8)],
        };
        assert!(rates.floor(&matmul).is_none());
        let f = rates.floor(&softmax).unwrap();
        assert!((f.seconds - 21e-9).abs() < 1e-15, "{f:?}");
    }

    /// The probe compiles with the target's flags and prints a positive rate for each function.
    #[test]
    fn the_probe_measures_every_function() {
        let r = MathRates::measure(&Target::detect()).unwrap();
        assert_eq!(
            r.per_second
                .iter()
                .map(|p| p.0.as_str())
                .collect::<Vec<_>>(),
            ["exp", "tanh", "erf", "log"]
        );
        assert!(r.per_second.iter().all(|p| p.1.is_finite() && p.1 > 0.0));
    }
}
