//! The task list of a model: groups with the same workload (the engine's key: computation and
//! options, not names) are one task whose weight is how often it occurs.

use crate::choice;
use crate::classify::{Class, classify};
use crate::error::ImportError;
use crate::fuse;
use crate::graph::{Graph, Node};
use crate::layout::Layout;
use crate::operand::Operands;
use crate::operands;
use crate::{library, workload};
use serde::Serialize;
use tunehub_engine::ops::OpSpec;
use tunehub_engine::task::{Task, WorkloadOptions};

/// One task of a network. Serialised (`tunehub tasks --json`) with its library form as the
/// canonical op spec under `op_spec`, which pasted back gives the same workload.
#[derive(Debug, Clone, Serialize)]
pub struct NetTask {
    /// For people: the operators it covers and its output shape, e.g.
    /// `Conv+BatchNormalization+Relu -> [1,64,56,56]`.
    pub label: String,
    /// The library operator it is, when one fits exactly (then the task is submitted as it),
    /// with the model's constant weights as its layout-free inputs, explicitly
    /// (`layout_free=none` when the operator's weight is not constant in the model).
    pub op_spec: Option<OpSpec>,
    /// The computation in tunehub's text form (its first line a comment: the label); the
    /// workload itself when there is no `op_spec`. For an integer form (a QDQ model's anchor),
    /// the f32 computation in the model's layout, which its op spec retypes; a chain between
    /// conversions says its 8-bit types (`input u8 T[...]`).
    pub expr: String,
    /// Inputs that are constant weights: packed once, outside the timed kernel (for a library
    /// operator, its spec's).
    pub layout_free: Vec<String>,
    pub workload_key: String,
    /// How often it occurs in the network.
    pub weight: u32,
    /// FLOPs of one occurrence.
    pub flops: u64,
    /// The ONNX nodes it covers, every occurrence.
    pub nodes: Vec<String>,
    /// Another form of what other tasks compute, tuned for a build to choose between them:
    /// no call of its list runs it (`choice::union`).
    pub alternative: bool,
}

impl NetTask {
    /// A task of `spec` (a library operator) or of the text form `expr` with `layout_free`;
    /// the rest is filled in as the extraction counts occurrences.
    fn draft(spec: Option<OpSpec>, expr: String, layout_free: Vec<String>) -> NetTask {
        let layout_free = spec
            .as_ref()
            .map_or(layout_free, |s| s.options().layout_free);
        NetTask {
            label: String::new(),
            op_spec: spec,
            expr,
            layout_free,
            workload_key: String::new(),
            weight: 1,
            flops: 0,
            nodes: vec![],
            alternative: false,
        }
    }

    pub fn options(&self) -> WorkloadOptions {
        match &self.op_spec {
            Some(spec) => spec.options(),
            None => WorkloadOptions {
                layout_free: self.layout_free.clone(),
            },
        }
    }

    /// The engine's task: its op spec (described canonically) or its text form, with the
    /// layout-free inputs.
    pub fn task(&self) -> Result<Task, String> {
        match &self.op_spec {
            Some(spec) => spec.task().map_err(|e| e.to_string()),
            None => {
                let dag = tunehub_engine::text::parse(&self.expr).map_err(|e| e.to_string())?;
                Task::new(dag, self.expr.clone()).with_options(&self.options())
            }
        }
    }
}

/// A node no task covers because its operator is not supported.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Skipped {
    pub node: String,
    pub op: String,
    pub reason: String,
}

/// One occurrence of a task in the graph: what a compiled model runs there.
#[derive(Debug, Clone)]
pub struct Call {
    /// Index into [`TaskList::tasks`].
    pub task: usize,
    /// The nodes it covers, in graph order (the anchor first).
    pub nodes: Vec<usize>,
    /// The workload's inputs, each with its source in the model.
    pub operands: Operands,
    /// The tensor it computes.
    pub output: String,
    /// When the kernel computes it in another layout: axis `i` of `output` is axis `perm[i]`
    /// of the kernel's result (`library::output_perm`).
    pub output_perm: Option<Vec<usize>>,
    /// The shape of `output` when the model does not name it: the result of a workload the
    /// group runs first (`workload::Pre`, a Winograd convolution's transformed input).
    pub internal: Option<Vec<i64>>,
}

