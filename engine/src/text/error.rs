//! The parse error, and where in the source it points.

/// A parse error, syntactic or semantic, with the position of the offending token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {message}")]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub col: usize,
    /// Byte offset into the source.
    pub offset: usize,
    /// What was expected here.
    pub expected: String,
    /// What was found instead.
    pub found: String,
    /// The explanation shown after the position: `expected X, found Y` for syntax errors, a
    /// sentence saying what is wrong and how to fix it for the others.
    pub message: String,
}

impl ParseError {
    pub(super) fn at(
        src: &str,
        offset: usize,
        expected: impl Into<String>,
        found: impl Into<String>,
        message: Option<String>,
    ) -> Self {
        let (line, col) = line_col(src, offset);
        let (expected, found) = (expected.into(), found.into());
        let message = message.unwrap_or_else(|| format!("expected {expected}, found {found}"));
        ParseError {
            line,
            col,
            offset,
            expected,
            found,
            message,
        }
    }
}

pub(super) fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let before = &src[..offset];
    let line_start = before.rfind('\n').map_or(0, |p| p + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}
