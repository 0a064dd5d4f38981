//! Selector axes: short space axes whose value picks one of a stage's expressions, as the
//! row and column index of a Winograd transform's constant matrix (`select(e == 0, d0 - d2,
//! select(e == 1, d1 + d2, ...))`). Computed as an outer loop, every element evaluates the
//! condition chain inside the vector loop, and vectorized code computes every branch and
//! blends: a Winograd input transform's best schedule ran at 3.75 GFLOP/s so. Moved just
//! outside the vector loop and unrolled, each copy of the body has constant conditions the C
//! compiler folds away, leaving one branch: 29-33 GFLOP/s (docs/experiments/2026-12-06-winograd.md).
//! Ansor does the same for its Winograd stages (`simplify_const_tensor_indices`).

use super::decision::Decider;
use super::steps::{AnnotateContext, Gen, parallel, pick_parallel, vectorize};
use crate::ir::{CmpOp, ComputeDag, Cond, Expr, Stage};
use crate::schedule::{Annotation, Step};
use rand::Rng;

/// The longest axis taken as a selector: its loop is unrolled, copying the body that often.
pub const MAX_SELECTOR_EXTENT: i64 = 8;

/// The space axes of an elementwise `stage`, other than its innermost (the vector loop), that
/// are compared for equality with a constant in a `select` and are at most
/// [`MAX_SELECTOR_EXTENT`] long, in axis order. Padding and concatenation compare ranges
/// (`h - 1 >= 0`, `c < 32`), so they have none.
pub fn selector_axes(stage: &Stage) -> Vec<usize> {
    match stage.body().filter(|_| !stage.is_reduction()) {
        Some(body) => axes_of(body, stage.space()),
        None => vec![],
    }
}

/// [`selector_axes`] of stage `s` of `dag` with the bodies of the stages `inlined` says
/// substituted where it reads them: an output transform inlined into its epilogue makes the
/// epilogue's loops the ones to unroll.
pub fn selector_axes_through(dag: &ComputeDag, s: usize, inlined: &[bool]) -> Vec<usize> {
    let stage = &dag.stages[s];
    match stage.body().filter(|_| !stage.is_reduction()) {
        Some(body) => axes_of(&expand(dag, body, inlined), stage.space()),
        None => vec![],
    }
}

/// `e` with every read of an inlined elementwise stage replaced by that stage's body at the
/// read's indices, recursively.
fn expand(dag: &ComputeDag, e: &Expr, inlined: &[bool]) -> Expr {
    match e {
        Expr::Load(t, idx) if inlined.get(*t) == Some(&true) => {
            match dag.stages[*t]
                .body()
                .filter(|_| !dag.stages[*t].is_reduction())
            {
                Some(body) => expand(dag, &body.substitute_axes(idx), inlined),
                None => e.clone(),
            }
        }
        Expr::Const(_) | Expr::Load(..) | Expr::Index(_) => e.clone(),
        Expr::Unary(o, a) => Expr::Unary(*o, Box::new(expand(dag, a, inlined))),
        Expr::Binary(o, a, b) => Expr::Binary(
            *o,
            Box::new(expand(dag, a, inlined)),
            Box::new(expand(dag, b, inlined)),
        ),
        Expr::Select(c, a, b) => Expr::Select(
            c.clone(),
            Box::new(expand(dag, a, inlined)),
            Box::new(expand(dag, b, inlined)),
        ),
    }
}

fn axes_of(body: &Expr, space: &[crate::ir::Axis]) -> Vec<usize> {
    let mut found = vec![false; space.len()];
    visit(body, &mut |a| {
        if a < found.len() {
            found[a] = true;
        }
    });
    (0..space.len().saturating_sub(1))
        .filter(|&a| found[a] && space[a].extent > 1 && space[a].extent <= MAX_SELECTOR_EXTENT)
        .collect()
}

fn visit(e: &Expr, f: &mut impl FnMut(usize)) {
    match e {
        Expr::Const(_) | Expr::Load(..) | Expr::Index(_) => {}
        Expr::Unary(_, a) => visit(a, f),
        Expr::Binary(_, a, b) => {
            visit(a, f);
            visit(b, f)
        }
        Expr::Select(c, a, b) => {
            visit_cond(c, f);
            visit(a, f);
            visit(b, f)
        }
    }
}

