//! The reference implementation every measured kernel is checked against: a direct
//! interpreter of the DAG in f64, independent of schedules, lowering and code generation, so
//! that a bug there shows as a wrong answer instead of hiding in both.

use crate::data;
use crate::ir::{Affine, BinaryOp, ComputeDag, Cond, Expr, ReduceOp, StageKind};
use crate::lower::strides;

/// A load compiled to a flat index: `offset + sum(coef[a] * axis[a])`.
struct FlatLoad {
    tensor: usize,
    offset: i64,
    coefs: Vec<(usize, i64)>,
}

/// Outputs of the DAG (in `ComputeDag::outputs()` order) on the deterministic inputs of
/// [`data::input_typed`], as the kernel stores them: f32 outputs rounded to f32, integer ones
/// exact (their values are integers far inside f64's 2^53), 8-bit ones requantized from f64
/// (a kernel's f32 may round a tie the other way: see `measure::check`).
pub fn outputs(dag: &ComputeDag) -> Vec<Vec<f64>> {
    let vals = evaluate(dag);
    dag.outputs()
        .into_iter()
        .map(|o| match dag.stages[o].dtype {
            d if d.is_int() => vals[o].clone(),
            _ => vals[o].iter().map(|&v| f64::from(v as f32)).collect(),
        })
        .collect()
}

/// Every stage's values, in f64.
pub fn evaluate(dag: &ComputeDag) -> Vec<Vec<f64>> {
    evaluate_rows(dag, ROW)
}

/// [`evaluate`] with rows of at most `row_len` points.
fn evaluate_rows(dag: &ComputeDag, row_len: usize) -> Vec<Vec<f64>> {
    let mut vals: Vec<Vec<f64>> = Vec::with_capacity(dag.stages.len());
    let mut ordinal = 0u32;
    for s in &dag.stages {
        let n = s.num_elements() as usize;
        match &s.kind {
            StageKind::Placeholder => {
                vals.push(
                    (0..n as u32)
                        .map(|i| data::input_of(ordinal, i, s.dtype, s.data))
                        .collect(),
                );
                ordinal += 1;
            }
            StageKind::Compute {
                space,
                reduce_axes,
                reduce,
                body,
            } => {
                let space_ext: Vec<i64> = space.iter().map(|a| a.extent).collect();
                let red_ext: Vec<i64> = reduce_axes.iter().map(|a| a.extent).collect();
                let compiled = compile(body, dag);
                let ns = space_ext.len();
                let out = parallel_fill(n, |start, chunk: &mut [f64]| {
                    let mut axes = vec![0i64; ns + red_ext.len()];
                    unravel(start as i64, &space_ext, &mut axes[..ns]);
                    let mut scratch = vec![0.0; row_len * (depth(&compiled) + 1)];
                    let mut done = 0;
                    while done < chunk.len() {
                        // A row: consecutive points along the innermost space axis, evaluated
                        // together so that the interpreter's overhead is paid once per row.
                        let len = match ns {
                            0 => 1,
                            _ => ((space_ext[ns - 1] - axes[ns - 1]) as usize)
                                .min(chunk.len() - done)
                                .min(row_len),
                        };
                        let row = &mut chunk[done..done + len];
                        match reduce {
                            None => eval_row(&compiled, &mut axes, ns, row, &mut scratch, &vals),
                            Some(op) => reduce_row(
                                *op,
                                &compiled,
                                &mut axes,
                                ns,
                                &red_ext,
                                row,
                                &mut scratch,
                                &vals,
                            ),
                        }
                        for _ in 0..len {
                            increment(&mut axes[..ns], &space_ext);
                        }
                        done += len;
                    }
                });
                // An 8-bit stage stores its f32 value requantized (`ir::types`).
                let out = match s.dtype.is_8bit() {
                    true => out.into_iter().map(|v| s.dtype.quantize(v)).collect(),
                    false => out,
                };
                vals.push(out);
            }
        }
    }
    vals
}

/// Points evaluated together: long enough to amortize the tree walk, short enough that a
/// row's temporaries stay in L1.
const ROW: usize = 64;

/// `out[t]` = the reduction at the space point `axes` with the innermost space axis (`ns - 1`)
/// advanced by `t`. Each point sums its terms in the same order as a scalar loop would, so the
/// values do not depend on the row length.
#[allow(clippy::too_many_arguments)]
fn reduce_row(
    op: ReduceOp,
    e: &CExpr,
    axes: &mut [i64],
    ns: usize,
    red: &[i64],
    out: &mut [f64],
    scratch: &mut [f64],
    vals: &[Vec<f64>],
) {
    out.fill(op.identity());
    axes[ns..].iter_mut().for_each(|a| *a = 0);
    let total: i64 = red.iter().product();
    let (term, rest) = scratch.split_at_mut(out.len());
    for _ in 0..total {
        eval_row(e, axes, ns, term, rest, vals);
        match op {
            ReduceOp::Sum => out.iter_mut().zip(&*term).for_each(|(a, x)| *a += x),
            _ => out
                .iter_mut()
                .zip(&*term)
                .for_each(|(a, x)| *a = op.combine(*a, *x)),
        }
        increment(&mut axes[ns..], red);
    }
}

