//! A fresh database on the PostgreSQL test cluster (TUNEHUB_TEST_PG_URL: one the tests may
//! create databases with; `.ci/run` starts a throwaway cluster and sets it).

use sqlx::Connection;

/// A fresh database on the test cluster, as a URL; `None` (skip, with a note; a failure under
/// CI=true) when no cluster is configured.
pub async fn fresh_db(name: &str) -> Option<String> {
    let Ok(base) = std::env::var("TUNEHUB_TEST_PG_URL") else {
        crate::tools::skip_or_fail(
            &format!("the PostgreSQL test {name}"),
            "TUNEHUB_TEST_PG_URL is not set",
        );
        return None;
    };
    let db = format!("t_{name}_{:08x}", rand::random::<u32>());
    let mut conn = sqlx::PgConnection::connect(&base)
        .await
        .expect("the PostgreSQL test cluster answers");
    sqlx::query(&format!("CREATE DATABASE {db}"))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    // Replace the database name at the end of the URL.
    let (prefix, _) = base.rsplit_once('/').expect("a URL with a database name");
    Some(format!("{prefix}/{db}"))
}
