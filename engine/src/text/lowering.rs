//! Lowering the syntax tree: names resolved, input shapes inferred from the reads, index
//! expressions checked, and the [`ComputeDag`] built.

use super::error::{ParseError, line_col};
use super::syntax::{ComputeStmt, MAX_INDEX_INT, Node, NodeKind, Stmt};
use crate::ir::dag::{guarded_range, points};
use crate::ir::{
    Affine, Axis, BinaryOp, ComputeDag, Cond, DType, DagError, Expr, Stage, StageKind, UnaryOp,
};
use std::collections::HashMap;

const FUNCTIONS: &str = "exp, log, sqrt, rsqrt, tanh, sigmoid, erf, abs, relu, max, min, select";

struct Tensor {
    name: String,
    /// Offset of the first mention: orders the inputs, and locates errors about the tensor.
    first: usize,
    kind: TensorKind,
}

enum TensorKind {
    Input {
        shape: Vec<i64>,
        dtype: DType,
    },
    /// Read but never defined or declared: `hi` is the largest index read in each dimension.
    Inferred {
        hi: Vec<i64>,
    },
    /// Loads in the stage's body name tensors by their index in `Lowering::tensors`; they are
    /// renumbered to stage indices once all inputs are known.
    Compute(Stage),
}

struct Lowering<'a> {
    src: &'a str,
    tensors: Vec<Tensor>,
    by_name: HashMap<String, usize>,
    /// Every compute statement's output, `(statement number, offset)`: tells a tensor defined
    /// later apart from an input.
    computed: HashMap<String, (usize, usize)>,
    /// The statement being lowered.
    stmt: usize,
    axes: HashMap<String, usize>,
    ext: Vec<i64>,
    /// Conditions of the enclosing selects' then-branches: they bound the reads below them.
    guards: Vec<Cond>,
}

pub(super) fn lower(src: &str, stmts: &[Stmt]) -> Result<ComputeDag, ParseError> {
    let mut lw = Lowering {
        src,
        tensors: vec![],
        by_name: HashMap::new(),
        computed: HashMap::new(),
        stmt: 0,
        axes: HashMap::new(),
        ext: vec![],
        guards: vec![],
    };
    // Names first: every tensor is defined once, and declared inputs are known before any
    // statement reads them.
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (si, s) in stmts.iter().enumerate() {
        let (name, pos) = s.name_pos();
        if let Some(&prev) = seen.get(name) {
            let (l, c) = line_col(src, prev);
            let msg =
                format!("'{name}' is already defined at {l}:{c}; each tensor is defined once");
            return Err(ParseError::at(
                src,
                pos,
                "a new tensor name",
                format!("'{name}'"),
                Some(msg),
            ));
        }
        seen.insert(name, pos);
        match s {
            Stmt::Input(d) => lw.add(
                name,
                pos,
                TensorKind::Input {
                    shape: d.shape.clone(),
                    dtype: d.dtype,
                },
            ),
            Stmt::Compute(_) => {
                lw.computed.insert(name.into(), (si, pos));
            }
        }
    }
    for (si, s) in stmts.iter().enumerate() {
        if let Stmt::Compute(c) = s {
            lw.stmt = si;
            let stage = lw.statement(c)?;
            lw.add(&c.name, c.pos, TensorKind::Compute(stage));
        }
    }
    lw.finish()
}

/// Names of variables (in order of appearance) and of tensors read, in `n`.
fn collect_names<'n>(n: &'n Node, vars: &mut Vec<(&'n str, usize)>, reads: &mut Vec<&'n str>) {
    match &n.kind {
        NodeKind::Var(v) => vars.push((v, n.pos)),
        NodeKind::Read(t, _) => reads.push(t),
        _ => {}
    }
    for c in n.kind.children() {
        collect_names(c, vars, reads);
    }
}

fn unary_fn(f: &str) -> Option<UnaryOp> {
    Some(match f {
        "exp" => UnaryOp::Exp,
        "log" => UnaryOp::Log,
        "sqrt" => UnaryOp::Sqrt,
        "rsqrt" => UnaryOp::Rsqrt,
        "tanh" => UnaryOp::Tanh,
        "sigmoid" => UnaryOp::Sigmoid,
        "erf" => UnaryOp::Erf,
        "abs" => UnaryOp::Abs,
        "relu" => UnaryOp::Relu,
        "round" => UnaryOp::Round,
        _ => return None,
    })
}

