//! The lexer: source text to tokens (names, numbers, symbols), each with its offset.

use super::error::ParseError;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    /// A numeric literal; `int` is set when it is written as an integer that fits an `i64`.
    Num {
        text: String,
        value: f64,
        int: Option<i64>,
    },
    Sym(&'static str),
    Semi,
    /// A newline outside brackets; inside brackets newlines are plain whitespace, so that a
    /// long read or call can wrap.
    Newline,
    Eof,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) offset: usize,
}

pub(super) fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("'{s}'"),
        Tok::Num { text, .. } => format!("'{text}'"),
        Tok::Sym(s) => format!("'{s}'"),
        Tok::Semi => "';'".into(),
        Tok::Newline => "end of line".into(),
        Tok::Eof => "end of input".into(),
    }
}

/// Longest first, so that `<=` is not lexed as `<` `=`.
const SYMBOLS: [&str; 20] = [
    "+=", "<=", ">=", "==", "!=", "&&", "||", "[", "]", "(", ")", ",", "+", "-", "*", "/", "<",
    ">", "=", "!",
];

pub(super) fn lex(src: &str) -> Result<Vec<Token>, ParseError> {
    let b = src.as_bytes();
    let mut toks = vec![];
    let mut i = 0;
    let mut depth = 0usize;
    // Only ASCII bytes are consumed one at a time, so `i` is always on a char boundary.
    while i < b.len() {
        let start = i;
        match b[i] {
            b' ' | b'\t' | b'\r' => i += 1,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'\n' => {
                if depth == 0 {
                    toks.push(Token {
                        tok: Tok::Newline,
                        offset: i,
                    });
                }
                i += 1;
            }
            b';' => {
                toks.push(Token {
                    tok: Tok::Semi,
                    offset: i,
                });
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                toks.push(Token {
                    tok: Tok::Ident(src[start..i].into()),
                    offset: start,
                });
            }
            c if c.is_ascii_digit() => {
                let (tok, end) = lex_number(src, start)?;
                toks.push(Token { tok, offset: start });
                i = end;
            }
            c => {
                let Some(sym) = SYMBOLS.iter().find(|s| b[i..].starts_with(s.as_bytes())) else {
                    let ch = src[i..].chars().next().unwrap_or('?');
                    let expected = match c {
                        b'&' => "'&&'",
                        b'|' => "'||'",
                        _ => "a name, a number, an operator or a bracket",
                    };
                    return Err(ParseError::at(src, i, expected, format!("'{ch}'"), None));
                };
                match *sym {
                    "[" | "(" => depth += 1,
                    "]" | ")" => depth = depth.saturating_sub(1),
                    _ => {}
                }
                toks.push(Token {
                    tok: Tok::Sym(sym),
                    offset: i,
                });
                i += sym.len();
            }
        }
    }
    toks.push(Token {
        tok: Tok::Eof,
        offset: b.len(),
    });
    Ok(toks)
}

/// `digits [. digits*] [(e|E) [+|-] digits]`, starting at a digit.
fn lex_number(src: &str, start: usize) -> Result<(Tok, usize), ParseError> {
    let b = src.as_bytes();
    let digits = |mut j: usize| {
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        j
    };
    let mut j = digits(start);
    let mut is_int = true;
    if j < b.len() && b[j] == b'.' {
        is_int = false;
        j = digits(j + 1);
    }
    if j < b.len() && (b[j] == b'e' || b[j] == b'E') {
        let mut k = j + 1;
        if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
            k += 1;
        }
        if k >= b.len() || !b[k].is_ascii_digit() {
            let found = src[k..]
                .chars()
                .next()
                .map_or("end of input".into(), |c| format!("'{c}'"));
            return Err(ParseError::at(
                src,
                k,
                "digits of the exponent",
                found,
                None,
            ));
        }
        is_int = false;
        j = digits(k);
    }
    let text = &src[start..j];
    let value: f64 = text.parse().unwrap_or(f64::INFINITY);
    if !value.is_finite() {
        return Err(ParseError::at(
            src,
            start,
            "a finite number",
            format!("'{text}'"),
            None,
        ));
    }
    let int = if is_int { text.parse().ok() } else { None };
    Ok((
        Tok::Num {
            text: text.into(),
            value,
            int,
        },
        j,
    ))
}
