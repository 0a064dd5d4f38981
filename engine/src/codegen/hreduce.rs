//! A reduction loop into one element (see `vreduce`) written as vector accumulators and a
//! horizontal tree at the end, where its value has a vector form (`regtile::vector_form`) and
//! the loop is whole vectors long.
//!
//! Why not `omp simd reduction`: GCC lowers it with one vector of per-lane sums and adds the
//! lanes one after the other at the end, 16 dependent adds on AVX-512; with one accumulator the
//! loop itself is a latency chain too. An rfactor's combination (a layer norm's row sum of 32
//! partials, twice a row) spent much of its time there: a two-row layer norm kernel on a Zen 4
//! took 7.49 us with it and 6.56 us with the lanes summed as a tree
//! (docs/experiments/2026-11-29-row-pairs-zen4.md).

use super::regtile::{map_lins, vector_form};
use super::window::identity;
use super::writer::{Gen, Operands, float_literal};
use crate::ir::ReduceOp;
use crate::lower::{Lin, VExpr, Var};
use std::fmt::Write;

/// Independent accumulators at most: four chains hide most of a vector add's latency, and
/// leave the registers to the operands.
const MAX_ACCUMULATORS: i64 = 4;

/// The vector lane of the written form: a variable no loop has, substituted away before any C
/// is written.
const LANE: Var = Var::Loop {
    stage: usize::MAX,
    node: usize::MAX,
};

/// `value` with the loop variable `var` at lane `LANE` of the vector starting `offset` after it.
fn at_lane(value: &VExpr, var: Var, offset: i64) -> VExpr {
    map_lins(value, &|l: &Lin| {
        l.substitute(&|v| (v == var).then(|| Lin::var(var).add(&Lin::var(LANE)).add_const(offset)))
    })
}

/// How many accumulators a loop of `extent` takes in vectors of `lanes`, if it qualifies.
pub(super) fn accumulators(var: Var, extent: i64, lanes: i64, value: &VExpr) -> Option<i64> {
    if lanes < 2 || extent < lanes || extent % lanes != 0 {
        return None;
    }
    vector_form(&at_lane(value, var, 0), LANE)?;
    let vectors = extent / lanes;
    [MAX_ACCUMULATORS, 2, 1]
        .into_iter()
        .find(|a| vectors % a == 0)
}

/// The horizontal reductions of one vector: `th_hsum`, `th_hmax`, `th_hmin` (the scalar
/// helpers' semantics, as the plain loops'). A tree of rotations, each step combining the
/// vector with itself turned by half the lanes left: lane 0 ends with the whole. Through an
/// array of lanes instead, GCC stored the vector and read the lanes back one by one, as slow
/// as the in-order sum it replaces.
pub(super) fn helpers(lanes: i64) -> String {
    let mut s = String::from("#ifndef TH_HREDUCE\n#define TH_HREDUCE\n");
    let mut steps = vec![];
    let mut w = lanes / 2;
    while w > 0 {
        let idx: Vec<String> = (0..lanes).map(|i| ((i + w) % lanes).to_string()).collect();
        steps.push(format!("TH_SHUFFLE2(v, v, {})", idx.join(", ")));
        w /= 2;
    }
    for (name, op) in [
        ("th_hsum", "v + {r}"),
        ("th_hmax", "th_vmax(v, {r})"),
        ("th_hmin", "th_vmin(v, {r})"),
    ] {
        let body: String = steps
            .iter()
            .map(|r| format!("v = {}; ", op.replace("{r}", r)))
            .collect();
        let _ = writeln!(
            s,
            "static inline __attribute__((unused)) float {name}(th_vf v) {{ {body}return v[0]; }}"
        );
    }
    s.push_str("#endif\n\n");
    s
}

impl Gen<'_> {
    /// Writes the loop over `v` (C name `name`) as `acc` vector accumulators into `target`.
    pub(super) fn vector_reduction(
        &mut self,
        (var, name, extent, acc): (Var, &str, i64, i64),
        target: &str,
        value: &VExpr,
        op: ReduceOp,
    ) {
        let lanes = self.lanes;
        self.vector_reductions = true;
        let regs: Vec<String> = (0..acc).map(|_| self.names.fresh("th_hacc")).collect();
        let start = match op {
            ReduceOp::Sum => "(th_vf){0}".to_string(),
            _ => format!("((th_vf){{0}} + {})", float_literal(identity(op))),
        };
        let combine = |a: &str, b: &str| match op {
            ReduceOp::Sum => format!("{a} + {b}"),
            ReduceOp::Max => format!("th_vmax({a}, {b})"),
            ReduceOp::Min => format!("th_vmin({a}, {b})"),
        };
        self.line("{");
        self.depth += 1;
        for r in &regs {
            self.line(&format!("th_vf {r} = {start};"));
        }
        self.line(&format!(
            "for (int {name} = 0; {name} < {extent}; {name} += {}) {{",
            acc * lanes
        ));
        self.depth += 1;
        let mut operands = Operands::default();
        let updates: Vec<String> = regs
            .iter()
            .enumerate()
            .map(|(a, r)| {
                let shifted = at_lane(value, var, a as i64 * lanes);
                let (e, vector) = self.vector_value(&shifted, LANE, (0, lanes), &mut operands);
                let e = if vector {
                    e
                } else {
                    format!("((th_vf){{0}} + {e})")
                };
                format!("{r} = {};", combine(r, &e))
            })
            .collect();
        operands.write(self);
        for u in updates {
            self.line(&u);
        }
        self.depth -= 1;
        self.line("}");
        // Pairwise, then across the lanes.
        let mut live = regs;
        while live.len() > 1 {
            let next: Vec<String> = live.chunks(2).map(|p| p[0].clone()).collect();
            for p in live.chunks(2) {
                self.line(&format!("{} = {};", p[0], combine(&p[0], &p[1])));
            }
            live = next;
        }
        let h = match op {
            ReduceOp::Sum => format!("{target} + th_hsum({})", live[0]),
            ReduceOp::Max => format!("th_maxf({target}, th_hmax({}))", live[0]),
            ReduceOp::Min => format!("th_minf({target}, th_hmin({}))", live[0]),
        };
        self.line(&format!("{target} = {h};"));
        self.depth -= 1;
        self.line("}");
    }
}
