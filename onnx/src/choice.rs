//! The form of each convolution, chosen by its tuned kernels (issue 60: "by measurement or by
//! the cost of the tuned kernels, not by a fixed rule").
//!
//! A 3x3 stride-1 convolution runs direct or by Winograd's minimal filtering, both in NHWC,
//! so the choice is free of conversions and can be made one convolution at a time. Which form
//! wins depends on the shape (Winograd trades multiplications for two transforms: a win on
//! 64 channels of a 56x56 map, a loss on 3 input channels), so a job left to choose (`auto`)
//! tunes both ([`union`]), and a build takes, per convolution, the form whose tuned kernels
//! take least ([`per_convolution`]). TVM's x86 strategy instead always prefers Winograd where
//! it applies; measuring both costs the extra tasks' tuning, once.

use crate::graph::Graph;
use crate::layout::Layout;
use crate::tasks::{Call, NetTask, TaskList};
use std::collections::HashMap;

/// The tasks of every list, each workload once (with the weight of the first list that has
/// it), and the program of the first: the later lists' own tasks are alternatives, tuned for a
/// build's choice, and no call of this list runs them.
pub fn union(lists: Vec<TaskList>) -> TaskList {
    let mut lists = lists.into_iter();
    let mut first = lists.next().expect("a union of no list");
    for list in lists {
        for t in list.tasks {
            if !first.tasks.iter().any(|f| f.workload_key == t.workload_key) {
                first.tasks.push(NetTask {
                    alternative: true,
                    ..t
                });
            }
        }
    }
    first
}

/// A program whose convolutions each take the form whose tuned kernels take least.
#[derive(Debug, Clone)]
pub struct Mixed {
    pub list: TaskList,
    /// Convolutions with a Winograd form, and how many of them run by it.
    pub eligible: usize,
    pub winograd: usize,
}

/// `direct` (an NHWC list) with each convolution that `winograd` (the same model's Winograd
/// list) writes in three tasks run that way when the sum of their times is less than the
/// direct task's. A time is a task's tuned time per occurrence (`None`: untuned, never chosen
/// over a tuned form; with both untuned the convolution stays direct).
pub fn per_convolution(
    g: &Graph,
    direct: &TaskList,
    direct_times: &[Option<f64>],
    winograd: &TaskList,
    winograd_times: &[Option<f64>],
) -> Mixed {
    assert_eq!(direct.layout, Layout::Nhwc, "the direct form is NHWC's");
    assert_eq!(winograd.layout, Layout::Winograd);
    // A call's group is named by its anchor, the group's first node: both lists group alike.
    let mut alternatives: HashMap<usize, Vec<&Call>> = HashMap::new();
    for c in &winograd.calls {
        alternatives.entry(c.nodes[0]).or_default().push(c);
    }
    let time = |calls: &[&Call], times: &[Option<f64>]| -> Option<f64> {
        calls.iter().map(|c| times[c.task]).sum()
    };
    let mut b = Builder::default();
    let (mut eligible, mut chosen) = (0, 0);
    for c in &direct.calls {
        let alt = alternatives.get(&c.nodes[0]).map_or(&[][..], Vec::as_slice);
        if alt.len() > 1 {
            eligible += 1;
            let take = match (time(&[c], direct_times), time(alt, winograd_times)) {
                (Some(d), Some(w)) => w < d,
                (None, Some(_)) => true,
                _ => false,
            };
            if take {
                chosen += 1;
                for a in alt {
                    b.call(g, winograd, a);
                }
                continue;
            }
        }
        b.call(g, direct, c);
    }
    let layout = if chosen > 0 {
        Layout::Winograd
    } else {
        Layout::Nhwc
    };
    Mixed {
        list: TaskList {
            tasks: b.tasks,
            calls: b.calls,
            skipped: direct.skipped.clone(),
            glue: direct.glue,
            layout,
        },
        eligible,
        winograd: chosen,
    }
}

/// A task list rebuilt call by call from the lists the calls come from.
#[derive(Default)]
struct Builder {
    tasks: Vec<NetTask>,
    calls: Vec<Call>,
}

