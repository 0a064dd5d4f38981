//! Text from the server that others wrote (a worker's device id, a report's error message) as
//! the terminal is to show it: control characters escaped as `char::escape_debug` writes them,
//! so that `ESC[2J` in a device id is printed as `\u{1b}[2J`, not obeyed. The server refuses
//! such strings at registration; this is the second line of defence (records imported or
//! stored before that check, a server of another version).

use std::borrow::Cow;

/// `s` with its control characters (C0, DEL, C1) and the bidirectional overrides that reorder
/// what a terminal shows escaped; anything else, quotes and backslashes included, as it is.
pub fn escaped(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| match c {
                // `\n`, `\t`, `\u{1b}`: as `{:?}` writes them.
                c if c.is_control() => c.escape_debug().to_string(),
                // Printable to Rust's tables, yet they reorder the line: `\u{202e}`.
                c if needs_escape(c) => c.escape_unicode().to_string(),
                c => c.to_string(),
            })
            .collect(),
    )
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert!(matches!(escaped("rack-3 \"ü\" a\\b"), Cow::Borrowed(_)));
        assert_eq!(escaped("a\x1b[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(escaped("x\ny\tz"), "x\\ny\\tz");
        assert_eq!(escaped("\u{9b}31m\u{202e}"), "\\u{9b}31m\\u{202e}");
    }
}
