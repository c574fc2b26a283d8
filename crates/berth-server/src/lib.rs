//! The berth server: configuration, wiring of store, service and HTTP surfaces, and shutdown.
#![forbid(unsafe_code)]

pub mod auth;
pub mod clock;
pub mod cloud_placement;
pub mod cloud_sync;
pub mod clouds;
pub mod config;
pub mod connections;
pub mod http;
pub mod ids;
pub mod keystone;
pub mod metrics;
pub mod notifier;
pub mod policy;
pub mod tls;

use crate::auth::Authenticator;
use crate::config::{Config, SqliteSynchronous, StorageUrl};
use crate::http::state::HttpLimits;
use anyhow::Context as _;
use berth_app::Berth;
use berth_store::Store;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Opens the configured store, applying migrations; an SQLite file (and the directories above
/// it) is created owner-only when missing, and opened with the `synchronous` setting.
pub async fn open_store(
    storage: &StorageUrl,
    synchronous: SqliteSynchronous,
) -> anyhow::Result<Arc<dyn Store>> {
    match storage {
        StorageUrl::Sqlite(path) => {
            if synchronous == SqliteSynchronous::Off {
                tracing::warn!(
                    "--sqlite-synchronous off: nothing is synced, so a power loss may lose any answered write or corrupt the database"
                );
            }
            let store = berth_store_sqlite::SqliteStore::open_with(path, synchronous.store())
                .await
                .with_context(|| format!("opening SQLite database {}", path.display()))?;
            Ok(Arc::new(store))
        }
        StorageUrl::Postgres(url) => {
            let store = berth_store_postgres::PostgresStore::connect(url)
                .await
                .context("connecting to PostgreSQL")?;
            Ok(Arc::new(store))
        }
    }
}

/// A server that is accepting connections.
#[derive(Debug)]
pub struct Running {
    addr: SocketAddr,
    /// Placement's own listener, when asked for, and its task.
    placement: Option<(SocketAddr, JoinHandle<std::io::Result<()>>)>,
    stop: CancellationToken,
    task: JoinHandle<std::io::Result<()>>,
    grace: Duration,
}

impl Running {
    /// The bound address (useful with port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address Placement is served at the root of, when `--placement-listen` asked.
    pub fn placement_addr(&self) -> Option<SocketAddr> {
        self.placement.as_ref().map(|(addr, _)| *addr)
    }

    /// Stops accepting at once without waiting (for cleanup paths that cannot await).
    pub fn abort(self) {
        self.stop.cancel();
        self.task.abort();
        if let Some((_, task)) = self.placement {
            task.abort();
        }
    }

    /// Stops accepting, lets in-flight requests finish within the grace period, and returns.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.stop.cancel();
        let both = async {
            if let Some((_, task)) = self.placement {
                task.await
                    .context("Placement's server task panicked")?
                    .context("Placement's server failed")?;
            }
            self.task
                .await
                .context("server task panicked")?
                .context("server failed")
        };
        match tokio::time::timeout(self.grace, both).await {
            Ok(result) => result,
            Err(_) => {
                tracing::warn!(
                    grace_s = self.grace.as_secs(),
                    "in-flight requests did not finish in time"
                );
                Ok(())
            }
        }
    }
}

/// The system clock, or (fault tests) the system clock moved by `--clock-offset-seconds`.
fn wall_clock(config: &Config) -> Arc<dyn berth_app::Clock> {
    match config.clock_offset_seconds {
        0 => Arc::new(clock::SystemClock),
        offset => {
            tracing::warn!(
                offset_seconds = offset,
                "--clock-offset-seconds: this replica's clock is moved (fault testing only)"
            );
            Arc::new(clock::OffsetClock {
                offset_micros: offset.saturating_mul(1_000_000),
            })
        }
    }
}