impl Lowering<'_> {
    fn add(&mut self, name: &str, first: usize, kind: TensorKind) {
        self.by_name.insert(name.into(), self.tensors.len());
        self.tensors.push(Tensor {
            name: name.into(),
            first,
            kind,
        });
    }

    fn err(
        &self,
        pos: usize,
        expected: impl Into<String>,
        found: impl Into<String>,
        msg: String,
    ) -> ParseError {
        ParseError::at(self.src, pos, expected, found, Some(msg))
    }

    fn statement(&mut self, c: &ComputeStmt) -> Result<Stage, ParseError> {
        // The left-hand variables are the space axes, in order.
        let mut vars: Vec<(&str, usize)> = vec![];
        for (v, p) in &c.lhs {
            if vars.iter().any(|(n, _)| n == v) {
                let msg = format!("variable '{v}' appears twice on the left-hand side");
                return Err(self.err(*p, "a distinct variable", format!("'{v}'"), msg));
            }
            vars.push((v, *p));
        }
        let n_space = vars.len();
        // The others, in order of first appearance, are the reduction axes.
        let (mut rhs, mut reads) = (vec![], vec![]);
        collect_names(&c.body, &mut rhs, &mut reads);
        for (v, p) in rhs {
            if !vars.iter().any(|(n, _)| *n == v) {
                vars.push((v, p));
            }
        }
        let mut extent: HashMap<&str, i64> = HashMap::new();
        for b in &c.bounds {
            if !vars.iter().any(|(n, _)| *n == b.var) {
                let msg = format!("variable '{}' is not used in this statement", b.var);
                return Err(self.err(
                    b.pos,
                    "a variable of this statement",
                    format!("'{}'", b.var),
                    msg,
                ));
            }
            if extent.insert(&b.var, b.extent).is_some() {
                let msg = format!("variable '{}' has two extents in the where clause", b.var);
                return Err(self.err(
                    b.pos,
                    "one extent per variable",
                    format!("'{}'", b.var),
                    msg,
                ));
            }
        }
        for &(v, p) in &vars {
            if !extent.contains_key(v) {
                let is_tensor = self.by_name.contains_key(v)
                    || self.computed.contains_key(v)
                    || reads.contains(&v);
                let msg = if is_tensor {
                    format!("'{v}' is a tensor: read it with indices, as in '{v}[...]'")
                } else {
                    format!("no extent for variable '{v}': add '{v} < N' to the where clause")
                };
                return Err(self.err(
                    p,
                    format!("an extent for variable '{v}'"),
                    format!("'{v}'"),
                    msg,
                ));
            }
        }
        if c.reduce.is_none() && vars.len() > n_space {
            let (v, p) = vars[n_space];
            let msg = format!(
                "variable '{v}' is not on the left-hand side: with '=' every variable indexes \
                 the output (use '+=', 'max=' or 'min=' to reduce over '{v}')"
            );
            return Err(self.err(p, "a variable of the left-hand side", format!("'{v}'"), msg));
        }
        if c.reduce.is_some() && vars.len() == n_space {
            let msg = format!(
                "'{}' reduces over the variables that are not on the left-hand side, \
                 but there are none: use '='",
                c.op
            );
            return Err(self.err(c.op_pos, "a reduction variable", "none", msg));
        }
        let ext: Vec<i64> = vars.iter().map(|(v, _)| extent[v]).collect();
        if points(&ext).is_none() {
            let msg =
                "this statement's iteration space is too large (at most 2^40 points)".to_string();
            return Err(self.err(c.pos, "a smaller iteration space", "a larger one", msg));
        }
        self.axes = vars
            .iter()
            .enumerate()
            .map(|(i, (v, _))| (v.to_string(), i))
            .collect();
        self.ext = ext.clone();
        self.guards.clear();
        let body = self.value(&c.body)?;
        let axis = |i: usize| Axis {
            name: vars[i].0.into(),
            extent: ext[i],
        };
        Ok(Stage {
            name: c.name.clone(),
            shape: ext[..n_space].to_vec(),
            dtype: c.dtype,
            data: Default::default(),
            kind: StageKind::Compute {
                space: (0..n_space).map(axis).collect(),
                reduce_axes: (n_space..vars.len()).map(axis).collect(),
                reduce: c.reduce,
                body,
            },
        })
    }

    /// A value expression. Index arithmetic in value position (`i`, `2*i - j`) becomes one
    /// `Expr::Index`, integer constant arithmetic a constant.
    fn value(&mut self, n: &Node) -> Result<Expr, ParseError> {
        if let Ok(a) = self.index(n) {
            return Ok(if a.terms.is_empty() {
                Expr::Const(a.offset as f64)
            } else {
                Expr::Index(a)
            });
        }
        Ok(match &n.kind {
            NodeKind::Num { value, .. } => Expr::Const(*value),
            NodeKind::Var(_) => Expr::Index(self.index(n)?),
            NodeKind::Read(t, args) => self.read(t, n.pos, args)?,
            NodeKind::Call(f, args) => self.call(f, n.pos, args)?,
            NodeKind::Neg(x) => match self.value(x)? {
                Expr::Const(c) => Expr::Const(-c),
                e => Expr::unary(UnaryOp::Neg, e),
            },
            NodeKind::Bin(op, a, b) => Expr::binary(*op, self.value(a)?, self.value(b)?),
            NodeKind::Cmp(..) | NodeKind::And(..) | NodeKind::Or(..) | NodeKind::Not(_) => {
                let msg = "expected a value, found a condition: conditions only appear as the \
                           first argument of select(cond, a, b)"
                    .to_string();
                return Err(self.err(n.start, "a value", "a condition", msg));
            }
        })
    }

    /// A condition: comparisons of two affine sides compare indices, others compare values.
    fn cond(&mut self, n: &Node) -> Result<Cond, ParseError> {
        Ok(match &n.kind {
            NodeKind::Cmp(op, a, b) => match (self.index(a), self.index(b)) {
                (Ok(x), Ok(y)) => Cond::Index(*op, x, y),
                _ => Cond::Value(*op, Box::new(self.value(a)?), Box::new(self.value(b)?)),
            },
            NodeKind::And(a, b) => Cond::And(Box::new(self.cond(a)?), Box::new(self.cond(b)?)),
            NodeKind::Or(a, b) => Cond::Or(Box::new(self.cond(a)?), Box::new(self.cond(b)?)),
            NodeKind::Not(a) => Cond::Not(Box::new(self.cond(a)?)),
            _ => {
                let msg = "expected a condition (a comparison such as 'h >= 1'), found a value"
                    .to_string();
                return Err(self.err(n.start, "a condition", "a value", msg));
            }
        })
    }

    /// An affine index expression over the statement's axes.
    fn index(&self, n: &Node) -> Result<Affine, ParseError> {
        let not_affine = |why: String| {
            let msg = format!(
                "index expressions must be affine (integers, variables, '+', '-', and '*' by an \
                 integer constant): {why}"
            );
            self.err(n.pos, "an affine index expression", why, msg)
        };
        let a = match &n.kind {
            NodeKind::Num { int: Some(v), .. } => Affine::constant(*v),
            NodeKind::Num { text, .. } => {
                return Err(not_affine(format!("'{text}' is not an integer")));
            }
            NodeKind::Var(v) => match self.axes.get(v) {
                Some(&x) => Affine::axis(x),
                None => {
                    let msg =
                        format!("no extent for variable '{v}': add '{v} < N' to the where clause");
                    return Err(self.err(
                        n.pos,
                        format!("an extent for variable '{v}'"),
                        format!("'{v}'"),
                        msg,
                    ));
                }
            },
            NodeKind::Neg(x) => self.index(x)?.scale(-1),
            NodeKind::Bin(BinaryOp::Add, a, b) => self.index(a)?.add(&self.index(b)?),
            NodeKind::Bin(BinaryOp::Sub, a, b) => self.index(a)?.add(&self.index(b)?.scale(-1)),
            NodeKind::Bin(BinaryOp::Mul, a, b) => {
                let (x, y) = (self.index(a)?, self.index(b)?);
                if x.terms.is_empty() {
                    y.scale(x.offset)
                } else if y.terms.is_empty() {
                    x.scale(y.offset)
                } else {
                    return Err(not_affine("'*' multiplies two variables".into()));
                }
            }
            NodeKind::Bin(_, _, _) => {
                return Err(not_affine("'/' is not allowed in an index".into()));
            }
            NodeKind::Read(t, _) => return Err(not_affine(format!("it reads tensor '{t}'"))),
            NodeKind::Call(f, _) => return Err(not_affine(format!("it calls '{f}'"))),
            NodeKind::Cmp(..) | NodeKind::And(..) | NodeKind::Or(..) | NodeKind::Not(_) => {
                return Err(ParseError::at(
                    self.src,
                    n.pos,
                    "an index expression",
                    "a condition",
                    None,
                ));
            }
        };
        // Checked at every node, so the arithmetic above never sees operands that overflow.
        if a.offset.abs() > MAX_INDEX_INT || a.terms.iter().any(|t| t.1.abs() > MAX_INDEX_INT) {
            let msg = "index constants and coefficients must stay within ±16777216".to_string();
            return Err(self.err(n.pos, "smaller index constants", "a larger one", msg));
        }
        Ok(a)
    }

    fn call(&mut self, f: &str, pos: usize, args: &[Node]) -> Result<Expr, ParseError> {
        let arity = match f {
            "select" => 3,
            "max" | "min" => 2,
            _ if unary_fn(f).is_some() => 1,
            _ => {
                let msg = format!("unknown function '{f}' (functions: {FUNCTIONS})");
                return Err(self.err(pos, "a function name", format!("'{f}'"), msg));
            }
        };
        if args.len() != arity {
            let plural = if arity == 1 { "" } else { "s" };
            let msg = format!("'{f}' takes {arity} argument{plural}, found {}", args.len());
            return Err(self.err(
                pos,
                format!("{arity} argument{plural}"),
                args.len().to_string(),
                msg,
            ));
        }
        Ok(match f {
            "select" => {
                let c = self.cond(&args[0])?;
                // Reads in the then-branch only happen where the condition holds.
                self.guards.push(c.clone());
                let a = self.value(&args[1]);
                self.guards.pop();
                Expr::select(c, a?, self.value(&args[2])?)
            }
            "max" => Expr::binary(BinaryOp::Max, self.value(&args[0])?, self.value(&args[1])?),
            "min" => Expr::binary(BinaryOp::Min, self.value(&args[0])?, self.value(&args[1])?),
            _ => Expr::unary(
                unary_fn(f).expect("arity checked above"),
                self.value(&args[0])?,
            ),
        })
    }

    /// The tensor a read names: earlier-defined, declared, or a new inferred input.
    fn resolve(&mut self, name: &str, pos: usize, dims: usize) -> Result<usize, ParseError> {
        if let Some(&t) = self.by_name.get(name) {
            self.tensors[t].first = self.tensors[t].first.min(pos);
            return Ok(t);
        }
        if let Some(&(si, def)) = self.computed.get(name) {
            let msg = if si == self.stmt {
                format!(
                    "this statement reads '{name}', the tensor it defines; a statement can only \
                     read tensors defined before it"
                )
            } else {
                let (l, _) = line_col(self.src, def);
                format!(
                    "'{name}' is defined by a later statement (line {l}); a statement can only \
                     read tensors defined before it"
                )
            };
            return Err(self.err(
                pos,
                "a tensor defined before this statement",
                format!("'{name}'"),
                msg,
            ));
        }
        self.add(name, pos, TensorKind::Inferred { hi: vec![0; dims] });
        Ok(self.tensors.len() - 1)
    }

    fn read(&mut self, name: &str, pos: usize, args: &[Node]) -> Result<Expr, ParseError> {
        let t = self.resolve(name, pos, args.len())?;
        let idx = args
            .iter()
            .map(|a| self.index(a))
            .collect::<Result<Vec<_>, _>>()?;
        let dims = match &self.tensors[t].kind {
            TensorKind::Input { shape, .. } | TensorKind::Compute(Stage { shape, .. }) => {
                shape.len()
            }
            TensorKind::Inferred { hi } => hi.len(),
        };
        if dims != idx.len() {
            let plural = if dims == 1 { "" } else { "s" };
            let msg = format!(
                "'{name}' has {dims} dimension{plural} but is read with {} indices",
                idx.len()
            );
            return Err(self.err(pos, format!("{dims} indices"), idx.len().to_string(), msg));
        }
        // The same range function `ComputeDag::new` checks with, so what is inferred here
        // always validates.
        for (d, a) in idx.iter().enumerate() {
            let (lo, hi) = guarded_range(a, &self.ext, &self.guards);
            let p = args[d].start;
            let found = format!("index range [{lo}, {hi}]");
            match &mut self.tensors[t].kind {
                TensorKind::Inferred { hi: top } if lo >= 0 => top[d] = top[d].max(hi),
                TensorKind::Inferred { .. } => {
                    let msg = format!(
                        "input '{name}' is read at a negative index in dimension {d} ({found}): \
                         inputs start at 0; guard the read with select(...)"
                    );
                    return Err(self.err(p, "a non-negative index", found, msg));
                }
                TensorKind::Input { shape, .. } | TensorKind::Compute(Stage { shape, .. }) => {
                    let extent = shape[d];
                    if lo < 0 || hi >= extent {
                        let msg = format!(
                            "reads '{name}' out of bounds in dimension {d}: \
                             {found} for extent {extent}"
                        );
                        return Err(self.err(p, format!("an index in [0, {extent})"), found, msg));
                    }
                }
            }
        }
        Ok(Expr::Load(t, idx))
    }

    fn finish(self) -> Result<ComputeDag, ParseError> {
        let src = self.src;
        if !self
            .tensors
            .iter()
            .any(|t| matches!(t.kind, TensorKind::Compute(_)))
        {
            return Err(ParseError::at(
                src,
                src.len(),
                "a statement that computes a tensor",
                "only input declarations",
                None,
            ));
        }
        let (mut order, computes): (Vec<usize>, Vec<usize>) = (0..self.tensors.len())
            .partition(|&t| !matches!(self.tensors[t].kind, TensorKind::Compute(_)));
        order.sort_by_key(|&t| self.tensors[t].first);
        order.extend(computes);
        let mut remap = vec![0; self.tensors.len()];
        for (stage, &t) in order.iter().enumerate() {
            remap[t] = stage;
        }
        let positions: HashMap<String, usize> = self
            .tensors
            .iter()
            .map(|t| (t.name.clone(), t.first))
            .collect();
        let mut tensors: Vec<Option<Tensor>> = self.tensors.into_iter().map(Some).collect();
        let mut stages = vec![];
        for t in order {
            let Tensor { name, first, kind } =
                tensors[t].take().expect("each tensor is placed once");
            let input = |shape: Vec<i64>, dtype| Stage {
                name: name.clone(),
                shape,
                dtype,
                data: Default::default(),
                kind: StageKind::Placeholder,
            };
            stages.push(match kind {
                TensorKind::Input { shape, dtype } => input(shape, dtype),
                TensorKind::Inferred { hi } => {
                    let shape: Vec<i64> = hi.iter().map(|h| h + 1).collect();
                    if points(&shape).is_none() {
                        let msg = format!(
                            "input '{name}' would have more than 2^40 elements (shape {shape:?})"
                        );
                        return Err(ParseError::at(
                            src,
                            first,
                            "a smaller input",
                            format!("shape {shape:?}"),
                            Some(msg),
                        ));
                    }
                    input(shape, DType::F32)
                }
                TensorKind::Compute(mut stage) => {
                    if let StageKind::Compute { body, .. } = &mut stage.kind {
                        *body = body.map_loads(&mut |t, idx| Expr::Load(remap[t], idx.to_vec()));
                    }
                    stage
                }
            });
        }
        // The checks above mirror `ComputeDag::new`, so this should not fail; if it does, point
        // at the stage it names.
        ComputeDag::new(stages).map_err(|e| {
            let pos = match &e {
                DagError::Invalid { stage, .. } => positions.get(stage).copied().unwrap_or(0),
                DagError::Empty => src.len(),
            };
            ParseError::at(
                src,
                pos,
                "a valid operator",
                e.to_string(),
                Some(format!("invalid operator: {e}")),
            )
        })
    }
}
