//! Glue whose result nothing reads is dropped: in a QDQ model, the `DequantizeLinear` of a
//! tensor that only integer kernels read (they read the 8-bit tensor behind it). Kernels stay:
//! each is a task the model was tuned for.

use crate::program::{Program, Step};

impl Program {
    /// Drops the glue steps whose values (through views) no later step and no output reads;
    /// the names of the values they wrote.
    pub fn prune(&mut self) -> Vec<String> {
        let mut live = vec![false; self.values.len()];
        for &v in &self.outputs {
            live[self.root(v)] = true;
        }
        let mut keep = vec![true; self.steps.len()];
        for (i, s) in self.steps.iter().enumerate().rev() {
            let wanted = s.writes().iter().any(|&w| live[self.root(w)]);
            if !matches!(s, Step::Kernel(_)) && !wanted {
                keep[i] = false;
                continue;
            }
            for r in s.reads() {
                live[self.root(r)] = true;
            }
        }
        let mut gone = vec![];
        let mut k = keep.iter();
        self.steps.retain(|s| {
            let kept = *k.next().expect("one flag per step");
            if !kept {
                gone.extend(s.writes().iter().map(|&w| self.values[w].name.clone()));
            }
            kept
        });
        gone
    }
}