/// What a model yields.
#[derive(Debug, Clone, Serialize)]
pub struct TaskList {
    pub tasks: Vec<NetTask>,
    /// Every group of the graph as a call of its task, in the order the network runs them.
    #[serde(skip)]
    pub calls: Vec<Call>,
    /// Unsupported nodes: the model's time there is not tuned nor estimated.
    pub skipped: Vec<Skipped>,
    /// Layout glue and constant computations: no task (copies the estimate leaves out).
    pub glue: usize,
    /// The layout its f32 convolutions run in.
    pub layout: Layout,
}

impl TaskList {
    /// FLOPs of the whole network (tasks times their weights, alternatives left out).
    pub fn flops(&self) -> u64 {
        self.tasks
            .iter()
            .filter(|t| !t.alternative)
            .map(|t| t.flops * u64::from(t.weight))
            .sum()
    }
}

/// Node `n` without a task, for `reason`: listed as skipped, or with `strict` an error.
fn skip(
    strict: bool,
    skipped: &mut Vec<Skipped>,
    n: &Node,
    reason: String,
) -> Result<(), ImportError> {
    let (node, op) = (n.name.clone(), n.op.clone());
    if strict {
        return Err(ImportError::Unsupported { node, op, reason });
    }
    skipped.push(Skipped { node, op, reason });
    Ok(())
}

/// How a model's tasks are extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extraction {
    /// An unsupported operator is an error, not a skipped node.
    pub strict: bool,
    /// The layout the f32 convolutions' tasks are written in; `None` (auto): the tasks of
    /// every layout of [`Layout::AUTO`] (`choice::union`), run as the first.
    pub layout: Option<Layout>,
}

impl Default for Extraction {
    /// The model's own layout, unsupported operators skipped.
    fn default() -> Self {
        Extraction {
            strict: false,
            layout: Some(Layout::Nchw),
        }
    }
}

impl Extraction {
    /// The model's layout, an unsupported operator an error.
    pub fn strict() -> Self {
        Extraction {
            strict: true,
            ..Default::default()
        }
    }

    /// The model's layout, unsupported operators skipped.
    pub fn lenient() -> Self {
        Extraction::default()
    }

    pub fn in_layout(self, layout: Layout) -> Self {
        Extraction {
            layout: Some(layout),
            ..self
        }
    }

    /// Every form a build may choose among (`auto`).
    pub fn in_every_form(self) -> Self {
        Extraction {
            layout: None,
            ..self
        }
    }
}

/// Adds `call` of `task` (`draft` described): to the task with the same workload key, when
/// there is one, else as a new task.
fn add(
    tasks: &mut Vec<NetTask>,
    calls: &mut Vec<Call>,
    draft: NetTask,
    task: Task,
    mut call: Call,
    nodes: Vec<String>,
    label: String,
) {
    if let Some((i, t)) = tasks
        .iter_mut()
        .enumerate()
        .find(|(_, t)| t.workload_key == task.key)
    {
        t.weight += 1;
        t.nodes.extend(nodes);
        call.task = i;
        calls.push(call);
        return;
    }
    call.task = tasks.len();
    calls.push(call);
    tasks.push(NetTask {
        // The label as a comment first: listings show a text form's first line.
        expr: format!("# {label}\n{}", draft.expr),
        label,
        workload_key: task.key,
        flops: task.flops,
        nodes,
        ..draft
    });
}

/// Extracts the tasks of `g` as `how` says.
pub fn extract(g: &Graph, how: &Extraction) -> Result<TaskList, ImportError> {
    match how.layout {
        Some(layout) => extract_in(g, how.strict, layout),
        None => Layout::AUTO
            .into_iter()
            .map(|l| extract_in(g, how.strict, l))
            .collect::<Result<_, _>>()
            .map(choice::union),
    }
}

