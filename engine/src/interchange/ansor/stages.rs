//! Stage numbers in Ansor's order and in ours. Both number every stage, placeholders included,
//! but Ansor orders a DAG's operations by its own topological sort (`TopoSortOps` in
//! `compute_dag.cc`): a depth-first walk from the last tensor of the definition's list gives
//! each operation a priority, and among the ready operations the one met last goes first. So
//! conv2d's `pad` comes before `kernel` there, after it here. Cache write inserts a stage just
//! before the one it caches, in both: the map follows it.

use crate::ir::ComputeDag;
use std::collections::{BinaryHeap, HashSet};

/// Positions of the same stages in both numberings, as steps insert stages.
#[derive(Debug, Clone)]
pub struct StageMap {
    /// Stage identities in our order.
    ours: Vec<usize>,
    /// The same identities in Ansor's order.
    theirs: Vec<usize>,
}

impl StageMap {
    /// The map of a DAG defined in TE with its inputs, in our placeholder order, then its
    /// outputs: the list a registered workload function returns.
    pub fn new(dag: &ComputeDag) -> StageMap {
        StageMap {
            ours: (0..dag.stages.len()).collect(),
            theirs: ansor_order(dag),
        }
    }

    /// Ansor's number of our stage `s`.
    pub fn to_ansor(&self, s: usize) -> Option<usize> {
        let id = *self.ours.get(s)?;
        self.theirs.iter().position(|&x| x == id)
    }

    /// Our number of Ansor's stage `s`.
    pub fn from_ansor(&self, s: usize) -> Option<usize> {
        let id = *self.theirs.get(s)?;
        self.ours.iter().position(|&x| x == id)
    }

    /// A stage inserted just before our stage `s` (cache write).
    pub fn insert_before(&mut self, s: usize) {
        let Some(&id) = self.ours.get(s) else {
            return;
        };
        let new = self.ours.len();
        self.ours.insert(s, new);
        let t = self
            .theirs
            .iter()
            .position(|&x| x == id)
            .expect("both lists hold every stage");
        self.theirs.insert(t, new);
    }
}

/// Our stage indices in the order Ansor's `TopoSortOps` gives the operations of the same DAG.
fn ansor_order(dag: &ComputeDag) -> Vec<usize> {
    let n = dag.stages.len();
    let inputs: Vec<Vec<usize>> = dag.stages.iter().map(|s| s.inputs()).collect();
    // The definition's tensor list: the inputs, then the outputs; the walk pops from the back.
    let mut stack: Vec<usize> = dag.placeholders();
    stack.extend(dag.outputs());
    let mut priority = vec![0usize; n];
    let mut visited = HashSet::new();
    let mut ct = 0;
    while let Some(op) = stack.pop() {
        if !visited.insert(op) {
            continue;
        }
        priority[op] = ct;
        ct += 1;
        stack.extend(&inputs[op]);
    }
    let mut degree: Vec<usize> = inputs.iter().map(Vec::len).collect();
    let consumers = dag.consumers();
    let mut ready: BinaryHeap<(usize, usize)> = (0..n)
        .filter(|&i| degree[i] == 0 && visited.contains(&i))
        .map(|i| (priority[i], i))
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some((_, op)) = ready.pop() {
        order.push(op);
        for &c in &consumers[op] {
            degree[c] -= 1;
            if degree[c] == 0 {
                ready.push((priority[c], c));
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;

    fn names(dag: &ComputeDag) -> Vec<&str> {
        ansor_order(dag)
            .into_iter()
            .map(|i| dag.stages[i].name.as_str())
            .collect()
    }

    /// The orders TVM 0.19 gives the TE twins (printed by `ComputeDAG(...).ops`).
    #[test]
    fn ansor_orders_stages_by_its_topological_sort() {
        assert_eq!(names(&ops::matmul(4, 4, 4).unwrap()), ["A", "B", "C"]);
        let conv = ops::conv2d_nchw(1, 2, 5, 5, 2, win(1), true, true).unwrap();
        assert_eq!(
            names(&conv),
            ["data", "pad", "kernel", "conv", "bias", "bias_relu"]
        );
        let plain = ops::conv2d_nchw(1, 2, 5, 5, 2, win(0), false, false).unwrap();
        assert_eq!(names(&plain), ["data", "kernel", "conv"]);
        let dense = ops::dense(2, 4, 4, true, false).unwrap();
        assert_eq!(
            names(&dense),
            ["data", "weight", "dense", "bias", "bias_add"]
        );
    }

    fn win(pad: i64) -> ops::Window {
        ops::Window::square(3, 1, pad)
    }

    #[test]
    fn inserted_stages_keep_both_numberings_in_step() {
        let conv = ops::conv2d_nchw(1, 2, 5, 5, 2, win(1), false, false).unwrap();
        // ours: data kernel pad conv; Ansor's: data pad kernel conv.
        let mut m = StageMap::new(&conv);
        assert_eq!(
            (m.to_ansor(1), m.to_ansor(2), m.to_ansor(3)),
            (Some(2), Some(1), Some(3))
        );
        m.insert_before(3);
        // ours: data kernel pad conv.local conv; Ansor's: data pad kernel conv.local conv.
        assert_eq!((m.to_ansor(3), m.to_ansor(4)), (Some(3), Some(4)));
        assert_eq!((m.from_ansor(1), m.from_ansor(2)), (Some(2), Some(1)));
        assert_eq!(m.to_ansor(5), None);
    }
}
