//! Grouping nodes into tasks as Ansor's task extraction does (TVM's operator fusion): each
//! anchor takes the elementwise nodes after it as its epilogue (a bias, a batch norm folded at
//! inference, relu or clip, a residual add, GELU's erf chain), as long as one tensor leaves
//! the group; elementwise nodes no anchor took become groups of their own (one between a QDQ
//! model's conversions takes its `QuantizeLinear` too: `quantized::quantized_chain`).

use crate::classify::Class;
use crate::graph::Graph;
use crate::quantized::{Quantized, quantized, quantized_chain};
use std::collections::{HashMap, HashSet};

/// A group of nodes that becomes one task.
#[derive(Debug, Clone)]
pub struct Group {
    /// The anchor node (index into the graph's nodes); `None` for an elementwise chain.
    pub anchor: Option<usize>,
    /// The elementwise nodes, in graph order.
    pub members: Vec<usize>,
    /// The tensor the group computes.
    pub output: String,
    /// A QDQ model's quantized anchor: its members are a `Relu` and the `QuantizeLinear`.
    pub quantized: Option<Quantized>,
    /// An elementwise chain between conversions (`quantized::quantized_chain`): it reads the
    /// 8-bit tensors behind its `DequantizeLinear` inputs, and its last member is the
    /// `QuantizeLinear` it writes.
    pub eight_bit: bool,
}

impl Group {
    pub fn nodes(&self) -> impl Iterator<Item = usize> + '_ {
        self.anchor.into_iter().chain(self.members.iter().copied())
    }

    /// The f32 computation of the group: a quantized anchor's group without its
    /// `QuantizeLinear` (what its integer form retypes); any other group as it is.
    pub fn in_f32(&self, g: &Graph) -> Group {
        let mut f = self.clone();
        if f.quantized.take().is_some() {
            f.members
                .retain(|&m| g.nodes[m].op != crate::quantized::QUANTIZE);
            let last = f.members.last().copied().or(f.anchor).expect("an anchor");
            f.output = g.nodes[last].outputs[0].clone();
        }
        f
    }
}

/// The most elementwise nodes one epilogue grows by before giving up.
const MAX_EPILOGUE: usize = 16;

pub fn groups(g: &Graph, classes: &[Class]) -> Vec<Group> {
    let f = Fuser::new(g, classes);
    let mut claimed = vec![false; g.nodes.len()];
    let mut out = vec![];
    for pass_anchors in [true, false] {
        for i in 0..g.nodes.len() {
            let wanted = if pass_anchors {
                Class::Anchor
            } else {
                Class::Elementwise
            };
            if claimed[i] || classes[i] != wanted {
                continue;
            }
            let Some(first_out) = g.nodes[i].outputs.first().filter(|o| !o.is_empty()) else {
                continue;
            };
            let Some(shape) = g.shape(first_out) else {
                continue;
            };
            let q = pass_anchors.then(|| quantized(g, i)).flatten();
            let mut members = match &q {
                Some(q) => q.members.clone(),
                None => f.grow(i, shape, &claimed),
            };
            let chain: Vec<usize> = std::iter::once(i).chain(members.iter().copied()).collect();
            let quantizer = (!pass_anchors)
                .then(|| quantized_chain(g, &chain))
                .flatten()
                .filter(|&q| !claimed[q]);
            members.extend(quantizer);
            claimed[i] = true;
            for &m in &members {
                claimed[m] = true;
            }
            let last = members.last().copied().unwrap_or(i);
            let output = g.nodes[last].outputs[0].clone();
            let (anchor, members) = if pass_anchors {
                (Some(i), members)
            } else {
                (None, std::iter::once(i).chain(members).collect())
            };
            out.push(Group {
                anchor,
                members,
                output,
                quantized: q,
                eight_bit: quantizer.is_some(),
            });
        }
    }
    // Tasks are listed in the order the network runs them.
    out.sort_by_key(|g: &Group| g.nodes().min());
    out
}

struct Fuser<'g> {
    g: &'g Graph,
    classes: &'g [Class],
    producer: HashMap<&'g str, usize>,
    consumers: HashMap<&'g str, Vec<usize>>,
}

impl<'g> Fuser<'g> {
    fn new(g: &'g Graph, classes: &'g [Class]) -> Self {
        let mut producer = HashMap::new();
        let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in g.nodes.iter().enumerate() {
            for o in &n.outputs {
                producer.insert(o.as_str(), i);
            }
            for t in n.inputs.iter().filter(|t| !t.is_empty()) {
                consumers.entry(t.as_str()).or_default().push(i);
            }
        }
        Fuser {
            g,
            classes,
            producer,
            consumers,
        }
    }

