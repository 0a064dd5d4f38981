//! The order a compiled model runs its parts in: each call (a fused group, one kernel) and each
//! glue node is a unit; a unit runs after the units that compute what it reads, and otherwise in
//! the model's node order (a group's epilogue may read a tensor a later node computes, so node
//! order alone is not enough).

use crate::error::CompileError;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use tunehub_onnx::graph::Graph;
use tunehub_onnx::{Operand, TaskList};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Index into the task list's calls.
    Call(usize),
    /// A node run on its own (glue: a view, a copy).
    Node(usize),
    /// A node whose outputs are all constants: computed at build time.
    Folded(usize),
}

/// Every unit of the graph in an order that respects their dependencies.
pub fn units(g: &Graph, tasks: &TaskList) -> Result<Vec<Unit>, CompileError> {
    let mut in_call = vec![None; g.nodes.len()];
    for (c, call) in tasks.calls.iter().enumerate() {
        for &n in &call.nodes {
            in_call[n] = Some(c);
        }
    }
    let mut units: Vec<(Unit, usize)> = tasks
        .calls
        .iter()
        .enumerate()
        .map(|(c, call)| (Unit::Call(c), call.nodes.iter().copied().min().unwrap_or(0)))
        .collect();
    for (i, n) in g.nodes.iter().enumerate() {
        if in_call[i].is_some() {
            continue;
        }
        let outs: Vec<&String> = n.outputs.iter().filter(|o| !o.is_empty()).collect();
        let folded = outs.iter().all(|o| g.is_constant(o));
        units.push((
            if folded {
                Unit::Folded(i)
            } else {
                Unit::Node(i)
            },
            i,
        ));
    }
    // What each unit reads and writes.
    let mut producer: HashMap<&str, usize> = HashMap::new();
    let mut reads: Vec<Vec<&str>> = vec![];
    for (u, (unit, _)) in units.iter().enumerate() {
        let (r, w): (Vec<&str>, Vec<&str>) = match *unit {
            Unit::Call(c) => {
                let call = &tasks.calls[c];
                let r = call
                    .operands
                    .iter()
                    .filter_map(|(_, o)| match o {
                        Operand::Tensor { name }
                        | Operand::Transposed { name, .. }
                        | Operand::Padded { name, .. } => Some(name.as_str()),
                        _ => None,
                    })
                    .collect();
                (r, vec![call.output.as_str()])
            }
            Unit::Node(n) | Unit::Folded(n) => {
                let node = &g.nodes[n];
                (
                    node.inputs
                        .iter()
                        .map(String::as_str)
                        .filter(|s| !s.is_empty())
                        .collect(),
                    node.outputs
                        .iter()
                        .map(String::as_str)
                        .filter(|s| !s.is_empty())
                        .collect(),
                )
            }
        };
        for t in w {
            producer.insert(t, u);
        }
        reads.push(r);
    }
    // Kahn's algorithm, the earliest node first among the ready units.
    let mut waiting = vec![0usize; units.len()];
    let mut users: Vec<Vec<usize>> = vec![vec![]; units.len()];
    for (u, r) in reads.iter().enumerate() {
        let mut deps: Vec<usize> = r
            .iter()
            .filter(|t| !g.is_constant(t))
            .filter_map(|t| producer.get(t).copied())
            .filter(|&p| p != u)
            .collect();
        deps.sort_unstable();
        deps.dedup();
        waiting[u] = deps.len();
        for d in deps {
            users[d].push(u);
        }
    }
    let mut ready: BinaryHeap<Reverse<(usize, usize)>> = (0..units.len())
        .filter(|&u| waiting[u] == 0)
        .map(|u| Reverse((units[u].1, u)))
        .collect();
    let mut out = Vec::with_capacity(units.len());
    while let Some(Reverse((_, u))) = ready.pop() {
        out.push(units[u].0);
        for &v in &users[u] {
            waiting[v] -= 1;
            if waiting[v] == 0 {
                ready.push(Reverse((units[v].1, v)));
            }
        }
    }
    if out.len() != units.len() {
        let stuck = (0..units.len())
            .find(|&u| waiting[u] > 0)
            .map(|u| units[u].1)
            .unwrap_or(0);
        let n = &g.nodes[stuck];
        return Err(CompileError::node(
            n,
            "its inputs depend on its own output (a cycle)",
        ));
    }
    Ok(out)
}
