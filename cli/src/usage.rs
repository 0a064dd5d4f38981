//! How the command line reports its outcome: exit status 0 done, 1 failed, 2 bad input (one
//! line on stderr, nothing stored). Bad input is what clap refuses, what a command refuses
//! after parsing (an unknown operator, a parse error), and what the service refuses as the
//! caller's fault (INVALID_ARGUMENT, NOT_FOUND).

use anyhow::anyhow;
use std::io::Write;
use tonic::{Code, Status};

/// Bad input found after argument parsing (an unknown operator, a parse error): reported like a
/// clap error, exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Exit status for bad input (clap's, and ours).
pub const USAGE_EXIT: u8 = 2;

/// Clap's error as one line: its message without the usage block and the "--help" hint, with
/// the lines that belong to the message (missing arguments, tips) joined.
pub fn one_line_clap_error(err: &clap::Error) -> String {
    let text = err.to_string();
    let msg: Vec<String> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .map(|l| {
            if l.starts_with("tip:") {
                format!("({l})")
            } else {
                l.to_string()
            }
        })
        .collect();
    let line = msg.join(" ");
    if line.starts_with("error:") {
        line
    } else {
        format!("error: {line}")
    }
}

/// One line for any message: newlines inside (say, from a compiler) would break "one line".
pub fn one_line(msg: &str) -> String {
    msg.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// A refused call as the CLI reports it: bad input (INVALID_ARGUMENT, or NOT_FOUND: an unknown
/// target, job or workload key named by the user) exits 2 like a clap error, the rest 1.
pub fn status_error(s: Status) -> anyhow::Error {
    let msg = format!("{}: {}", code_name(s.code()), s.message());
    match s.code() {
        Code::InvalidArgument | Code::NotFound => UsageError(msg).into(),
        _ => anyhow!(msg),
    }
}

fn code_name(c: Code) -> &'static str {
    match c {
        Code::InvalidArgument => "invalid argument",
        Code::NotFound => "not found",
        Code::Unauthenticated => "unauthenticated",
        Code::PermissionDenied => "permission denied",
        Code::FailedPrecondition => "failed precondition",
        Code::ResourceExhausted => "resource exhausted",
        Code::Unavailable => "unavailable",
        _ => "server error",
    }
}

/// Writes results to stdout; a closed pipe (`tunehub ops | head`) ends the output quietly.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_joins_lines() {
        assert_eq!(one_line("a\n  b\n\nc"), "a | b | c");
    }

    #[test]
    fn the_callers_faults_are_usage_errors() {
        for code in [Code::InvalidArgument, Code::NotFound] {
            let e = status_error(Status::new(code, "x"));
            assert!(e.downcast_ref::<UsageError>().is_some(), "{code:?}");
        }
        let e = status_error(Status::new(Code::Internal, "x"));
        assert!(e.downcast_ref::<UsageError>().is_none());
        assert_eq!(e.to_string(), "server error: x");
    }
}
