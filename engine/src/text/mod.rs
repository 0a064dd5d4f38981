//! The text form: define an operator in a few lines instead of Rust.
//!
//! ```text
//! # matrix multiply
//! C[i,j] += A[i,k] * B[k,j] where i<512, j<512, k<512
//! ```
//!
//! Each statement defines one compute stage named after its output. Tensors that are read but
//! never defined become inputs whose shapes are inferred from the reads. `docs/text-form.md` is
//! the user-facing description; this module implements exactly that.
//!
//! Three small steps: a lexer, a recursive-descent parser that builds an untyped syntax tree,
//! and a lowering pass that resolves names and builds the [`ComputeDag`]. The tree is untyped
//! because a subexpression's role depends on where it sits: `h - 1` is an affine index inside
//! `[...]` and a number elsewhere, and `a < b` compares indices or values depending on its
//! operands. Lowering decides, with the whole statement (its variables and extents) in hand.
//!
//! One module per step: `lexer`, `parser` (into the tree of `syntax`), `lowering` (to the DAG);
//! `error` is the error all three return.

mod error;
mod lexer;
mod lowering;
mod parser;
mod syntax;
#[cfg(test)]
mod tests;

pub use error::ParseError;

use crate::ir::ComputeDag;
use lexer::lex;
use lowering::lower;
use parser::Parser;

/// Parses a program in the text form into a validated compute DAG.
///
/// Inputs come first, in order of first mention, then one compute stage per statement, in
/// order; every stage is `f32`.
pub fn parse(src: &str) -> Result<ComputeDag, ParseError> {
    let toks = lex(src)?;
    let stmts = Parser {
        src,
        toks,
        pos: 0,
        nesting: 0,
    }
    .program()?;
    lower(src, &stmts)
}
