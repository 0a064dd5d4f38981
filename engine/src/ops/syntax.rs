//! The one tokenizer of the `name(arg, key=value, ...)` syntax: op specs ([`super::spec`]),
//! shape ranges (`transfer::range`) and the `layout_free=` sugar kept for callers outside the
//! engine (`ops::described::split_layout_free`) are all split by it. It splits, it does not interpret:
//! what the names and values mean is each caller's.

/// A call split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call<'a> {
    /// Before the `(`, trimmed; the whole text, trimmed, when it has no `(`.
    pub name: &'a str,
    /// The arguments in order; none for `name()` and for a bare `name`.
    pub args: Vec<Arg<'a>>,
    /// Byte offsets in the text of the `(` and of the closing `)`; `None` for a bare name.
    pub parens: Option<(usize, usize)>,
}

/// One argument: `value` or `key=value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg<'a> {
    /// As written between its commas, spaces kept (to rewrite a text without retyping it).
    pub raw: &'a str,
    /// The name before the first `=`, trimmed.
    pub key: Option<&'a str>,
    /// The value, trimmed.
    pub value: &'a str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    #[error("expected ')' at the end")]
    Unclosed,
    /// A stray comma (`matmul(64,64,64,)`) is a typo, not an argument to skip.
    #[error("argument {0} is empty (a stray ',')")]
    EmptyArgument(usize),
}

/// The text before the `(`, trimmed: the name of what is called, even when the rest is
/// malformed (a shape range refuses a text form by it); `None` without a `(`.
pub fn name_of(text: &str) -> Option<&str> {
    text.find('(').map(|open| text[..open].trim())
}

/// Splits `text` as `name(arg, ...)`; a bare `name` is a call without arguments. The text
/// must end with the `)` (spaces aside); commas separate arguments, none of them empty.
pub fn split_call(text: &str) -> Result<Call<'_>, SyntaxError> {
    let Some(open) = text.find('(') else {
        return Ok(Call {
            name: text.trim(),
            args: vec![],
            parens: None,
        });
    };
    let end = text.trim_end();
    if !end.ends_with(')') || end.len() - 1 <= open {
        return Err(SyntaxError::Unclosed);
    }
    let close = end.len() - 1;
    let inner = &text[open + 1..close];
    let args = if inner.trim().is_empty() {
        vec![]
    } else {
        inner
            .split(',')
            .enumerate()
            .map(|(i, raw)| {
                if raw.trim().is_empty() {
                    return Err(SyntaxError::EmptyArgument(i + 1));
                }
                let (key, value) = match raw.split_once('=') {
                    Some((k, v)) => (Some(k.trim()), v.trim()),
                    None => (None, raw.trim()),
                };
                Ok(Arg { raw, key, value })
            })
            .collect::<Result<_, _>>()?
    };
    Ok(Call {
        name: text[..open].trim(),
        args,
        parens: Some((open, close)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_split_into_name_and_arguments() {
        let c = split_call(" dense( 1, n = 8 ,k=4 ) ").unwrap();
        assert_eq!(c.name, "dense");
        let parts: Vec<(Option<&str>, &str)> = c.args.iter().map(|a| (a.key, a.value)).collect();
        assert_eq!(parts, [(None, "1"), (Some("n"), "8"), (Some("k"), "4")]);
        assert_eq!(c.args[1].raw, " n = 8 ");
        assert_eq!(c.parens, Some((6, 22)));
        let bare = split_call("softmax").unwrap();
        assert_eq!(
            (bare.name, bare.args.len(), bare.parens),
            ("softmax", 0, None)
        );
        assert!(split_call("softmax( )").unwrap().args.is_empty());
        // `..` and `+` are values like any other: ranges and input lists are the callers'.
        let r = split_call("matmul(m=1..8,layout_free=A+B)").unwrap();
        assert_eq!((r.args[0].value, r.args[1].value), ("1..8", "A+B"));
    }

    #[test]
    fn malformed_calls_are_refused_with_the_reason() {
        for (text, want) in [
            ("matmul(64,64,64", SyntaxError::Unclosed),
            ("matmul(", SyntaxError::Unclosed),
            ("f)(", SyntaxError::Unclosed),
            ("matmul(64,64,64,)", SyntaxError::EmptyArgument(4)),
            ("matmul(,64)", SyntaxError::EmptyArgument(1)),
            ("matmul(64, ,64)", SyntaxError::EmptyArgument(2)),
        ] {
            assert_eq!(split_call(text), Err(want), "{text}");
        }
        assert_eq!(name_of("Y[i] = relu(X[i]) where i<4"), Some("Y[i] = relu"));
        assert_eq!(name_of("C[i] += A[i]"), None);
    }
}
