//! C identifiers: every buffer and loop gets a name that is unique and no C keyword.

use crate::lower::Var;
use std::collections::{HashMap, HashSet};

const RESERVED: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "main",
    "free",
    "malloc",
    "aligned_alloc",
    "exp",
    "expf",
    "log",
    "logf",
    "sqrt",
    "sqrtf",
    "tanh",
    "tanhf",
    "erf",
    "erff",
    "fabsf",
    "INFINITY",
    "NAN",
];

/// Gives every buffer and variable a unique, valid C identifier derived from its IR name.
#[derive(Default)]
pub(super) struct Names {
    pub(super) used: HashSet<String>,
    pub(super) vars: HashMap<Var, String>,
    pub(super) bufs: Vec<String>,
}

impl Names {
    pub(super) fn fresh(&mut self, base: &str) -> String {
        let mut s: String = base
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
            s.insert(0, 'v');
        }
        if RESERVED.contains(&s.as_str()) || s.starts_with("th_") || s.starts_with("tunehub") {
            s.push_str("_t");
        }
        let mut out = s.clone();
        let mut k = 1;
        while !self.used.insert(out.clone()) {
            out = format!("{s}_{k}");
            k += 1;
        }
        out
    }
}
