//! An 8-bit stage's store in a vectorized loop (a requantized convolution's or matrix
//! product's epilogue, a quantized add): two loops over the lane instead of one, the first
//! computing the value rounded, saturated and still in floats (`th_cu8` / `th_ci8`) into a
//! small local array, the second converting it to the 8-bit type.
//!
//! In one loop, GCC 12 vectorized `th_qu8`'s selects on the 8-bit lanes of the result: the
//! masks of four float vectors merged into one of bytes through general registers and the
//! stack, about 25 instructions per vector of 16. The requantizing pass of MobileNetV2's
//! quantized 56x56x144 depthwise layer took 0.136 of its 0.216 ms that way; split, the layer
//! took 0.110 ms, and the whole model, same schedules, 1.75-1.87 ms instead of 2.67-2.90
//! (docs/experiments/2026-12-05-quantizing-stores.md). Each loop alone vectorizes cleanly: max
//! and min as compares and blends of floats, then one conversion and one narrowing store.

use super::writer::Gen;
use crate::lower::Stmt;

/// Elements of the local float array: a chunk of the lane (4 KiB, in L1), so that a long
/// vectorized loop (an elementwise stage over a whole map) needs no more stack than a short one.
const CHUNK: i64 = 1024;

impl Gen<'_> {
    /// The single store of a vectorized loop's `body` when it quantizes (an 8-bit stage whose
    /// value is computed in floats, not a copy of its own type) and stores plainly.
    pub(super) fn quantizing_store<'s>(&self, body: &'s [Stmt]) -> Option<&'s Stmt> {
        match body {
            [
                s @ Stmt::Store {
                    buf,
                    value,
                    reduce: None,
                    ..
                },
            ] => self.quantizes(*buf, value).then_some(s),
            _ => None,
        }
    }

    /// Writes the loop over `v` (`extent` iterations) of `store` (see
    /// [`Gen::quantizing_store`]) as the two loops of the module docs, in chunks of [`CHUNK`].
    pub(super) fn split_quantize(&mut self, store: &Stmt, v: &str, extent: i64) {
        let Stmt::Store {
            buf, index, value, ..
        } = store
        else {
            unreachable!("quantizing_store returns a store")
        };
        let t = self.dtype(*buf);
        let target = self.store_target(store, *buf, index);
        let value = self.typed_value(value, false);
        let tmp = self.names.fresh("q");
        let n = extent.min(CHUNK);
        self.line("{");
        self.depth += 1;
        self.line(&format!("float {tmp}[{n}] __attribute__((aligned(64)));"));
        // One chunk: the lane itself from 0; more: a chunk loop and the lane from its start.
        let chunk = (extent > CHUNK).then(|| {
            let (c, e) = (
                self.names.fresh(&format!("{v}_c")),
                self.names.fresh(&format!("{v}_e")),
            );
            self.line(&format!(
                "for (int {c} = 0; {c} < {extent}; {c} += {CHUNK}) {{"
            ));
            self.depth += 1;
            self.line(&format!(
                "const int {e} = th_mini({c} + {CHUNK}, {extent});"
            ));
            (c, e)
        });
        let (from, to, at) = match &chunk {
            Some((c, e)) => (c.clone(), e.clone(), format!("{v} - {c}")),
            None => ("0".into(), extent.to_string(), v.to_string()),
        };
        let name = t.name();
        self.line("#pragma omp simd");
        self.line(&format!("for (int {v} = {from}; {v} < {to}; ++{v}) {{"));
        self.line(&format!("  {tmp}[{at}] = th_c{name}({value});"));
        self.line("}");
        self.line("#pragma omp simd");
        self.line(&format!("for (int {v} = {from}; {v} < {to}; ++{v}) {{"));
        self.line(&format!("  {target} = ({})(int){tmp}[{at}];", t.c_name()));
        self.line("}");
        if chunk.is_some() {
            self.depth -= 1;
            self.line("}");
        }
        self.depth -= 1;
        self.line("}");
    }
}
