//! The lowering: the graph walked in order (`order`), each call bound to its kernel (every
//! argument to its tensor, a constant, or a packed weight), each glue node to its steps
//! (`glue`), every value given its storage.

use crate::constants;
use crate::error::CompileError;
use crate::layout::Kept;
use crate::order;
use crate::program::{
    Arg, ConstData, Constant, KernelCall, NodeNote, Packed, Program, Step, Storage, Value, ValueId,
};
use std::collections::HashMap;
use tunehub_engine::ir::DType;
use tunehub_engine::package::{Kernel, KernelArg, Role};
use tunehub_onnx::graph::Graph;
use tunehub_onnx::{Operand, TaskList};

impl Program {
    /// Lowers the graph: `tasks` from its extraction, `kernels[i]` serving `tasks.tasks[i]`.
    pub fn build(g: &Graph, tasks: &TaskList, kernels: &[Kernel]) -> Result<Program, CompileError> {
        let mut l = Lowering {
            g,
            p: Program {
                kernels: kernels.to_vec(),
                ..Program::default()
            },
            by_name: HashMap::new(),
            constants: HashMap::new(),
            kept: HashMap::new(),
        };
        for name in &g.input_order {
            let shape = l.shape_of(name, None)?;
            let v = l.add(name, shape, DType::F32, Storage::Arena);
            l.p.inputs.push(v);
        }
        for unit in order::units(g, tasks)? {
            match unit {
                order::Unit::Call(c) => l.call(tasks, c)?,
                order::Unit::Node(n) => l.glue(&g.nodes[n])?,
                order::Unit::Folded(n) => l.note(&g.nodes[n], "folded", None),
            }
        }
        for name in &g.output_order {
            let v = l.value_of(name, None)?;
            if l.p.values[v].dtype != DType::F32 {
                return Err(CompileError::BadName(format!(
                    "the model's output '{name}' is {}: a compiled model's outputs are float32",
                    l.p.values[v].dtype.name()
                )));
            }
            l.p.outputs.push(v);
        }
        for t in l.p.prune() {
            if let Some(n) = g.nodes.iter().find(|n| n.outputs.contains(&t)) {
                for note in l.p.nodes.iter_mut().filter(|x| x.node == n.name) {
                    note.how = "unused";
                }
            }
        }
        Ok(l.p)
    }
}

/// The program under construction.
pub(crate) struct Lowering<'g> {
    pub(crate) g: &'g Graph,
    pub(crate) p: Program,
    pub(crate) by_name: HashMap<String, ValueId>,
    /// Constants by key: one copy each in the weights file.
    constants: HashMap<String, usize>,
    /// Tensors a kernel left in its own layout (`layout`), by the model's name.
    pub(crate) kept: HashMap<String, Kept>,
}

impl<'g> Lowering<'g> {
    pub(crate) fn add(
        &mut self,
        name: &str,
        shape: Vec<i64>,
        dtype: DType,
        storage: Storage,
    ) -> ValueId {
        self.p.values.push(Value {
            name: name.to_string(),
            shape,
            dtype,
            storage,
        });
        let id = self.p.values.len() - 1;
        self.by_name.insert(name.to_string(), id);
        id
    }

    pub(crate) fn note(
        &mut self,
        n: &tunehub_onnx::graph::Node,
        how: &'static str,
        task: Option<usize>,
    ) {
        self.p.nodes.push(NodeNote {
            node: n.name.clone(),
            op: n.op.clone(),
            how,
            task,
        });
    }

    /// The inferred shape of tensor `t` (an error naming `node`, or the model, when unknown).
    pub(crate) fn shape_of(
        &self,
        t: &str,
        node: Option<&tunehub_onnx::graph::Node>,
    ) -> Result<Vec<i64>, CompileError> {
        match node {
            Some(n) => Ok(self.g.need_shape(n, t)?),
            None => self.g.shape(t).map(<[i64]>::to_vec).ok_or_else(|| {
                CompileError::BadName(format!(
                    "the shape of the model's tensor '{t}' is not known"
                ))
            }),
        }
    }

