//! Scratch databases for tests (feature `testkit`): each test gets an empty database of its own
//! on the PostgreSQL server named by `BERTH_TEST_POSTGRES_URL`, dropped at the end. Without the
//! variable, callers print a loud skip line and return.

use sqlx::{AssertSqlSafe, Connection, PgConnection};
use std::io::Write;

/// The variable naming the test server, for example
/// `postgres://postgres@127.0.0.1:5432/postgres`.
pub const URL_VAR: &str = "BERTH_TEST_POSTGRES_URL";

/// The server URL, or `None` after printing a loud skip line naming `test`.
pub fn server_url(test: &str) -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            // Straight to the process's stderr: the test harness captures `eprintln!`.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: {URL_VAR} is not set; the PostgreSQL tests did not run ({test})"
            );
            None
        }
    }
}

/// `url` with its database (the path) replaced by `database`; keeps any query string.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[authority_start..]
        .find('/')
        .map_or(base.len(), |i| authority_start + i);
    let mut out = format!("{}/{database}", &base[..authority_end]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// Creates an empty database named `berth_test_<uuid>` and returns its name and URL.
#[expect(
    clippy::disallowed_methods,
    reason = "a scratch database name, not a domain id"
)]
pub async fn create(server: &str) -> (String, String) {
    let name = format!("berth_test_{}", uuid::Uuid::new_v4().simple());
    let mut conn = PgConnection::connect(server)
        .await
        .expect("connect to server");
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut conn)
        .await
        .expect("create database");
    let _ = conn.close().await;
    let url = with_database(server, &name);
    (name, url)
}

/// Vacuums the database at `url`, as autovacuum would: for a long campaign on a server that runs
/// without it, whose dead rows would otherwise slow every later statement.
pub async fn vacuum(url: &str) {
    let mut conn = PgConnection::connect(url)
        .await
        .expect("connect to the scratch database");
    sqlx::raw_sql("VACUUM")
        .execute(&mut conn)
        .await
        .expect("vacuum the scratch database");
    let _ = conn.close().await;
}

/// Drops the databases, best effort: a failure is printed, not raised.
pub async fn drop_all(server: &str, names: &[String]) {
    let mut conn = match PgConnection::connect(server).await {
        Ok(conn) => conn,
        Err(error) => {
            eprintln!("could not connect to drop scratch databases {names:?}: {error}");
            return;
        }
    };
    for name in names {
        let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        if let Err(error) = sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut conn).await {
            eprintln!("could not drop scratch database {name}: {error}");
        }
    }
    let _ = conn.close().await;
}

#[test]
fn with_database_replaces_only_the_path() {
    let cases = [
        ("postgres://u@h:5432/postgres", "postgres://u@h:5432/x"),
        ("postgres://u@h:5432/", "postgres://u@h:5432/x"),
        ("postgres://u@h:5432", "postgres://u@h:5432/x"),
        (
            "postgres://u:p@h/postgres?sslmode=disable&application_name=t",
            "postgres://u:p@h/x?sslmode=disable&application_name=t",
        ),
        (
            "postgresql://h?sslmode=disable",
            "postgresql://h/x?sslmode=disable",
        ),
    ];
    for (url, want) in cases {
        assert_eq!(with_database(url, "x"), want, "{url}");
    }
}
