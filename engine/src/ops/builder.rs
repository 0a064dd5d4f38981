//! `DagBuilder`, how every library operator writes its DAG, and the small expression helpers
//! the operators share (loads, constants, the bias and relu epilogue).

use crate::ir::{
    Affine, Axis, BinaryOp, ComputeDag, DType, DagError, Expr, ReduceOp, Stage, StageKind, UnaryOp,
};

/// Builds DAGs stage by stage; axes of a compute are passed to the body closure as affine
/// expressions (space axes, then reduction axes).
#[derive(Default)]
pub struct DagBuilder {
    stages: Vec<Stage>,
}

impl DagBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder that goes on from these stages.
    pub(crate) fn from_stages(stages: Vec<Stage>) -> Self {
        DagBuilder { stages }
    }

    /// The stages so far, unchecked.
    pub(crate) fn into_stages(self) -> Vec<Stage> {
        self.stages
    }

    pub fn placeholder(&mut self, name: &str, shape: &[i64]) -> usize {
        self.stages.push(Stage {
            name: name.into(),
            shape: shape.to_vec(),
            dtype: DType::F32,
            data: Default::default(),
            kind: StageKind::Placeholder,
        });
        self.stages.len() - 1
    }

    /// `name[space] = body(space)`.
    pub fn compute(
        &mut self,
        name: &str,
        shape: &[i64],
        body: impl FnOnce(&[Affine]) -> Expr,
    ) -> usize {
        self.reduce(name, shape, &[], None, body)
    }

    /// `name[space] = reduce_{raxes} body(space ++ raxes)`.
    pub fn reduce(
        &mut self,
        name: &str,
        shape: &[i64],
        raxes: &[(&str, i64)],
        op: Option<ReduceOp>,
        body: impl FnOnce(&[Affine]) -> Expr,
    ) -> usize {
        const NAMES: [&str; 8] = ["i", "j", "k", "l", "m", "n", "o", "p"];
        let space: Vec<Axis> = shape
            .iter()
            .enumerate()
            .map(|(d, &e)| Axis {
                name: NAMES.get(d).map_or(format!("ax{d}"), |s| s.to_string()),
                extent: e,
            })
            .collect();
        let reduce_axes: Vec<Axis> = raxes
            .iter()
            .map(|&(n, e)| Axis {
                name: n.into(),
                extent: e,
            })
            .collect();
        let vars: Vec<Affine> = (0..space.len() + reduce_axes.len())
            .map(Affine::axis)
            .collect();
        let body = body(&vars);
        self.stages.push(Stage {
            name: name.into(),
            shape: shape.to_vec(),
            dtype: DType::F32,
            data: Default::default(),
            kind: StageKind::Compute {
                space,
                reduce_axes,
                reduce: op,
                body,
            },
        });
        self.stages.len() - 1
    }

    pub fn shape(&self, t: usize) -> &[i64] {
        &self.stages[t].shape
    }

    pub fn finish(self) -> Result<ComputeDag, DagError> {
        ComputeDag::new(self.stages)
    }
}

pub(super) fn ld(t: usize, idx: &[Affine]) -> Expr {
    Expr::Load(t, idx.to_vec())
}

pub(super) fn c(x: i64) -> Affine {
    Affine::constant(x)
}

pub(super) fn mul(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Mul, a, b)
}

pub(super) fn add(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Add, a, b)
}

/// Adds `bias[f]` (broadcast over dim `fd`) and/or relu as one elementwise epilogue stage.
pub(super) fn epilogue(b: &mut DagBuilder, src: usize, fd: usize, bias: bool, relu: bool) -> usize {
    if !bias && !relu {
        return src;
    }
    let shape = b.shape(src).to_vec();
    let bias_t = bias.then(|| b.placeholder("bias", &[shape[fd]]));
    let name = match (bias, relu) {
        (true, true) => "bias_relu",
        (true, false) => "bias_add",
        _ => "relu",
    };
    b.compute(name, &shape, |ax| {
        let mut e = ld(src, ax);
        if let Some(bt) = bias_t {
            e = add(e, ld(bt, &[ax[fd].clone()]));
        }
        if relu {
            e = Expr::unary(UnaryOp::Relu, e);
        }
        e
    })
}
