//! The schema's migrations (`migrations/*.sql`), embedded in the binary.
//!
//! Listed here rather than through sqlx's `migrate!` macro: that macro needs sqlx's `macros`
//! feature, which compiles sqlx's database drivers a second time for the compiler (about two
//! minutes of a fresh build's CPU on 2 cores, on the way to the first tuned kernel). The version,
//! description and checksum of each entry are the ones sqlx derives from the file name and text,
//! so databases migrated by either way agree; a test checks the list against the directory.

use sqlx::migrate::{Migration, MigrationType, Migrator};
use std::borrow::Cow;

/// (version, description as sqlx spells it from the file name, SQL), in order.
const FILES: [(i64, &str, &str); 14] = [
    (1, "init", include_str!("../../../migrations/0001_init.sql")),
    (2, "jobs", include_str!("../../../migrations/0002_jobs.sql")),
    (
        3,
        "record counts",
        include_str!("../../../migrations/0003_record_counts.sql"),
    ),
    (
        4,
        "workload options",
        include_str!("../../../migrations/0004_workload_options.sql"),
    ),
    (
        5,
        "job owner",
        include_str!("../../../migrations/0005_job_owner.sql"),
    ),
    (
        6,
        "workload structure",
        include_str!("../../../migrations/0006_workload_structure.sql"),
    ),
    (
        7,
        "job priority",
        include_str!("../../../migrations/0007_job_priority.sql"),
    ),
    (
        8,
        "job model",
        include_str!("../../../migrations/0008_job_model.sql"),
    ),
    (
        9,
        "job group",
        include_str!("../../../migrations/0009_job_group.sql"),
    ),
    (
        10,
        "shape ranges",
        include_str!("../../../migrations/0010_shape_ranges.sql"),
    ),
    (
        11,
        "pool owners",
        include_str!("../../../migrations/0011_pool_owners.sql"),
    ),
    (
        12,
        "task times cost model",
        include_str!("../../../migrations/0012_task_times_cost_model.sql"),
    ),
    (
        13,
        "record counts noisy",
        include_str!("../../../migrations/0013_record_counts_noisy.sql"),
    ),
    (
        14,
        "task alternative",
        include_str!("../../../migrations/0014_task_alternative.sql"),
    ),
];

/// Every migration, in order.
pub fn all() -> Vec<Migration> {
    FILES
        .iter()
        .map(|&(version, description, sql)| {
            Migration::new(
                version,
                Cow::Borrowed(description),
                MigrationType::Simple,
                Cow::Borrowed(sql),
                // sqlx's own rule: a file that starts so runs outside a transaction.
                sql.starts_with("-- no-transaction"),
            )
        })
        .collect()
}

/// The migrations up to and including `version`: the schema as that version of tunehub left it.
pub fn up_to(version: i64) -> Migrator {
    Migrator {
        migrations: all()
            .into_iter()
            .filter(|m| m.version <= version)
            .collect::<Vec<_>>()
            .into(),
        ..Migrator::DEFAULT
    }
}

/// The migrator that brings a database to the current schema.
pub fn migrator() -> Migrator {
    up_to(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The embedded list is the `migrations/` directory as sqlx reads it: same versions,
    /// descriptions and checksums, none missing (a new file must be added to `FILES`).
    #[tokio::test]
    async fn embedded_migrations_match_the_directory() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
        let on_disk = Migrator::new(dir.as_path()).await.unwrap();
        let embedded = migrator();
        let key = |m: &Migration| {
            (
                m.version,
                m.description.to_string(),
                m.migration_type,
                m.checksum.to_vec(),
                m.no_tx,
            )
        };
        let disk: Vec<_> = on_disk.iter().map(key).collect();
        let ours: Vec<_> = embedded.iter().map(key).collect();
        assert_eq!(ours, disk);
    }
}
