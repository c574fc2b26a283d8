//! The store conformance suite against PostgreSQL, plus persistence across a reconnect and the
//! migration of an existing database.
//!
//! The server comes from `BERTH_TEST_POSTGRES_URL`; every case gets a database of its own, made
//! here and dropped at the end. Without the variable each test says loudly that it skipped.

use berth_store::Store;
use berth_store_postgres::PostgresStore;
use std::sync::{Arc, Mutex};

use berth_store_postgres::scratch;

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

/// Runs `test` with the server's URL and the stores it makes, in a task of its own so that a
/// failing case still gets its databases dropped; without a server, says it skipped.
async fn on_scratch<F, Fut>(name: &str, test: F)
where
    F: FnOnce(String, Made) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let Some(server) = scratch::server_url(name) else {
        return;
    };
    let made = Made::default();
    let outcome = tokio::spawn(test(server.clone(), made.clone())).await;
    finish(&server, &made, outcome).await;
}

async fn fresh_store(server: &str, made: &Made) -> PostgresStore {
    fresh_store_at(server, made).await.0
}

/// The provider the single-write tests create.
fn cn1() -> berth_core::decide::inventory::NewProvider {
    berth_core::decide::inventory::NewProvider {
        uuid: berth_core::ProviderId::from_u128(42),
        name: "cn1".to_owned(),
        parent: None,
        availability_zone: None,
    }
}

/// A store over a database of its own, and the database's URL.
async fn fresh_store_at(server: &str, made: &Made) -> (PostgresStore, String) {
    let (name, url) = scratch::create(server).await;
    let store = PostgresStore::connect(&url).await.expect("connect");
    made.lock().expect("lock").push((name, store.clone()));
    (store, url)
}

