//! The static memory plan: every arena value (activations, the model's inputs and outputs) gets
//! an offset in one arena, reused by values whose lifetimes do not overlap. A value lives from
//! the step that first writes it to the last step that reads it or a view of it; the inputs
//! from before the first step, the outputs to after the last. Placement is greedy, largest
//! first, each at the lowest 64-byte-aligned offset free over its whole lifetime.

use crate::program::{Program, Storage};

/// Bytes every buffer is aligned to (the kernels' contract: `package::ALIGNMENT`).
pub const ALIGN: u64 = tunehub_engine::package::ALIGNMENT as u64;

pub fn align(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

#[derive(Debug, Clone)]
pub struct Plan {
    /// Per value: its byte offset in the arena (arena values only).
    pub offsets: Vec<Option<u64>>,
    pub arena_bytes: u64,
    /// What the arena values would take without reuse.
    pub unshared_bytes: u64,
}

pub fn plan(p: &Program) -> Plan {
    let n = p.values.len();
    let steps = p.steps.len();
    // Lifetimes in step positions: inputs are written at 0, step i at i + 1, outputs read at
    // steps + 1.
    let mut first = vec![usize::MAX; n];
    let mut last = vec![0usize; n];
    let touch = |v: usize, at: usize, first: &mut Vec<usize>, last: &mut Vec<usize>| {
        first[v] = first[v].min(at);
        last[v] = last[v].max(at);
    };
    for &v in &p.inputs {
        touch(p.root(v), 0, &mut first, &mut last);
    }
    for (i, s) in p.steps.iter().enumerate() {
        for v in s.reads() {
            touch(p.root(v), i + 1, &mut first, &mut last);
        }
        for v in s.writes() {
            touch(p.root(v), i + 1, &mut first, &mut last);
        }
    }
    for &v in &p.outputs {
        touch(p.root(v), steps + 1, &mut first, &mut last);
    }
    let mut arena: Vec<usize> = (0..n)
        .filter(|&v| p.values[v].storage == Storage::Arena && first[v] != usize::MAX)
        .collect();
    let size = |v: usize| align(p.values[v].bytes().max(1));
    arena.sort_by_key(|&v| (std::cmp::Reverse(size(v)), v));
    let mut offsets = vec![None; n];
    let mut placed: Vec<(u64, u64, usize, usize)> = vec![]; // offset, end, first, last
    let mut arena_bytes = 0;
    for &v in &arena {
        let (f, l, sz) = (first[v], last[v], size(v));
        let mut busy: Vec<(u64, u64)> = placed
            .iter()
            .filter(|&&(_, _, pf, pl)| pf <= l && f <= pl)
            .map(|&(o, e, _, _)| (o, e))
            .collect();
        busy.sort_unstable();
        let mut at = 0;
        for (o, e) in busy {
            if at + sz <= o {
                break;
            }
            at = at.max(e);
        }
        placed.push((at, at + sz, f, l));
        offsets[v] = Some(at);
        arena_bytes = arena_bytes.max(at + sz);
    }
    Plan {
        offsets,
        arena_bytes,
        unshared_bytes: arena.iter().map(|&v| size(v)).sum(),
    }
}
