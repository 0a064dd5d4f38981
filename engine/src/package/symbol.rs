//! C names of linkable kernels: unique per (workload, target), readable, and under a prefix the
//! caller chooses (a compiler's own namespace).

use super::PackageError;

/// The prefix when the caller gives none.
pub const DEFAULT_PREFIX: &str = "tunehub_";

/// Longest prefix or pack name accepted: far below any linker's limit, long enough for a
/// namespace.
const MAX_IDENTIFIER: usize = 64;

/// `name` is a C identifier (ASCII letters, digits, `_`, not starting with a digit) of at most
/// 64 characters; `what` names it in the error.
pub fn check_identifier(what: &str, name: &str) -> Result<(), PackageError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_IDENTIFIER
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(PackageError::BadName(format!(
            "{what} `{name}` is not a C identifier of at most {MAX_IDENTIFIER} characters \
             (letters, digits and _, not starting with a digit)"
        )))
    }
}

/// `<prefix><operator>_<workload key, 10>_<target hash>`: the operator is the description's
/// leading name (`matmul` of `matmul(512,512,512)`; `expr` for the text form); the workload
/// key's first 10 hex digits and the target key's hash (its last part, up to 8 characters)
/// make it unique per (workload, target).
pub fn symbol_for(
    prefix: &str,
    description: &str,
    workload_key: &str,
    target_key: &str,
) -> Result<String, PackageError> {
    let prefix = if prefix.is_empty() {
        DEFAULT_PREFIX
    } else {
        prefix
    };
    check_identifier("symbol prefix", prefix)?;
    let op: String = description
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(32)
        .collect();
    let op = if op.is_empty() || description[op.len()..].trim_start().starts_with('[') {
        "expr".to_string()
    } else {
        op
    };
    let short = |k: &str, n: usize| -> String {
        k.chars()
            .filter(char::is_ascii_alphanumeric)
            .take(n)
            .collect()
    };
    let target_hash = target_key.rsplit('-').next().unwrap_or(target_key);
    Ok(format!(
        "{prefix}{op}_{}_{}",
        short(workload_key, 10),
        short(target_hash, 8)
    ))
}