#[tokio::test]
async fn postgres_store_conforms() {
    on_scratch("postgres_store_conforms", |server, made| async move {
        berth_store::testkit::run_all(|| {
            let (server, made) = (server.clone(), made.clone());
            async move { fresh_store(&server, &made).await }
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn postgres_store_keeps_everything_across_a_reconnect() {
    on_scratch(
        "postgres_store_keeps_everything_across_a_reconnect",
        |server, made| async move {
            let (name, url) = scratch::create(&server).await;
            let store = PostgresStore::connect(&url).await.expect("connect");
            made.lock()
                .expect("lock")
                .push((name.clone(), store.clone()));
            let mut catalog = berth_core::Catalog::new();
            let new = cn1();
            let at = berth_core::Instant::from_micros(5);
            berth_store::testkit::write(&store, &mut catalog, |c| {
                berth_core::decide::inventory::create_provider(c, &new, at)
            })
            .await;
            store.close().await;
            let reconnected = PostgresStore::connect(&url).await.expect("reconnect");
            made.lock().expect("lock").push((name, reconnected.clone()));
            let rows = reconnected.load_catalog().await.expect("load");
            assert_eq!(rows, catalog.to_rows());
        },
    )
    .await;
}

#[tokio::test]
async fn postgres_store_reports_a_corrupt_lease_document() {
    use sqlx::Connection;
    on_scratch(
        "postgres_store_reports_a_corrupt_lease_document",
        |server, made| async move {
            let (store, url) = fresh_store_at(&server, &made).await;
            let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
            sqlx::query(
                "INSERT INTO leases (id, project_id, status, start_at, end_at, document, created_at, updated_at)
                 VALUES ('01900000-0000-7000-8000-000000000001', 'p', 'PENDING', 0, 1, '{\"id\": 7}', 0, 0)",
            )
            .execute(&mut conn)
            .await
            .expect("insert");
            conn.close().await.expect("close");
            berth_store::testkit::reports_the_corrupt_lease(&store).await;
        },
    )
    .await;
}

#[tokio::test]
async fn postgres_store_carries_a_0007_database_forward() {
    on_scratch(
        "postgres_store_carries_a_0007_database_forward",
        |server, made| async move {
            let (name, url) = scratch::create(&server).await;
            // A database as the migrations up to 0007 left it, with a document in
            // `promise_objects`.
            let pool = sqlx::PgPool::connect(&url).await.expect("connect");
            let up_to_0007 =
                berth_store::testkit::migrations_up_to(sqlx::migrate!("./migrations"), 7);
            up_to_0007.run(&pool).await.expect("migrate to 0007");
            sqlx::query(
                "INSERT INTO promise_objects (kind, id, document) VALUES ('cursor', 'outbox', $1)",
            )
            .bind(berth_store::testkit::CURSOR_BEFORE_0008.to_string())
            .execute(&pool)
            .await
            .expect("insert");
            pool.close().await;
            // Connecting applies 0008.
            let store = PostgresStore::connect(&url).await.expect("connect");
            made.lock().expect("lock").push((name, store.clone()));
            let schema = store.schema_columns().await.expect("schema");
            berth_store::testkit::carried_forward(&store, &schema).await;
            // The primary key (and its index) is named for the table too.
            let pool = sqlx::PgPool::connect(&url).await.expect("connect");
            let constraints: Vec<String> = sqlx::query_scalar(
                "SELECT conname::TEXT FROM pg_constraint WHERE conrelid = 'documents'::regclass",
            )
            .fetch_all(&pool)
            .await
            .expect("constraints");
            pool.close().await;
            assert_eq!(constraints, ["documents_pkey"]);
        },
    )
    .await;
}

#[tokio::test]
async fn postgres_change_log_keeps_the_retained_commits_and_announces_each() {
    on_scratch(
        "postgres_change_log_keeps_the_retained_commits_and_announces_each",
        |server, made| async move {
            let store = fresh_store(&server, &made)
                .await
                .with_change_log_retained(5);
            let mut feed = store
                .listen()
                .await
                .expect("listen")
                .expect("PostgreSQL announces commits");
            berth_store::testkit::change_log_prunes(&store, 5).await;
            // Every commit was announced, in order, with its sequence.
            let last = store.catalog_seq().await.expect("seq");
            for expected in 1..=last {
                let announced =
                    tokio::time::timeout(std::time::Duration::from_secs(10), feed.next())
                        .await
                        .expect("announced in time")
                        .expect("feed");
                assert_eq!(announced, Some(expected));
            }
        },
    )
    .await;
}

/// Consumers a batch replaces are found through the primary key however PostgreSQL's
/// statistics stood when the statement first ran. Here the table was vacuumed while empty, so
/// the planner took it for empty: a statement prepared once and planned generically then would
/// scan every consumer in each later batch, more of them the more there are.
#[tokio::test]
async fn postgres_replaces_consumers_through_the_key_whatever_the_statistics() {
    use berth_core::Change;
    use berth_core::model::consumer::Consumer;
    use sqlx::Connection;

    /// A batch that replaces consumers `replaced` (as new, where there were none).
    async fn replace(store: &PostgresStore, replaced: std::ops::Range<u128>) {
        let at = berth_core::Instant::from_micros(5);
        let changes: Vec<Change> = replaced
            .map(|n| Change::ConsumerSet {
                uuid: uuid::Uuid::from_u128(n),
                consumer: Some(Consumer {
                    project_id: "p".to_owned(),
                    user_id: "u".to_owned(),
                    consumer_type: None,
                    generation: 1,
                    allocations: Default::default(),
                    reservation: None,
                    created_at: at,
                    updated_at: at,
                }),
            })
            .collect();
        let mut tx = store.begin_write().await.expect("begin");
        tx.persist(&changes, at).await.expect("persist");
        tx.commit().await.expect("commit");
    }

    /// The table's scans once the counters of `rows` inserted rows have reached the statistics
    /// (each backend sends its own within about ten seconds).
    async fn scans_after(conn: &mut sqlx::PgConnection, rows: i64) -> i64 {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let (inserted, scans): (i64, i64) = sqlx::query_as(
                "SELECT n_tup_ins, seq_scan FROM pg_stat_user_tables WHERE relname = 'consumers'",
            )
            .fetch_one(&mut *conn)
            .await
            .expect("statistics");
            if inserted >= rows {
                return scans;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{inserted} of {rows} rows counted"
            );
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    }

    on_scratch(
        "postgres_replaces_consumers_through_the_key_whatever_the_statistics",
        |server, made| async move {
            let (store, url) = fresh_store_at(&server, &made).await;
            scratch::vacuum(&url).await;
            let mut stats = sqlx::PgConnection::connect(&url).await.expect("connect");
            // As before autovacuum first comes by: the statistics still say empty.
            sqlx::query("ALTER TABLE consumers SET (autovacuum_enabled = false)")
                .execute(&mut stats)
                .await
                .expect("autovacuum off");
            // The first batches, of two consumers each, meet a table of a page or less.
            for batch in 0..10_u128 {
                replace(&store, batch * 2..batch * 2 + 2).await;
            }
            // Then it grows to 40,000 consumers.
            for batch in 0..100_u128 {
                replace(&store, 1_000 + batch * 400..1_000 + (batch + 1) * 400).await;
            }
            let before = scans_after(&mut stats, 40_020).await;
            // Ten batches of twenty over it, where the key is the cheaper way.
            for batch in 0..10_u128 {
                let first = 1_000 + batch * 4_000;
                replace(&store, first..first + 20).await;
            }
            let after = scans_after(&mut stats, 40_220).await;
            assert_eq!(after, before, "no batch scanned the table");
            let _ = stats.close().await;
        },
    )
    .await;
}

/// A commit hands back the replication log's entry it appended, so that the writer sends its
/// followers the commit without encoding it again; it reads back from the log as it was.
#[tokio::test]
async fn postgres_hands_back_the_log_entry_it_appended() {
    on_scratch(
        "postgres_hands_back_the_log_entry_it_appended",
        |server, made| async move {
            let store = fresh_store(&server, &made).await;
            let new = cn1();
            let at = berth_core::Instant::from_micros(5);
            let changes = berth_core::decide::inventory::create_provider(
                &berth_core::Catalog::new(),
                &new,
                at,
            )
            .expect("accepted");
            let mut tx = store.begin_write().await.expect("begin");
            tx.persist(&changes, at).await.expect("persist");
            let (seq, entry) = tx.commit_logged().await.expect("commit");
            let entry = entry.expect("PostgreSQL hands back the entry");
            let tail = berth_store::codec::decode_tail(
                seq - 1,
                [(seq, i64::from(berth_core::CHANGE_FORMAT), entry)],
            );
            assert_eq!(tail, store.changes_after(seq - 1, 1).await.expect("log"));
            assert_eq!(
                tail,
                berth_store::Tail::Entries(vec![berth_store::Committed { seq, changes }])
            );
        },
    )
    .await;
}