/// Scratch rows a subtree needs beyond its output row.
fn depth(e: &CExpr) -> usize {
    match e {
        CExpr::Const(_) | CExpr::Load(_) | CExpr::Index(_) | CExpr::Select(..) => 0,
        CExpr::Unary(_, a) => depth(a),
        CExpr::Binary(_, a, b) => depth(a).max(1 + depth(b)),
    }
}

/// `out[t]` = `e` at `axes` with the innermost space axis advanced by `t`; `axes` is left as
/// it was. `scratch` holds at least `depth(e)` rows.
fn eval_row(
    e: &CExpr,
    axes: &mut [i64],
    ns: usize,
    out: &mut [f64],
    scratch: &mut [f64],
    vals: &[Vec<f64>],
) {
    let inner = ns.wrapping_sub(1);
    match e {
        CExpr::Const(c) => out.fill(*c),
        CExpr::Load(l) => {
            let base = l.offset + l.coefs.iter().map(|&(a, c)| c * axes[a]).sum::<i64>();
            let step = l
                .coefs
                .iter()
                .find(|&&(a, _)| a == inner)
                .map_or(0, |&(_, c)| c);
            let v = &vals[l.tensor];
            match step {
                0 => out.fill(v[base as usize]),
                1 => out.copy_from_slice(&v[base as usize..base as usize + out.len()]),
                _ => out
                    .iter_mut()
                    .enumerate()
                    .for_each(|(t, o)| *o = v[(base + step * t as i64) as usize]),
            }
        }
        CExpr::Unary(o, a) => {
            eval_row(a, axes, ns, out, scratch, vals);
            out.iter_mut().for_each(|x| *x = o.eval(*x));
        }
        CExpr::Binary(o, a, b) => {
            eval_row(a, axes, ns, out, scratch, vals);
            let (tmp, rest) = scratch.split_at_mut(out.len());
            eval_row(b, axes, ns, tmp, rest, vals);
            match o {
                BinaryOp::Add => out.iter_mut().zip(&*tmp).for_each(|(x, y)| *x += y),
                BinaryOp::Mul => out.iter_mut().zip(&*tmp).for_each(|(x, y)| *x *= y),
                _ => out
                    .iter_mut()
                    .zip(&*tmp)
                    .for_each(|(x, y)| *x = o.eval(*x, *y)),
            }
        }
        // Index expressions and selects point by point: a select may guard a load that is out
        // of bounds at the points it does not take.
        CExpr::Index(_) | CExpr::Select(..) if ns == 0 => out[0] = eval(e, axes, vals),
        CExpr::Index(_) | CExpr::Select(..) => {
            let start = axes[inner];
            for (t, o) in out.iter_mut().enumerate() {
                axes[inner] = start + t as i64;
                *o = eval(e, axes, vals);
            }
            axes[inner] = start;
        }
    }
}

/// Fills `n` values on all cores, each thread a contiguous chunk.
fn parallel_fill(n: usize, f: impl Fn(usize, &mut [f64]) + Sync) -> Vec<f64> {
    let mut out = vec![0.0; n];
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(n.max(1));
    let chunk = n.div_ceil(threads).max(1);
    std::thread::scope(|sc| {
        for (k, part) in out.chunks_mut(chunk).enumerate() {
            let f = &f;
            sc.spawn(move || f(k * chunk, part));
        }
    });
    out
}

fn unravel(mut flat: i64, ext: &[i64], out: &mut [i64]) {
    for d in (0..ext.len()).rev() {
        out[d] = flat % ext[d];
        flat /= ext[d];
    }
}

fn increment(axes: &mut [i64], ext: &[i64]) {
    for d in (0..ext.len()).rev() {
        axes[d] += 1;
        if axes[d] < ext[d] {
            return;
        }
        axes[d] = 0;
    }
}

/// The body with loads flattened, evaluated per point.
enum CExpr {
    Const(f64),
    Load(FlatLoad),
    Index(Affine),
    Unary(crate::ir::UnaryOp, Box<CExpr>),
    Binary(crate::ir::BinaryOp, Box<CExpr>, Box<CExpr>),
    Select(Box<CCond>, Box<CExpr>, Box<CExpr>),
}

