//! The configured tokens: `--token SECRET` (or `TUNEHUB_TOKENS`, or `tokens = [..]` in the file)
//! gives admin tokens named `token-1`, `token-2`, ...; the file's `[[server.api_tokens]]`
//! entries give named tokens of any role, their secret inline or in a file (a mounted secret):
//!
//! ```toml
//! [[server.api_tokens]]
//! name = "board-pool-arm"
//! role = "worker"              # admin, client, worker or query
//! token_file = "/run/secrets/arm-workers"
//! ```

use super::{ApiToken, Role};
use serde::Deserialize;
use std::collections::HashSet;
use std::path::PathBuf;

/// One `[[server.api_tokens]]` entry of the configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    pub name: String,
    pub role: Role,
    /// The secret itself; or give `token_file`.
    pub token: Option<String>,
    /// A file holding the secret (surrounding whitespace ignored).
    pub token_file: Option<PathBuf>,
}

/// Names go into logs, metric labels and job listings: short, printable, unambiguous.
const MAX_NAME: usize = 64;

/// The tokens of the admin secrets and the named entries, checked: every name well formed and
/// unique, every secret non-empty, unique and usable as gRPC metadata. The message of an error
/// names the entry, never a secret.
pub fn resolve(admin: &[String], entries: &[TokenEntry]) -> Result<Vec<ApiToken>, String> {
    let mut out: Vec<ApiToken> = admin
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .enumerate()
        .map(|(i, t)| ApiToken::admin(i, t))
        .collect();
    for e in entries {
        let name = &e.name;
        if name.is_empty()
            || name.len() > MAX_NAME
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            return Err(format!(
                "api token name {name:?}: give 1 to {MAX_NAME} letters, digits, '.', '_' or '-'"
            ));
        }
        let secret = match (&e.token, &e.token_file) {
            (Some(t), None) => t.trim().to_string(),
            (None, Some(p)) => std::fs::read_to_string(p)
                .map_err(|err| format!("api token '{name}': {}: {err}", p.display()))?
                .trim()
                .to_string(),
            _ => {
                return Err(format!(
                    "api token '{name}': give exactly one of token and token_file"
                ));
            }
        };
        if secret.is_empty() {
            return Err(format!("api token '{name}': the secret is empty"));
        }
        out.push(ApiToken {
            name: name.clone(),
            role: e.role,
            secret,
        });
    }
    let mut names = HashSet::new();
    let mut secrets = HashSet::new();
    for t in &out {
        if !names.insert(t.name.as_str()) {
            return Err(format!("api token name '{}' is given twice", t.name));
        }
        if !secrets.insert(t.secret.as_str()) {
            return Err(format!(
                "api token '{}' has the secret of another token (each role needs its own)",
                t.name
            ));
        }
        // Visible ASCII is what gRPC metadata carries unchanged.
        if !t.secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "api token '{}': the secret must be printable ASCII without spaces",
                t.name
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, role: Role, token: Option<&str>) -> TokenEntry {
        TokenEntry {
            name: name.into(),
            role,
            token: token.map(String::from),
            token_file: None,
        }
    }

    #[test]
    fn admin_secrets_and_named_entries_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("w");
        std::fs::write(&file, "  from-file\n").unwrap();
        let mut w = entry("arm-pool", Role::Worker, None);
        w.token_file = Some(file);
        let t = resolve(
            &["a".into(), " ".into()],
            &[entry("ci", Role::Client, Some("c")), w],
        )
        .unwrap();
        let got: Vec<_> = t
            .iter()
            .map(|t| (t.name.as_str(), t.role, t.secret.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("token-1", Role::Admin, "a"),
                ("ci", Role::Client, "c"),
                ("arm-pool", Role::Worker, "from-file"),
            ]
        );
    }

    #[test]
    fn bad_entries_are_named_without_their_secret() {
        let cases: Vec<(Vec<TokenEntry>, &str)> = vec![
            (vec![entry("a b", Role::Client, Some("s1"))], "name"),
            (vec![entry("", Role::Client, Some("s1"))], "name"),
            (vec![entry("ci", Role::Client, None)], "exactly one"),
            (vec![entry("ci", Role::Client, Some("  "))], "empty"),
            (
                vec![
                    entry("ci", Role::Client, Some("s1")),
                    entry("ci", Role::Query, Some("s2")),
                ],
                "twice",
            ),
            (
                vec![
                    entry("ci", Role::Client, Some("s1")),
                    entry("q", Role::Query, Some("s1")),
                ],
                "another token",
            ),
            (vec![entry("ci", Role::Client, Some("s 1"))], "printable"),
        ];
        for (entries, want) in cases {
            let e = resolve(&[], &entries).unwrap_err();
            assert!(e.contains(want), "{e} (wanted {want})");
            assert!(!e.contains("s1") && !e.contains("s2"), "secret in {e}");
        }
        let mut missing = entry("ci", Role::Client, None);
        missing.token_file = Some("/nonexistent/tunehub-token".into());
        let e = resolve(&[], &[missing]).unwrap_err();
        assert!(e.contains("'ci'") && e.contains("/nonexistent"), "{e}");
    }
}