    /// A constant value of `data` under `key` (stored once).
    pub(crate) fn constant(&mut self, key: String, shape: Vec<i64>, data: ConstData) -> ValueId {
        let dtype = data.dtype();
        let index = match self.constants.get(&key) {
            Some(&i) => i,
            None => {
                self.p.constants.push(Constant {
                    key: key.clone(),
                    data,
                });
                let i = self.p.constants.len() - 1;
                self.constants.insert(key.clone(), i);
                i
            }
        };
        self.p.values.push(Value {
            name: key,
            shape,
            dtype,
            storage: Storage::Constant(index),
        });
        self.p.values.len() - 1
    }

    /// The value of tensor `t`: computed earlier, a model input, or a constant of the model.
    pub(crate) fn value_of(
        &mut self,
        t: &str,
        node: Option<&tunehub_onnx::graph::Node>,
    ) -> Result<ValueId, CompileError> {
        if let Some(&v) = self.by_name.get(t) {
            return Ok(v);
        }
        if let Some(v) = self.materialize(t) {
            return Ok(v);
        }
        let shape = self.shape_of(t, node)?;
        let fail = |msg: String| match node {
            Some(n) => CompileError::node(n, msg),
            None => CompileError::BadName(msg),
        };
        let data = if self.g.is_constant(t) {
            Some(self.constant_data(t).ok_or_else(|| {
                fail(format!(
                    "'{t}' is a constant that is not float32, int32 or 8-bit: not supported in a \
                     compiled model"
                ))
            })?)
        } else {
            // A large weight's DequantizeLinear, which the graph did not fold: folded here,
            // where an f32 operator reads it (an integer kernel reads the weight behind it).
            constants::dequantized(self.g, t)
                .map_err(fail)?
                .map(ConstData::F32)
        };
        if let Some(data) = data {
            let v = self.constant(t.to_string(), shape, data);
            self.by_name.insert(t.to_string(), v);
            return Ok(v);
        }
        let msg = format!("reads '{t}' before anything computes it");
        Err(match node {
            Some(n) => CompileError::node(n, msg),
            None => CompileError::BadName(msg),
        })
    }

    /// The elements of the model's constant `t`, in its type.
    pub(crate) fn constant_data(&self, t: &str) -> Option<ConstData> {
        match self.g.constant_dtype(t)? {
            DType::F32 => self.g.floats(t).map(ConstData::F32),
            dtype => ConstData::ints(dtype, &self.g.ints(t)?),
        }
    }

    fn operand(
        &mut self,
        o: &Operand,
        node: &tunehub_onnx::graph::Node,
    ) -> Result<ValueId, CompileError> {
        match o {
            Operand::Tensor { name } => self.value_of(name, Some(node)),
            Operand::Transposed { name, perm } => self
                .transposed(name, perm, node)
                .map_err(|e| CompileError::node(node, e)),
            Operand::Padded {
                name,
                perm,
                pads,
                value,
            } => self
                .padded(name, perm, pads, *value, node)
                .map_err(|e| CompileError::node(node, e)),
            folded => {
                let (key, shape, data) =
                    constants::folded(self.g, folded).map_err(|e| CompileError::node(node, e))?;
                Ok(self.constant(key, shape, data))
            }
        }
    }