enum CCond {
    Index(crate::ir::CmpOp, Affine, Affine),
    Value(crate::ir::CmpOp, Box<CExpr>, Box<CExpr>),
    And(Box<CCond>, Box<CCond>),
    Or(Box<CCond>, Box<CCond>),
    Not(Box<CCond>),
}

fn compile(e: &Expr, dag: &ComputeDag) -> CExpr {
    match e {
        Expr::Const(c) => CExpr::Const(*c),
        Expr::Index(a) => CExpr::Index(a.clone()),
        Expr::Load(t, idx) => {
            let st = strides(&dag.stages[*t].shape);
            let flat = idx
                .iter()
                .zip(&st)
                .fold(Affine::constant(0), |acc, (a, &s)| acc.add(&a.scale(s)));
            CExpr::Load(FlatLoad {
                tensor: *t,
                offset: flat.offset,
                coefs: flat.terms,
            })
        }
        Expr::Unary(o, a) => CExpr::Unary(*o, Box::new(compile(a, dag))),
        Expr::Binary(o, a, b) => {
            CExpr::Binary(*o, Box::new(compile(a, dag)), Box::new(compile(b, dag)))
        }
        Expr::Select(c, a, b) => CExpr::Select(
            Box::new(compile_cond(c, dag)),
            Box::new(compile(a, dag)),
            Box::new(compile(b, dag)),
        ),
    }
}

fn compile_cond(c: &Cond, dag: &ComputeDag) -> CCond {
    match c {
        Cond::Index(o, a, b) => CCond::Index(*o, a.clone(), b.clone()),
        Cond::Value(o, a, b) => {
            CCond::Value(*o, Box::new(compile(a, dag)), Box::new(compile(b, dag)))
        }
        Cond::And(a, b) => CCond::And(
            Box::new(compile_cond(a, dag)),
            Box::new(compile_cond(b, dag)),
        ),
        Cond::Or(a, b) => CCond::Or(
            Box::new(compile_cond(a, dag)),
            Box::new(compile_cond(b, dag)),
        ),
        Cond::Not(a) => CCond::Not(Box::new(compile_cond(a, dag))),
    }
}

fn eval(e: &CExpr, axes: &[i64], vals: &[Vec<f64>]) -> f64 {
    match e {
        CExpr::Const(c) => *c,
        CExpr::Load(l) => {
            let i = l.offset + l.coefs.iter().map(|&(a, c)| c * axes[a]).sum::<i64>();
            vals[l.tensor][i as usize]
        }
        CExpr::Index(a) => a.eval(axes) as f64,
        CExpr::Unary(o, a) => o.eval(eval(a, axes, vals)),
        CExpr::Binary(o, a, b) => o.eval(eval(a, axes, vals), eval(b, axes, vals)),
        CExpr::Select(c, a, b) => {
            if eval_cond(c, axes, vals) {
                eval(a, axes, vals)
            } else {
                eval(b, axes, vals)
            }
        }
    }
}