/// The tasks of `g` with its f32 convolutions in `layout`.
fn extract_in(g: &Graph, strict: bool, layout: Layout) -> Result<TaskList, ImportError> {
    let classes: Vec<Class> = g.nodes.iter().map(|n| classify(g, n)).collect();
    let mut skipped = vec![];
    let mut glue = 0;
    for (n, c) in g.nodes.iter().zip(&classes) {
        // Broken before unsupported: a product whose operands do not multiply is named as such
        // (its output then has no shape, which would read as an unsupported node).
        operands::check(g, n)?;
        match c {
            Class::Unsupported(reason) => skip(strict, &mut skipped, n, reason.clone())?,
            Class::Glue => glue += 1,
            _ => {}
        }
    }
    let mut tasks: Vec<NetTask> = vec![];
    let mut calls: Vec<Call> = vec![];
    for group in fuse::groups(g, &classes) {
        // A quantized anchor's text form is the f32 computation its integer form retypes.
        let generated = workload::generate(g, &group.in_f32(g), layout)?;
        let first = &g.nodes[group.nodes().next().expect("a group has a node")];
        let invalid = |e: String, expr: &str| {
            ImportError::node(first, format!("its workload is invalid ({e}):\n{expr}"))
        };
        let spec = library::spec(g, &group, layout)
            .transpose()
            .map_err(|e| invalid(e.to_string(), &generated.expr))?;
        if group.quantized.is_some() && spec.is_none() {
            // Its text is the f32 computation: it would tune another one.
            let reason = "a quantized operator with no integer form in the library (its window \
                          or epilogue is not the library's)";
            skip(strict, &mut skipped, first, reason.into())?;
            continue;
        }
        let nodes: Vec<String> = group.nodes().map(|i| g.nodes[i].name.clone()).collect();
        let ops: Vec<&str> = group.nodes().map(|i| g.nodes[i].op.as_str()).collect();
        for pre in generated.pre {
            let draft = NetTask::draft(pre.spec, pre.expr, pre.layout_free);
            let task = draft.task().map_err(|e| invalid(e, &draft.expr))?;
            let dims: Vec<String> = pre.shape.iter().map(i64::to_string).collect();
            let label = format!("{} ({}) -> [{}]", ops.join("+"), pre.output, dims.join(","));
            let call = Call {
                task: 0,
                nodes: group.nodes().collect(),
                operands: pre.operands,
                output: pre.output,
                output_perm: None,
                internal: Some(pre.shape),
            };
            add(
                &mut tasks,
                &mut calls,
                draft,
                task,
                call,
                nodes.clone(),
                label,
            );
        }
        let draft = NetTask::draft(spec, generated.expr, generated.layout_free);
        let task = draft.task().map_err(|e| invalid(e, &draft.expr))?;
        let call = Call {
            task: 0,
            nodes: group.nodes().collect(),
            operands: if draft.op_spec.is_some() {
                library::operands(g, &group)
            } else {
                generated.operands
            },
            output: group.output.clone(),
            output_perm: match &draft.op_spec {
                Some(s) => library::output_perm(Some(s)),
                None => generated.output_perm,
            },
            internal: None,
        };
        let shape = g.shape(&group.output).unwrap_or(&[]);
        let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
        let label = format!("{} -> [{}]", ops.join("+"), dims.join(","));
        add(&mut tasks, &mut calls, draft, task, call, nodes, label);
    }
    if tasks.is_empty() {
        let why = skipped.first().map_or_else(
            || ": every node moves data or computes on constants only".to_string(),
            |s| {
                format!(
                    ": node '{}' ({}) is unsupported: {}",
                    s.node, s.op, s.reason
                )
            },
        );
        return Err(ImportError::NoTask(why));
    }
    Ok(TaskList {
        tasks,
        calls,
        skipped,
        glue,
        layout,
    })
}