    /// The epilogue of `seed`: the largest run of elementwise nodes, added in graph order,
    /// after which one tensor leaves the group.
    fn grow(&self, seed: usize, shape: &[i64], claimed: &[bool]) -> Vec<usize> {
        let mut members: Vec<usize> = vec![];
        let mut best = vec![];
        let mut set: HashSet<usize> = HashSet::from([seed]);
        for _ in 0..MAX_EPILOGUE {
            let next = (seed + 1..self.g.nodes.len())
                .find(|&c| !claimed[c] && !set.contains(&c) && self.joins(seed, c, shape, &set));
            let Some(c) = next else { break };
            set.insert(c);
            members.push(c);
            if self.live(&set) <= 1 {
                best = members.clone();
            }
        }
        best
    }

    /// Whether elementwise node `c` can join the group `set` grown from `seed`.
    fn joins(&self, seed: usize, c: usize, shape: &[i64], set: &HashSet<usize>) -> bool {
        let n = &self.g.nodes[c];
        if self.classes[c] != Class::Elementwise
            || n.outputs.first().and_then(|o| self.g.shape(o)) != Some(shape)
        {
            return false;
        }
        let mut reads_group = false;
        for t in n.inputs.iter().filter(|t| !t.is_empty()) {
            match self.producer.get(t.as_str()) {
                Some(p) if set.contains(p) => reads_group = true,
                _ if self.g.is_constant(t) => {}
                _ => {
                    // An external operand (a residual): it must not depend on the group (that
                    // would be a cycle), and an add joining two anchors' results goes to the
                    // larger one (the main path, not the shortcut's 1x1 convolution) when that
                    // one can take it (it does not feed this group).
                    if self.g.shape(t).is_none() || self.depends_on(t, set) {
                        return false;
                    }
                    if let Some(other) = self.anchor_behind(t)
                        && self.cost(other) > self.cost(seed)
                        && !self.g.nodes[seed]
                            .inputs
                            .iter()
                            .any(|i| self.depends_on(i, &HashSet::from([other])))
                    {
                        return false;
                    }
                }
            }
        }
        reads_group
    }

    /// Tensors produced inside `set` that are read outside it or returned.
    fn live(&self, set: &HashSet<usize>) -> usize {
        set.iter()
            .flat_map(|&i| &self.g.nodes[i].outputs)
            .filter(|o| !o.is_empty())
            .filter(|o| {
                self.g.outputs.contains(*o)
                    || self
                        .consumers
                        .get(o.as_str())
                        .is_some_and(|cs| cs.iter().any(|c| !set.contains(c)))
            })
            .count()
    }

    /// Whether tensor `t` is computed from anything in `set`.
    fn depends_on(&self, t: &str, set: &HashSet<usize>) -> bool {
        let mut stack = vec![t];
        let mut seen = HashSet::new();
        while let Some(t) = stack.pop() {
            let Some(&p) = self.producer.get(t) else {
                continue;
            };
            if set.contains(&p) {
                return true;
            }
            if seen.insert(p) {
                stack.extend(
                    self.g.nodes[p]
                        .inputs
                        .iter()
                        .filter(|t| !t.is_empty())
                        .map(String::as_str),
                );
            }
        }
        false
    }

    /// The anchor whose epilogue chain (single-input elementwise nodes) computes `t`, if any.
    fn anchor_behind(&self, t: &str) -> Option<usize> {
        let mut t = t;
        loop {
            let &p = self.producer.get(t)?;
            match &self.classes[p] {
                Class::Anchor => return Some(p),
                Class::Elementwise => {
                    let mut live = self.g.nodes[p]
                        .inputs
                        .iter()
                        .filter(|t| !t.is_empty() && !self.g.is_constant(t));
                    t = live.next()?;
                    if live.next().is_some() {
                        return None;
                    }
                }
                _ => return None,
            }
        }
    }

    /// A rough FLOP count of an anchor: output elements times the reduction it runs.
    fn cost(&self, i: usize) -> f64 {
        let n = &self.g.nodes[i];
        let out: f64 = n
            .outputs
            .first()
            .and_then(|o| self.g.shape(o))
            .map_or(0.0, |s| s.iter().product::<i64>() as f64);
        let w = n.input(1).and_then(|t| self.g.shape(t));
        let per = match (crate::integer::float_op(&n.op), w) {
            ("Conv", Some(w)) => w[1..].iter().product::<i64>() as f64,
            ("MatMul", Some(w)) => w[w.len() - 2] as f64,
            ("Gemm", Some(w)) => w[0].max(w[1]) as f64,
            _ => 1.0,
        };
        out * per
    }
}