fn eval_cond(c: &CCond, axes: &[i64], vals: &[Vec<f64>]) -> bool {
    match c {
        CCond::Index(o, a, b) => o.eval(a.eval(axes), b.eval(axes)),
        CCond::Value(o, a, b) => o.eval(eval(a, axes, vals), eval(b, axes, vals)),
        CCond::And(a, b) => eval_cond(a, axes, vals) && eval_cond(b, axes, vals),
        CCond::Or(a, b) => eval_cond(a, axes, vals) || eval_cond(b, axes, vals),
        CCond::Not(a) => !eval_cond(a, axes, vals),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;

    #[test]
    fn matmul_matches_a_direct_loop() {
        let (m, n, k) = (7, 5, 3);
        let out = outputs(&ops::matmul(m, n, k).unwrap());
        let a = data::input_tensor(0, (m * k) as usize);
        let b = data::input_tensor(1, (k * n) as usize);
        for i in 0..m as usize {
            for j in 0..n as usize {
                let want: f64 = (0..k as usize)
                    .map(|r| f64::from(a[i * k as usize + r]) * f64::from(b[r * n as usize + j]))
                    .sum();
                assert!((out[0][i * n as usize + j] - want).abs() < 1e-6);
            }
        }
    }

    /// The integer forms read integer inputs and sum exactly: a direct loop in i64.
    #[test]
    fn integer_matmul_is_exact() {
        use crate::ir::DType;
        let (m, n, k) = (5i64, 7i64, 300i64);
        for (dt, a_t) in [("u8i8", DType::U8), ("i8i8", DType::I8)] {
            let spec = format!("matmul(m={m},n={n},k={k},dtype={dt})");
            let out = outputs(&ops::OpSpec::parse(&spec).unwrap().dag().unwrap());
            let a = |i: i64| data::input_typed(0, i as u32, a_t) as i64;
            let b = |i: i64| data::input_typed(1, i as u32, DType::I8) as i64;
            for i in 0..m {
                for j in 0..n {
                    let want: i64 = (0..k).map(|r| a(i * k + r) * b(r * n + j)).sum();
                    assert_eq!(out[0][(i * n + j) as usize], want as f64, "{spec}");
                }
            }
        }
    }

    /// Rows change how the interpreter walks, never a value: every library op, bit for bit,
    /// against one point at a time and an odd row length that splits rows at chunk ends.
    #[test]
    fn rows_give_the_values_of_single_points() {
        for spec in [
            "matmul(9,13,5)",
            "dense(m=3,n=10,k=7,bias=1,relu=1)",
            "conv2d_nchw(n=1,c=3,h=7,w=9,f=4,kh=3,kw=3,pad=1)",
            "conv2d_nhwc(n=1,h=7,w=9,c=3,f=4,kh=3,kw=3,pad=1,stride=2)",
            "depthwise_conv2d_nchw(n=1,c=3,h=9,w=7,kh=3,kw=3,pad=1)",
            "depthwise_conv2d_nhwc(n=1,h=9,w=7,c=19,kh=5,kw=5,pad=2,stride=2)",
            "batch_matmul(b=2,m=5,n=6,k=3)",
            "softmax(m=3,n=17)",
            "max_pool2d(n=1,c=2,h=7,w=7,kh=3,kw=3,stride=2,pad=1)",
        ] {
            let dag = ops::OpSpec::parse(spec).unwrap().dag().unwrap();
            let one = evaluate_rows(&dag, 1);
            for row in [3, ROW] {
                let rows = evaluate_rows(&dag, row);
                for (a, b) in one.iter().zip(&rows) {
                    assert!(
                        a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
                        "{spec}: rows of {row} differ from single points"
                    );
                }
            }
        }
    }

    #[test]
    fn softmax_rows_sum_to_one() {
        let out = outputs(&ops::softmax(3, 17).unwrap());
        for row in out[0].chunks(17) {
            let s: f64 = row.iter().sum();
            assert!((s - 1.0).abs() < 1e-5, "row sums to {s}");
        }
    }

    #[test]
    fn max_pool_with_padding_ignores_the_padding() {
        let dag =
            ops::pool2d(ops::PoolKind::Max, 1, 1, 4, 4, ops::Window::square(3, 1, 1)).unwrap();
        let out = outputs(&dag);
        let x = data::input_tensor(0, 16);
        // The corner window covers x[0..2, 0..2] only.
        let want = [x[0], x[1], x[4], x[5]]
            .into_iter()
            .fold(f32::NEG_INFINITY, f32::max);
        assert_eq!(out[0][0], f64::from(want));
    }

    /// The compared forms pad with the type's least value: every output of an NHWC max pool is
    /// the max of the data its window covers, padding ignored, negative i8 maxima included.
    #[test]
    fn compared_max_pool_ignores_the_padding() {
        use crate::ir::{DType, InputData};
        let (h, w, c) = (5, 4, 3);
        for (dtype, t) in [("i8", DType::I8), ("u8", DType::U8)] {
            let spec = format!(
                "max_pool2d_nhwc(n=1,h={h},w={w},c={c},kh=3,kw=3,stride=1,pad=1,dtype={dtype})"
            );
            let out = outputs(&ops::build_op(&spec).unwrap());
            let x = |y: i64, z: i64, ch: i64| {
                let i = ((y * w + z) * c + ch) as u32;
                data::input_of(0, i, t, InputData::Usual)
            };
            let mut negative = 0;
            for (y, z, ch) in
                (0..h).flat_map(|y| (0..w).flat_map(move |z| (0..c).map(move |ch| (y, z, ch))))
            {
                let want = (y - 1..=y + 1)
                    .flat_map(|yy| (z - 1..=z + 1).map(move |zz| (yy, zz)))
                    .filter(|&(yy, zz)| (0..h).contains(&yy) && (0..w).contains(&zz))
                    .map(|(yy, zz)| x(yy, zz, ch))
                    .fold(f64::NEG_INFINITY, f64::max);
                negative += usize::from(want < 0.0);
                assert_eq!(out[0][((y * w + z) * c + ch) as usize], want, "{spec}");
            }
            // The i8 data reach negative maxima, where a padding of 0 would show.
            assert_eq!(negative > 0, t == DType::I8, "{spec}");
        }
    }
}