    /// One call of a task: its kernel with each argument bound to its source.
    fn call(&mut self, tasks: &TaskList, c: usize) -> Result<(), CompileError> {
        let call = &tasks.calls[c];
        let task = &tasks.tasks[call.task];
        let kernel = self.p.kernels[call.task].clone();
        let anchor = &self.g.nodes[call.nodes[0]];
        let bad = |msg: String| CompileError::Kernel {
            task: call.task,
            label: task.label.clone(),
            msg,
        };
        if kernel.provenance.workload_key != task.workload_key {
            return Err(bad(format!(
                "its kernel {} is for workload {}, the task's is {}",
                kernel.symbol, kernel.provenance.workload_key, task.workload_key
            )));
        }
        let out_shape = match &call.internal {
            Some(shape) => shape.clone(),
            None => self.shape_of(&call.output, Some(anchor))?,
        };
        let out_arg = kernel
            .args
            .iter()
            .find(|a| a.role == Role::Output)
            .ok_or_else(|| bad(format!("kernel {} has no output", kernel.symbol)))?;
        let out_type = dtype_of(out_arg).map_err(bad)?;
        // In another layout: the kernel's own (`output_perm`), or its elementwise operands'
        // (`layout_perm`, which the operands are read in).
        let layout_perm = match (&call.output_perm, &call.internal) {
            (None, None) => self.elementwise_layout(&call.nodes, &call.operands, &out_shape),
            _ => None,
        };
        let output = match (&call.output_perm, &layout_perm) {
            (Some(perm), _) => self
                .kernel_layout(&call.output, &out_shape, out_type, perm)
                .map_err(bad)?,
            (None, Some(perm)) => self
                .keep(&call.output, &out_shape, out_type, perm)
                .map_err(bad)?,
            (None, None) => self.add(&call.output, out_shape.clone(), out_type, Storage::Arena),
        };
        let mut args = vec![];
        for a in &kernel.args {
            let v = if a.role == Role::Output {
                output
            } else {
                let o = call
                    .operands
                    .iter()
                    .find(|(n, _)| *n == a.name)
                    .map(|(_, o)| o.clone())
                    .ok_or_else(|| {
                        bad(format!(
                            "kernel argument '{}' is not an input of the workload",
                            a.name
                        ))
                    })?;
                match (&o, &layout_perm) {
                    (Operand::Tensor { name }, Some(perm)) => match self.kept(name) {
                        Some(k) if k.perm == *perm => k.value,
                        _ if self
                            .g
                            .shape(name)
                            .is_some_and(|s| s == out_shape.as_slice()) =>
                        {
                            self.transposed(name, perm, anchor)
                                .map_err(|e| CompileError::node(anchor, e))?
                        }
                        _ => self.operand(&o, anchor)?,
                    },
                    _ => self.operand(&o, anchor)?,
                }
            };
            let want: i64 = a.shape.iter().product();
            let dtype = dtype_of(a).map_err(bad)?;
            if self.p.values[v].dtype != dtype {
                return Err(bad(format!(
                    "kernel argument '{}' is {}, its tensor '{}' {}",
                    a.name,
                    dtype.name(),
                    self.p.values[v].name,
                    self.p.values[v].dtype.name()
                )));
            }
            if self.p.values[v].elements() != want {
                return Err(bad(format!(
                    "kernel argument '{}' has {want} elements, its tensor '{}' {}",
                    a.name,
                    self.p.values[v].name,
                    self.p.values[v].elements()
                )));
            }
            let arg = match (&a.pack_function, a.packed_elements) {
                (Some(f), Some(n)) => {
                    let Storage::Constant(constant) = self.p.values[v].storage else {
                        return Err(bad(format!(
                            "kernel argument '{}' is read packed but '{}' is not a constant",
                            a.name, self.p.values[v].name
                        )));
                    };
                    let packed = Packed {
                        constant,
                        function: f.clone(),
                        elements: n,
                        dtype,
                    };
                    let i = match self.p.packed.iter().position(|p| *p == packed) {
                        Some(i) => i,
                        None => {
                            self.p.packed.push(packed);
                            self.p.packed.len() - 1
                        }
                    };
                    Arg::Packed(i)
                }
                _ => Arg::Value(v),
            };
            args.push(arg);
        }
        let nodes: Vec<String> = call
            .nodes
            .iter()
            .map(|&i| self.g.nodes[i].name.clone())
            .collect();
        // A workload run before the group's own (`Call::internal`) leaves the notes to it.
        if call.internal.is_none() {
            for &i in &call.nodes {
                self.note(&self.g.nodes[i], "kernel", Some(call.task));
            }
        }
        self.p.steps.push(Step::Kernel(KernelCall {
            symbol: kernel.symbol.clone(),
            task: call.task,
            args,
            output,
            nodes,
        }));
        if tunehub_onnx::integer::is_integer_op(&anchor.op) {
            self.shift_zero_point(anchor, &call.output)?;
        }
        Ok(())
    }
}

/// A kernel argument's element type (a kernel from a service is checked as any input).
fn dtype_of(a: &KernelArg) -> Result<DType, String> {
    [DType::F32, DType::I32, DType::U8, DType::I8]
        .into_iter()
        .find(|d| d.c_name() == a.c_type)
        .ok_or_else(|| {
            format!(
                "kernel argument '{}' is {}: not a type a compiled model holds",
                a.name, a.dtype
            )
        })
}
