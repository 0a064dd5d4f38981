//! Roles: what each kind of token may call, by gRPC method path.
//!
//! One table for the whole API, checked in front of every service (`layer`), so a method added
//! to the proto without a line here is refused to every role but admin (a test checks that each
//! method of the descriptors has a line). Finer rules that depend on the data (a client cancels
//! only its own jobs) are the handler's, with the caller's `Principal`.

use serde::Deserialize;
use std::fmt;

/// A token's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything: import records, cancel any job, manage workers.
    Admin,
    /// Compilers and users: submit, watch and cancel their own jobs, query, export records.
    Client,
    /// Measurement devices: register, heartbeat, pull pieces and report them, nothing else.
    Worker,
    /// Read-only answers: queries and record export.
    Query,
    /// Looking only: the jobs, their progress and curves, the fleet, the records and kernels
    /// (the web dashboard's read-only role); no submit, cancel, build or export.
    Viewer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Client => "client",
            Role::Worker => "worker",
            Role::Query => "query",
            Role::Viewer => "viewer",
        }
    }

    /// Whether the role may only read: never store, measure, compile or cancel (a handler's
    /// finer rule, beside the table's).
    pub fn read_only(self) -> bool {
        matches!(self, Role::Query | Role::Viewer)
    }

    pub fn parse(s: &str) -> Option<Role> {
        [
            Role::Admin,
            Role::Client,
            Role::Worker,
            Role::Query,
            Role::Viewer,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

use Role::{Client, Query, Viewer, Worker};

/// (method path or `service/` prefix, roles besides admin that may call it). Longest match wins:
/// a method's own line before its service's.
const RULES: &[(&str, &[Role])] = &[
    // The API's description is no secret from any token holder.
    (
        "/grpc.reflection.v1.ServerReflection/",
        &[Client, Worker, Query],
    ),
    (
        "/grpc.reflection.v1alpha.ServerReflection/",
        &[Client, Worker, Query],
    ),
    ("/tunehub.v1.Jobs/", &[Client]),
    // Looking at jobs, not changing them.
    ("/tunehub.v1.Jobs/Get", &[Client, Viewer]),
    ("/tunehub.v1.Jobs/List", &[Client, Viewer]),
    ("/tunehub.v1.Jobs/Watch", &[Client, Viewer]),
    ("/tunehub.v1.Jobs/Trials", &[Client, Viewer]),
    ("/tunehub.v1.Query/", &[Client, Query, Viewer]),
    // It runs the C compiler: not for read-only tokens.
    ("/tunehub.v1.Query/BuildModel", &[Client]),
    ("/tunehub.v1.Records/Export", &[Client, Query]),
    ("/tunehub.v1.Records/Import", &[]),
    ("/tunehub.v1.Workers/Register", &[Worker]),
    ("/tunehub.v1.Workers/Heartbeat", &[Worker]),
    ("/tunehub.v1.Workers/Pull", &[Worker]),
    ("/tunehub.v1.Workers/Report", &[Worker]),
    ("/tunehub.v1.Workers/List", &[Client, Viewer]),
];

/// Whether `role` may call the method at `path` (`/package.Service/Method`).
pub fn permits(role: Role, path: &str) -> bool {
    if role == Role::Admin {
        return true;
    }
    RULES
        .iter()
        .filter(|(p, _)| {
            if p.ends_with('/') {
                path.starts_with(p)
            } else {
                path == *p
            }
        })
        .max_by_key(|(p, _)| p.len())
        .is_some_and(|(_, roles)| roles.contains(&role))
}

/// Whether the table names `path` at all (a method missing from it is admin-only by default).
#[cfg(test)]
fn covered(path: &str) -> bool {
    RULES.iter().any(|(p, _)| {
        if p.ends_with('/') {
            path.starts_with(p)
        } else {
            path == *p
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// Every method of every service the server speaks, from the generated descriptors.
    fn method_paths() -> Vec<String> {
        let set =
            prost_types::FileDescriptorSet::decode(tunehub_proto::v1::FILE_DESCRIPTOR_SET).unwrap();
        set.file
            .iter()
            .flat_map(|f| {
                let package = f.package().to_string();
                f.service.iter().flat_map(move |s| {
                    let package = package.clone();
                    s.method
                        .iter()
                        .map(move |m| format!("/{package}.{}/{}", s.name(), m.name()))
                })
            })
            .collect()
    }

    #[test]
    fn every_api_method_has_a_rule() {
        let paths = method_paths();
        assert!(paths.len() > 10, "{paths:?}");
        for p in &paths {
            assert!(covered(p), "{p} has no line in auth::role::RULES");
        }
    }

    #[test]
    fn roles_reach_what_they_need_and_nothing_else() {
        let can = |r: Role, p: &str| permits(r, p);
        for p in method_paths() {
            assert!(can(Role::Admin, &p), "admin {p}");
        }
        assert!(can(Client, "/tunehub.v1.Jobs/Submit"));
        assert!(can(Client, "/tunehub.v1.Jobs/Cancel"));
        assert!(can(Client, "/tunehub.v1.Query/Best"));
        assert!(can(Client, "/tunehub.v1.Records/Export"));
        assert!(!can(Client, "/tunehub.v1.Records/Import"));
        assert!(!can(Client, "/tunehub.v1.Workers/Pull"));
        assert!(can(Client, "/tunehub.v1.Workers/List"));

        for p in [
            "/tunehub.v1.Workers/Register",
            "/tunehub.v1.Workers/Heartbeat",
            "/tunehub.v1.Workers/Pull",
            "/tunehub.v1.Workers/Report",
        ] {
            assert!(can(Worker, p), "{p}");
            assert!(!can(Client, p) && !can(Query, p), "{p}");
        }
        for p in [
            "/tunehub.v1.Jobs/Submit",
            "/tunehub.v1.Records/Import",
            "/tunehub.v1.Records/Export",
            "/tunehub.v1.Query/Best",
            "/tunehub.v1.Workers/List",
        ] {
            assert!(!can(Worker, p), "{p}");
        }

        assert!(can(Query, "/tunehub.v1.Query/BestBatch"));
        assert!(can(Client, "/tunehub.v1.Query/BuildModel"));
        assert!(!can(Query, "/tunehub.v1.Query/BuildModel"));
        assert!(can(Query, "/tunehub.v1.Records/Export"));
        assert!(!can(Query, "/tunehub.v1.Jobs/Submit"));
        assert!(!can(Query, "/tunehub.v1.Jobs/List"));

        // The viewer looks at everything a dashboard shows and changes nothing.
        for p in [
            "/tunehub.v1.Jobs/List",
            "/tunehub.v1.Jobs/Get",
            "/tunehub.v1.Jobs/Watch",
            "/tunehub.v1.Jobs/Trials",
            "/tunehub.v1.Workers/List",
            "/tunehub.v1.Query/Best",
            "/tunehub.v1.Query/ListTuned",
        ] {
            assert!(can(Viewer, p), "{p}");
        }
        for p in [
            "/tunehub.v1.Jobs/Submit",
            "/tunehub.v1.Jobs/SubmitModel",
            "/tunehub.v1.Jobs/Cancel",
            "/tunehub.v1.Query/BuildModel",
            "/tunehub.v1.Records/Export",
            "/tunehub.v1.Records/Import",
            "/tunehub.v1.Workers/Pull",
        ] {
            assert!(!can(Viewer, p), "{p}");
        }
        assert!(Viewer.read_only() && Query.read_only() && !Client.read_only());
        assert_eq!(Role::parse("viewer"), Some(Viewer));

        // Unknown paths, and prefixes that only look like a rule's, are admin-only.
        assert!(!can(Client, "/tunehub.v1.Secrets/Get"));
        assert!(!can(Client, "/tunehub.v1.JobsX/Submit"));
        assert!(!can(Worker, "/tunehub.v1.Workers/ReportX"));
        assert_eq!(Role::parse("worker"), Some(Worker));
        assert_eq!(Role::parse("root"), None);
    }
}
