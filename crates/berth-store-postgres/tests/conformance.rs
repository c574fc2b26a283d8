//! The store conformance suite against PostgreSQL, plus persistence across a reconnect.
//!
//! The server comes from `BERTH_TEST_POSTGRES_URL`; every case gets a database of its own, made
//! here and dropped at the end. Without the variable each test says loudly that it skipped.

use berth_store::Store;
use berth_store_postgres::PostgresStore;
use std::sync::{Arc, Mutex};

/// Scratch databases on the PostgreSQL server named by `BERTH_TEST_POSTGRES_URL`.
mod scratch {
    use sqlx::{AssertSqlSafe, Connection, PgConnection};
    use std::io::Write;

    /// The variable naming the test server, for example
    /// `postgres://postgres@127.0.0.1:5432/postgres`.
    pub(crate) const URL_VAR: &str = "BERTH_TEST_POSTGRES_URL";

    /// The server URL, or `None` after printing a loud skip line naming `test`.
    pub(crate) fn server_url(test: &str) -> Option<String> {
        match std::env::var(URL_VAR) {
            Ok(url) if !url.trim().is_empty() => Some(url),
            _ => {
                // Straight to the process's stderr: the test harness captures `eprintln!`.
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED: {URL_VAR} is not set; the PostgreSQL conformance suite did not run ({test})"
                );
                None
            }
        }
    }

    /// `url` with its database (the path) replaced by `database`; keeps any query string.
    pub(crate) fn with_database(url: &str, database: &str) -> String {
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
    pub(crate) async fn create(server: &str) -> (String, String) {
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

    /// Drops the databases, best effort: a failure is printed, not raised.
    pub(crate) async fn drop_all(server: &str, names: &[String]) {
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
}

/// Stores connected by one test and the names of their databases, for the cleanup.
type Made = Arc<Mutex<Vec<(String, PostgresStore)>>>;

/// Closes every store in `made`, drops their databases, then re-raises the test's panic if any.
async fn finish(server: &str, made: &Made, outcome: Result<(), tokio::task::JoinError>) {
    let made: Vec<_> = std::mem::take(&mut *made.lock().expect("lock"));
    let mut names = Vec::new();
    for (name, store) in made {
        store.close().await;
        if !names.contains(&name) {
            names.push(name);
        }
    }
    scratch::drop_all(server, &names).await;
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
}

async fn fresh_store(server: &str, made: &Made) -> PostgresStore {
    let (name, url) = scratch::create(server).await;
    let store = PostgresStore::connect(&url).await.expect("connect");
    made.lock().expect("lock").push((name, store.clone()));
    store
}

#[tokio::test]
async fn postgres_store_conforms() {
    let Some(server) = scratch::server_url("postgres_store_conforms") else {
        return;
    };
    let made = Made::default();
    // Run the suite in a task, so a failing case still gets its databases dropped.
    let outcome = tokio::spawn({
        let (server, made) = (server.clone(), made.clone());
        async move {
            berth_store::testkit::run_all(|| {
                let (server, made) = (server.clone(), made.clone());
                async move { fresh_store(&server, &made).await }
            })
            .await;
        }
    })
    .await;
    finish(&server, &made, outcome).await;
}

#[tokio::test]
async fn postgres_store_keeps_everything_across_a_reconnect() {
    let Some(server) = scratch::server_url("postgres_store_keeps_everything_across_a_reconnect")
    else {
        return;
    };
    let made = Made::default();
    let outcome = tokio::spawn({
        let (server, made) = (server.clone(), made.clone());
        async move {
            let (name, url) = scratch::create(&server).await;
            let store = PostgresStore::connect(&url).await.expect("connect");
            made.lock()
                .expect("lock")
                .push((name.clone(), store.clone()));
            let mut catalog = berth_core::Catalog::new();
            let new = berth_core::decide::NewProvider {
                uuid: uuid::Uuid::from_u128(42),
                name: "cn1".to_owned(),
                parent: None,
                availability_zone: None,
            };
            let at = berth_core::Instant::from_micros(5);
            berth_store::testkit::write(&store, &mut catalog, |c| {
                berth_core::decide::create_provider(c, &new, at)
            })
            .await;
            store.close().await;
            let reconnected = PostgresStore::connect(&url).await.expect("reconnect");
            made.lock().expect("lock").push((name, reconnected.clone()));
            let rows = reconnected.load_catalog().await.expect("load");
            assert_eq!(rows, catalog.to_rows());
        }
    })
    .await;
    finish(&server, &made, outcome).await;
}