/// Opens the store, loads the service, seeds demo data if asked, binds and starts serving.
pub async fn start(config: &Config) -> anyhow::Result<Running> {
    let auth = authenticator(config)?;
    let tls = config.tls.as_ref().map(tls::acceptor).transpose()?;
    let destinations = Arc::new(config.callback_destinations.clone());
    let notifier: Arc<dyn berth_app::Notifier> = Arc::new(notifier::HttpNotifier::new(
        config.callback_ca_file.as_deref(),
        Arc::clone(&destinations),
    )?);
    let store = open_store(&config.storage, config.sqlite_synchronous).await?;
    let forwarder = forwarder(config)?;
    let berth =
        Arc::new(Berth::open(Arc::clone(&store), wall_clock(config), Arc::new(ids::V7Ids)).await?);
    configure(&berth, config).await?;
    let limits = HttpLimits {
        body_limit_bytes: config.body_limit_bytes,
        request_timeout: config.request_timeout,
    };
    let stop = CancellationToken::new();
    spawn_engines(&berth, notifier, &stop);
    let (cloud_client, cloud_placement, board) = start_clouds(config, &berth, &stop)?;
    let mut app = http::router(
        Arc::clone(&berth),
        auth,
        limits,
        config.access_policy.clone(),
        forwarder.clone(),
    )?
    .layer(axum::Extension(destinations))
    .layer(axum::Extension(cloud_client))
    .layer(axum::Extension(cloud_placement))
    .layer(axum::Extension(board));
    if !config.cors_allowed_origins.is_empty() {
        app = app.layer(http::cors(config.cors_allowed_origins.clone()));
    }
    let listener = bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let placement_listener = match config.placement_listen {
        Some(address) => Some(bind(address).await?),
        None => None,
    };
    let connection_limits = connections::ConnectionLimits {
        max_connections: config.max_connections,
        idle_timeout: config.idle_timeout,
        header_timeout: config.header_timeout,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    if let Some(forwarder) = forwarder {
        let url = advertised(config, addr, scheme);
        start_forwarding(forwarder, url, store, &berth, &stop).await;
    }
    let placement = match placement_listener {
        Some(listener) => {
            let placement_addr = listener.local_addr()?;
            tracing::info!(%placement_addr, scheme, "Placement is served at the root");
            let rooted = http::placement::at_root(app.clone());
            let task = connections::serve(
                listener,
                rooted,
                app.clone(),
                connection_limits,
                tls.clone(),
                stop.clone(),
            );
            Some((placement_addr, tokio::spawn(task)))
        }
        None => None,
    };
    let task = tokio::spawn(connections::serve(
        listener,
        app.clone(),
        app,
        connection_limits,
        tls,
        stop.clone(),
    ));
    tracing::info!(%addr, scheme, auth = ?config.auth, "berth is serving");
    Ok(Running {
        addr,
        placement,
        stop,
        task,
        grace: config.shutdown_grace,
    })
}

/// Sets the service's policies from the configuration, and seeds the demo inventory if asked.
async fn configure(berth: &Berth, config: &Config) -> anyhow::Result<()> {
    berth.set_fence_policy(match config.fence_unreserved {
        true => berth_core::query::presentation::FencePolicy::Enforced,
        false => berth_core::query::presentation::FencePolicy::Off,
    });
    berth.set_preemption_notice(config.preemption_notice);
    berth.set_claim_ttl(config.claim_ttl);
    berth.set_batch_gather(config.batch_gather);
    berth.set_idle_release(config.idle_release);
    for (project, period, limits) in config.access_policy.budgets() {
        let limits = limits
            .iter()
            .map(|(class, hours)| {
                let hours = i64::try_from(*hours).unwrap_or(i64::MAX);
                (class.as_str().to_owned(), hours)
            })
            .collect();
        berth.set_budget(project.clone(), *period, limits).await?;
    }
    if let Some(policy) = &config.policy {
        berth.set_policy(policy.clone()).await?;
    }
    if config.demo && berth.seed_demo().await? {
        tracing::info!("seeded the demo inventory");
    }
    Ok(())
}

/// The service's engines, until `stop`: lifecycle, notifications, following other replicas.
fn spawn_engines(
    berth: &Arc<Berth>,
    notifier: Arc<dyn berth_app::Notifier>,
    stop: &CancellationToken,
) {
    let engine = Arc::clone(berth);
    let halt = stop.clone();
    tokio::spawn(async move { engine.run_lifecycle(halt.cancelled_owned()).await });
    let engine = Arc::clone(berth);
    let halt = stop.clone();
    tokio::spawn(engine.run_notifications(notifier, halt.cancelled_owned()));
    let engine = Arc::clone(berth);
    let halt = stop.clone();
    tokio::spawn(async move { engine.run_replication(halt.cancelled_owned()).await });
}

/// Bids for the writer's term at `url` (none: never takes the others' writes), reads who holds
/// it before the first request is served, and renews it until `stop`, telling `berth`'s engines
/// each time whether they stand by.
async fn start_forwarding(
    forwarder: Arc<http::writer::Forwarder>,
    url: Option<String>,
    store: Arc<dyn Store>,
    berth: &Arc<Berth>,
    stop: &CancellationToken,
) {
    match url {
        Some(url) => forwarder.advertise(url),
        None => tracing::info!(
            "listening on every address without --advertise-url: this replica forwards writes but never takes the others'"
        ),
    }
    forwarder.renew(store.as_ref(), berth).await;
    tokio::spawn(forwarder.run(store, Arc::clone(berth), stop.clone()));
}

/// Forwarding of writes to the replica that takes them, where replicas share the database
/// (PostgreSQL); none where one process holds it.
fn forwarder(config: &Config) -> anyhow::Result<Option<Arc<http::writer::Forwarder>>> {
    if !matches!(config.storage, StorageUrl::Postgres(_)) {
        return Ok(None);
    }
    // The writer answers within its request timeout, or its commit grace for a write it took.
    let answer_within =
        config.request_timeout + http::deadline::COMMIT_GRACE + Duration::from_secs(5);
    let forwarder = http::writer::Forwarder::new(config.forward_writes, answer_within)?;
    Ok(Some(Arc::new(forwarder)))
}

/// Where the other replicas reach this one: `--advertise-url`, else the bound address unless it
/// is every address (which names no one place to reach).
fn advertised(config: &Config, addr: SocketAddr, scheme: &str) -> Option<String> {
    match &config.advertise_url {
        Some(url) => Some(url.as_str().trim_end_matches('/').to_owned()),
        None if addr.ip().is_unspecified() => None,
        None => Some(format!("{scheme}://{addr}")),
    }
}

/// The provider clouds' client, their Placement calls and the board of their reads, with the
/// task that keeps them current (until `stop`).
fn start_clouds(
    config: &Config,
    berth: &Arc<Berth>,
    stop: &CancellationToken,
) -> anyhow::Result<(
    Arc<clouds::CloudClient>,
    Arc<cloud_placement::CloudPlacement>,
    cloud_sync::SyncBoard,
)> {
    let client = Arc::new(clouds::CloudClient::new(config.credential_key.clone())?);
    let board = cloud_sync::SyncBoard::default();
    let placement = Arc::new(cloud_placement::CloudPlacement::new(Arc::clone(&client)));
    let sync = cloud_sync::CloudSync::new(Arc::clone(berth), Arc::clone(&placement), board.clone());
    tokio::spawn(sync.run(config.cloud_sync_interval, stop.clone()));
    Ok((client, placement, board))
}

/// The configured authentication mode, ready to identify callers.
fn authenticator(config: &Config) -> anyhow::Result<Arc<Authenticator>> {
    let mut authenticator = Authenticator::new(config.auth, config.tokens.as_deref())?
        .with_trusted_proxies(config.trusted_proxies.clone());
    if let Some(settings) = &config.keystone {
        authenticator =
            authenticator.with_keystone(Arc::new(keystone::Keystone::new(settings.clone())?));
    }
    if config.auth == auth::AuthMode::Headers && !config.listen.ip().is_loopback() {
        tracing::warn!(
            listen = %config.listen,
            trusted_proxies = ?config.trusted_proxies,
            "--auth headers believes the identity headers of these peers only; put the authenticating proxy there and keep everyone else from reaching berth directly"
        );
    }
    Ok(Arc::new(authenticator))
}

async fn bind(address: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("binding {address}"))
}

/// Serves until SIGINT or SIGTERM, then shuts down gracefully.
pub async fn serve(config: &Config) -> anyhow::Result<()> {
    let running = start(config).await?;
    shutdown_signal().await;
    tracing::info!("shutting down");
    running.shutdown().await
}

async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
}
