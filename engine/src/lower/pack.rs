//! Ansor's layout rewrite for layout-free inputs: an input read at one place is packed into the
//! order its reading loop nest walks it, and the load rewritten to the packed index.

use super::bounds::Lowerer;
use super::iexpr::{Lin, Var};
use super::program::{PackDigit, PackedInput, Stmt, VCond, VExpr, strides};

/// Packed layouts larger than this multiple of the tensor are not worth their memory (an
/// input read through a sum of loop variables, `y + ry`, would be unrolled im2col-style).
const MAX_PACK_BLOWUP: i64 = 2;

impl Lowerer<'_> {
    /// Ansor's layout rewrite for one input: when the program reads `buf` at exactly one
    /// place, its index (region starts substituted, so it is in loop variables only) is a sum
    /// of atoms; the packed layout has one dimension per atom, ordered as their loops nest
    /// (outermost first; the larger coefficient first within one loop), so the innermost loop
    /// walks the packed buffer contiguously and each tile's slice of it is one block. The load
    /// is rewritten to the packed index. `None` (nothing changed) where it does not apply.
    pub(super) fn pack_layout(&mut self, buf: usize, body: &mut [Stmt]) -> Option<PackedInput> {
        let mut sites = vec![];
        let mut stack = vec![];
        find_loads(body, buf, &mut stack, &mut sites);
        let [(index, nest)] = sites.as_slice() else {
            return None;
        };
        // Region starts may be defined through other region starts: substitute to a fixpoint.
        let mut lin = index.clone();
        for _ in 0..16 {
            let mut vs = vec![];
            lin.vars(&mut vs);
            if !vs.iter().any(|v| matches!(v, Var::Lo { .. })) {
                break;
            }
            lin = lin.substitute(&|v| match v {
                Var::Lo { stage, dim } => Some(self.info[stage].as_ref()?.lo_def[dim].clone()),
                _ => None,
            });
        }
        let mut digits = vec![];
        let range = |v: Var| self.ranges.get(&v).copied().unwrap_or((0, 0));
        for (atom, coef) in &lin.terms {
            let mut vs = vec![];
            atom.vars(&mut vs);
            let depth = vs
                .iter()
                .map(|v| nest.iter().position(|n| n == v))
                .collect::<Option<Vec<_>>>()?
                .into_iter()
                .max()?;
            let (lo, hi) = atom.range(&range);
            digits.push((depth, *coef, atom.clone(), lo, hi - lo + 1));
        }
        digits.sort_by_key(|d| (d.0, -d.1.abs()));
        let orig = &self.buffers[buf];
        let elems: i64 = digits
            .iter()
            .map(|d| d.4)
            .try_fold(1i64, |a, e| a.checked_mul(e))?;
        if elems > MAX_PACK_BLOWUP * orig.elems().max(1) {
            return None;
        }
        let mut new_index = Lin::constant(0);
        let mut stride = 1;
        for (_, _, atom, lo, ext) in digits.iter().rev() {
            new_index = new_index.add(&Lin::atom(atom.clone()).add_const(-lo).scale(stride));
            stride *= ext;
        }
        set_load_index(body, buf, &new_index);
        let pk = PackedInput {
            buf,
            orig_shape: orig.shape.clone(),
            digits: digits
                .iter()
                .map(|d| PackDigit {
                    coef: d.1,
                    lo: d.3,
                    extent: d.4,
                })
                .collect(),
            c: lin.c,
        };
        self.buffers[buf].shape = pk.digits.iter().map(|d| d.extent).collect();
        self.buffers[buf].strides = strides(&self.buffers[buf].shape);
        Some(pk)
    }
}

/// Every load of `buf` in `body`: its index and the loop variables around it, outermost first.
fn find_loads(body: &[Stmt], buf: usize, stack: &mut Vec<Var>, out: &mut Vec<(Lin, Vec<Var>)>) {
    for s in body {
        match s {
            Stmt::For { var, body, .. } => {
                stack.push(*var);
                find_loads(body, buf, stack, out);
                stack.pop();
            }
            Stmt::Alloc { body, .. } | Stmt::Guard { body, .. } => {
                find_loads(body, buf, stack, out)
            }
            Stmt::Let { .. } => {}
            Stmt::Store { value, .. } => visit_vexpr(value, &mut |e| {
                if let VExpr::Load { buf: b, index } = e
                    && *b == buf
                {
                    out.push((index.clone(), stack.clone()));
                }
            }),
        }
    }
}

fn visit_vexpr(e: &VExpr, f: &mut impl FnMut(&VExpr)) {
    f(e);
    match e {
        VExpr::Const(_) | VExpr::Load { .. } | VExpr::Index(_) => {}
        VExpr::Unary(_, a) => visit_vexpr(a, f),
        VExpr::Binary(_, a, b) => {
            visit_vexpr(a, f);
            visit_vexpr(b, f)
        }
        VExpr::Select(c, a, b) => {
            visit_vcond(c, f);
            visit_vexpr(a, f);
            visit_vexpr(b, f)
        }
    }
}

fn visit_vcond(c: &VCond, f: &mut impl FnMut(&VExpr)) {
    match c {
        VCond::Index(..) => {}
        VCond::Value(_, a, b) => {
            visit_vexpr(a, f);
            visit_vexpr(b, f)
        }
        VCond::And(a, b) | VCond::Or(a, b) => {
            visit_vcond(a, f);
            visit_vcond(b, f)
        }
        VCond::Not(a) => visit_vcond(a, f),
    }
}

/// Sets the index of every load of `buf` (there is one: see `pack_layout`).
fn set_load_index(body: &mut [Stmt], buf: usize, index: &Lin) {
    fn in_expr(e: &mut VExpr, buf: usize, index: &Lin) {
        match e {
            VExpr::Load { buf: b, index: i } if *b == buf => *i = index.clone(),
            VExpr::Const(_) | VExpr::Load { .. } | VExpr::Index(_) => {}
            VExpr::Unary(_, a) => in_expr(a, buf, index),
            VExpr::Binary(_, a, b) => {
                in_expr(a, buf, index);
                in_expr(b, buf, index)
            }
            VExpr::Select(c, a, b) => {
                in_cond(c, buf, index);
                in_expr(a, buf, index);
                in_expr(b, buf, index)
            }
        }
    }
    fn in_cond(c: &mut VCond, buf: usize, index: &Lin) {
        match c {
            VCond::Index(..) => {}
            VCond::Value(_, a, b) => {
                in_expr(a, buf, index);
                in_expr(b, buf, index)
            }
            VCond::And(a, b) | VCond::Or(a, b) => {
                in_cond(a, buf, index);
                in_cond(b, buf, index)
            }
            VCond::Not(a) => in_cond(a, buf, index),
        }
    }
    for s in body {
        match s {
            Stmt::For { body, .. } | Stmt::Alloc { body, .. } | Stmt::Guard { body, .. } => {
                set_load_index(body, buf, index)
            }
            Stmt::Let { .. } => {}
            Stmt::Store { value, .. } => in_expr(value, buf, index),
        }
    }
}