fn visit_cond(c: &Cond, f: &mut impl FnMut(usize)) {
    match c {
        // `axis == k` (either side): one axis with coefficient 1 against a constant.
        Cond::Index(CmpOp::Eq, a, b) => {
            let d = a.add(&b.scale(-1));
            if let [(axis, 1 | -1)] = d.terms[..] {
                f(axis)
            }
        }
        Cond::Index(..) => {}
        Cond::Value(_, a, b) => {
            visit(a, f);
            visit(b, f)
        }
        Cond::And(a, b) | Cond::Or(a, b) => {
            visit_cond(a, f);
            visit_cond(b, f)
        }
        Cond::Not(a) => visit_cond(a, f),
    }
}

/// Schedules an elementwise stage at root with its selector axes `sel` (non-empty) unrolled
/// just outside its vectorized innermost axis; the other axes keep their order, the outer ones
/// fused and parallel as [`super::skip`] would.
pub(super) fn skip_with_selectors<R: Rng>(
    g: &mut Gen,
    t: usize,
    space: &[i64],
    sel: &[usize],
    ctx: &AnnotateContext,
    d: &mut Decider<R>,
) -> Result<(), String> {
    let last = space.len() - 1;
    let mut order: Vec<usize> = (0..last).filter(|a| !sel.contains(a)).collect();
    let outer: Vec<i64> = order.iter().map(|&a| space[a]).collect();
    order.extend_from_slice(sel);
    order.push(last);
    g.apply(Step::Reorder { stage: t, order })?;
    let k = pick_parallel(d, &outer, ctx);
    let removed = parallel(g, t, k, &outer)?;
    for j in 0..sel.len() {
        g.apply(Step::Annotate {
            stage: t,
            iter: outer.len() - removed + j,
            ann: Annotation::Unroll,
        })?;
    }
    vectorize(g, t, g.leaves(t) - 1, space[last])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(src: &str) -> Stage {
        let dag = crate::text::parse(src).unwrap();
        dag.stages.last().unwrap().clone()
    }

    #[test]
    fn equalities_with_constants_select_and_ranges_do_not() {
        let s =
            stage("V[e,u,t,c] = select(e == 0, X[u,t,c], X[u,t,c] * 2) where e<4, u<4, t<28, c<64");
        assert_eq!(selector_axes(&s), vec![0]);
        let s =
            stage("V[e,u,t,c] = select(e == 0 && u == 1, X[t,c], 0.0) where e<4, u<4, t<28, c<64");
        assert_eq!(selector_axes(&s), vec![0, 1]);
        // Padding compares ranges; a long axis would copy the body too often; the innermost
        // axis is the vector loop.
        let s = stage("P[h,c] = select(h - 1 >= 0 && h - 1 < 4, X[h-1,c], 0.0) where h<6, c<8");
        assert!(selector_axes(&s).is_empty());
        let s = stage("V[e,c] = select(e == 0, X[e,c], 0.0) where e<9, c<8");
        assert!(selector_axes(&s).is_empty());
        let s = stage("V[c,e] = select(e == 0, X[c,e], 0.0) where c<8, e<4");
        assert!(selector_axes(&s).is_empty());
    }

    #[test]
    fn an_inlined_producer_lends_its_selectors_to_its_reader() {
        let dag = crate::text::parse(
            "O[a,t,c] = select(a == 0, X[t,c], X[t,c] * 2) where a<2, t<28, c<64\n\
             Y[t,a,c] = relu(O[a,t,c] + 1) where t<28, a<2, c<64",
        )
        .unwrap();
        let y = dag.stages.len() - 1;
        let o = y - 1;
        let mut inlined = vec![false; dag.stages.len()];
        assert!(selector_axes_through(&dag, y, &inlined).is_empty());
        inlined[o] = true;
        assert_eq!(selector_axes_through(&dag, y, &inlined), vec![1]);
    }
}
