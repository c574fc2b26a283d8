//! The store conformance suite against SQLite, plus persistence across a reopen and the
//! migration of an existing database.

use berth_store::Store;
use berth_store_sqlite::SqliteStore;

#[tokio::test]
async fn sqlite_store_conforms() {
    let dir = tempfile::tempdir().expect("temp dir");
    let counter = std::sync::atomic::AtomicUsize::new(0);
    berth_store::testkit::run_all(|| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.path().join(format!("case-{n}.db"));
        async move { SqliteStore::open(&path).await.expect("open") }
    })
    .await;
}

#[tokio::test]
async fn sqlite_store_keeps_everything_across_a_reopen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("berth.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let mut catalog = berth_core::Catalog::new();
    let new = berth_core::decide::inventory::NewProvider {
        uuid: berth_core::ProviderId::from_u128(42),
        name: "cn1".to_owned(),
        parent: None,
        availability_zone: None,
    };
    let at = berth_core::Instant::from_micros(5);
    berth_store::testkit::write(&store, &mut catalog, |c| {
        berth_core::decide::inventory::create_provider(c, &new, at)
    })
    .await;
    store.close().await;
    let reopened = SqliteStore::open(&path).await.expect("reopen");
    let rows = reopened.load_catalog().await.expect("load");
    assert_eq!(rows, catalog.to_rows());
}

#[tokio::test]
async fn sqlite_store_reports_a_corrupt_lease_document() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("berth.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&path);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .expect("connect");
    sqlx::query(
        "INSERT INTO leases (id, project_id, status, start_at, end_at, document, created_at, updated_at)
         VALUES ('01900000-0000-7000-8000-000000000001', 'p', 'PENDING', 0, 1, '{\"id\": 7}', 0, 0)",
    )
    .execute(&mut conn)
    .await
    .expect("insert");
    conn.close().await.expect("close");
    berth_store::testkit::reports_the_corrupt_lease(&store).await;
}

#[tokio::test]
async fn sqlite_store_carries_a_0007_database_forward() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("berth.db");
    // A database as the migrations up to 0007 left it, with a document in `promise_objects`.
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .expect("connect");
    let up_to_0007 = berth_store::testkit::migrations_up_to(sqlx::migrate!("./migrations"), 7);
    up_to_0007.run(&mut conn).await.expect("migrate to 0007");
    sqlx::query("INSERT INTO promise_objects (kind, id, document) VALUES ('cursor', 'outbox', ?)")
        .bind(berth_store::testkit::CURSOR_BEFORE_0008.to_string())
        .execute(&mut conn)
        .await
        .expect("insert");
    conn.close().await.expect("close");
    // Opening applies 0008.
    let store = SqliteStore::open(&path).await.expect("open");
    let schema = store.schema_columns().await.expect("schema");
    berth_store::testkit::carried_forward(&store, &schema).await;
    store.close().await;
}

/// One process holds an SQLite database, so its commits keep no replication log: nothing
/// follows them, and the log's cost is not paid.
#[tokio::test]
async fn sqlite_commits_keep_no_replication_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(&dir.path().join("berth.db"))
        .await
        .expect("open");
    assert!(!store.keeps_change_log());
    let mut catalog = berth_core::Catalog::new();
    berth_store::testkit::write(&store, &mut catalog, |_| {
        Ok(vec![berth_core::Change::OutboxCursor(3)])
    })
    .await;
    assert_eq!(store.change_log_bounds().await.expect("bounds"), (0, 0));
    assert_eq!(
        store.changes_after(0, 10).await.expect("log"),
        berth_store::Tail::Entries(Vec::new())
    );
}