impl Builder {
    fn call(&mut self, g: &Graph, from: &TaskList, c: &Call) {
        let source = &from.tasks[c.task];
        let i = match self
            .tasks
            .iter()
            .position(|t| t.workload_key == source.workload_key)
        {
            Some(i) => {
                self.tasks[i].weight += 1;
                i
            }
            None => {
                self.tasks.push(NetTask {
                    weight: 1,
                    nodes: vec![],
                    alternative: false,
                    ..source.clone()
                });
                self.tasks.len() - 1
            }
        };
        let names = c.nodes.iter().map(|&n| g.nodes[n].name.clone());
        self.tasks[i].nodes.extend(names);
        self.calls.push(Call {
            task: i,
            ..c.clone()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::{Extraction, extract};
    use crate::{InputShapes, nets};

    /// ResNet-18 on a 32x32 input: 3x3 stride-1 convolutions on 8x8 and 4x4 maps (F(4x4)),
    /// 2x2 (F(2x2)) and 1x1 (no Winograd form).
    fn resnet() -> (Graph, TaskList, TaskList) {
        let bytes = nets::resnet18(Some(1), 32);
        let g = Graph::load(&bytes, &InputShapes::default(), None).unwrap();
        let list = |l| extract(&g, &Extraction::strict().in_layout(l)).unwrap();
        let (direct, winograd) = (list(Layout::Nhwc), list(Layout::Winograd));
        (g, direct, winograd)
    }

    fn keys(l: &TaskList) -> Vec<(&str, u32)> {
        let mut k: Vec<_> = l
            .tasks
            .iter()
            .map(|t| (t.workload_key.as_str(), t.weight))
            .collect();
        k.sort();
        k
    }

    #[test]
    fn a_job_left_to_choose_tunes_both_forms_and_runs_the_first() {
        let (g, direct, winograd) = resnet();
        let both = extract(&g, &Extraction::strict().in_every_form()).unwrap();
        let has = |l: &TaskList| {
            l.tasks
                .iter()
                .all(|t| both.tasks.iter().any(|b| b.workload_key == t.workload_key))
        };
        assert!(has(&direct) && has(&winograd));
        let mut unique: Vec<_> = both.tasks.iter().map(|t| &t.workload_key).collect();
        unique.dedup();
        assert_eq!(unique.len(), both.tasks.len());
        assert!(both.tasks.len() > direct.tasks.len());
        assert_eq!(both.layout, Layout::Nhwc);
        // The direct list's tasks run; the others are alternatives.
        for t in &both.tasks {
            let direct = direct
                .tasks
                .iter()
                .any(|d| d.workload_key == t.workload_key);
            assert_eq!(t.alternative, !direct, "{}", t.label);
        }
        let run: Vec<_> = both.calls.iter().map(|c| c.task).collect();
        assert_eq!(run, direct.calls.iter().map(|c| c.task).collect::<Vec<_>>());
    }

    #[test]
    fn each_convolution_takes_the_form_whose_kernels_take_least() {
        let (g, direct, winograd) = resnet();
        let ones = |l: &TaskList, t: Option<f64>| vec![t; l.tasks.len()];
        let mix = |w: Option<f64>| {
            per_convolution(
                &g,
                &direct,
                &ones(&direct, Some(1.0)),
                &winograd,
                &ones(&winograd, w),
            )
        };
        // Three tasks at 0.1 beat one at 1: every convolution with a Winograd form takes it.
        let all = mix(Some(0.1));
        assert_eq!(all.winograd, all.eligible);
        // The 3x3 stride-1 convolutions on 8x8, 4x4 and 2x2 maps: 4 + 3 + 3.
        assert_eq!(all.eligible, 10);
        assert_eq!(all.list.layout, Layout::Winograd);
        assert_eq!(keys(&all.list), keys(&winograd));
        // Three at 1 lose to one, and an untuned form is never chosen over a tuned one.
        for w in [Some(1.0), None] {
            let none = mix(w);
            assert_eq!((none.winograd, none.list.layout), (0, Layout::Nhwc));
            assert_eq!(keys(&none.list), keys(&direct));
        }
        // Cheap F(2x2) products only: the 2x2 map's convolutions alone turn.
        let mut w = ones(&winograd, Some(1.0));
        for (t, time) in winograd.tasks.iter().zip(&mut w) {
            if t.op_spec
                .as_ref()
                .is_some_and(|s| s.to_string().contains("b=16"))
            {
                *time = Some(-5.0);
            }
        }
        let some = per_convolution(&g, &direct, &ones(&direct, Some(1.0)), &winograd, &w);
        assert!(
            0 < some.winograd && some.winograd < some.eligible,
            "{some:?}"
        );
        let calls = &some.list.calls;
        assert_eq!(calls.len(), direct.calls.len() + 2 * some.winograd);
        let weights: u32 = some.list.tasks.iter().map(|t| t.weight).sum();
        assert_eq!(weights as usize, calls.len());
        for (i, t) in some.list.tasks.iter().enumerate() {
            assert_eq!(
                calls.iter().filter(|c| c.task == i).count(),
                t.weight as usize
            );
        }
    }
}
