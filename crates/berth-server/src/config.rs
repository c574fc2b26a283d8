//! Configuration in two stages: [`ServeArgs`] (flags, each with a `BERTH_*` environment variable)
//! layered over an optional TOML file, then validated once into a typed [`Config`].
//!
//! Precedence, lowest first: built-in defaults, the TOML file given with `--config`, environment
//! variables, command-line flags.

use crate::auth::AuthMode;
use crate::clouds::CredentialKey;
use crate::keystone::{self, Credentials, DomainRef, KeystoneSettings, Secret};
use crate::notifier::destination::{self, Destinations};
use anyhow::Context as _;
use berth_core::model::promise::Policy;
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The `berth` command line.
#[derive(Debug, Parser)]
#[command(
    name = "berth",
    version,
    about = "Resource reservation, capacity management and placement"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands: the server, its health check, and the client's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server.
    Serve(ServeArgs),
    /// Check that a running server answers `/healthz` (exit 0 when ready).
    Healthcheck {
        /// Base URL of the server.
        #[arg(long, env = "BERTH_URL", default_value = "http://127.0.0.1:8778")]
        url: String,
    },
    /// The client: hosts, providers, leases, capacity, nodes, subscriptions and more.
    #[command(flatten)]
    Client(berth_cli::ClientCommand),
}

/// SQLite's `synchronous` setting (in WAL mode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSynchronous {
    /// A commit is durable against a crash of berth, not against power loss or an OS crash.
    #[default]
    Normal,
    /// A commit is durable against power loss too: each commit waits for an fsync of the WAL.
    Full,
    /// Nothing is synced: a power loss may lose any commit or corrupt the database. Unsafe: the
    /// power-cut campaign's negative control.
    Off,
}

impl SqliteSynchronous {
    /// The store's setting.
    pub fn store(self) -> berth_store_sqlite::Synchronous {
        match self {
            SqliteSynchronous::Normal => berth_store_sqlite::Synchronous::Normal,
            SqliteSynchronous::Full => berth_store_sqlite::Synchronous::Full,
            SqliteSynchronous::Off => berth_store_sqlite::Synchronous::Off,
        }
    }
}

/// Flags of `berth serve`; every one is optional here so that the file can fill it in.
#[derive(Debug, Clone, Default, Args)]
pub struct ServeArgs {
    /// TOML configuration file.
    #[arg(long, env = "BERTH_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:8778].
    #[arg(long, env = "BERTH_LISTEN")]
    pub listen: Option<String>,
    /// Also serve the Placement API at the root of this address, as Placement itself is
    /// deployed (its port 8778), beside `--listen` [default: none].
    #[arg(long, env = "BERTH_PLACEMENT_LISTEN")]
    pub placement_listen: Option<String>,
    /// An origin (`https://dashboard.example.com`) whose web pages may call berth (CORS);
    /// repeatable or comma-separated [default: none].
    #[arg(
        long = "cors-allowed-origin",
        env = "BERTH_CORS_ALLOWED_ORIGIN",
        value_delimiter = ','
    )]
    pub cors_allowed_origins: Vec<String>,
    /// Directory for the embedded database [default: ./berth-data].
    #[arg(long, env = "BERTH_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Database URL: `sqlite://PATH` or `postgres://...` [default: DATA_DIR/berth.db].
    #[arg(long, env = "BERTH_DATABASE")]
    pub database: Option<String>,
    /// SQLite's `synchronous` setting: `normal` (a process crash loses nothing; a power loss
    /// or OS crash may lose the last commits), `full` (commits survive power loss; each
    /// commit waits for an fsync) or `off` (never syncs; unsafe, for testing) [default: normal].
    #[arg(long, env = "BERTH_SQLITE_SYNCHRONOUS", value_enum)]
    pub sqlite_synchronous: Option<SqliteSynchronous>,
    /// Authentication mode [default: noauth on loopback, otherwise required].
    #[arg(long, env = "BERTH_AUTH", value_enum)]
    pub auth: Option<AuthMode>,
    /// Token file for `--auth token`.
    #[arg(long, env = "BERTH_TOKENS")]
    pub tokens: Option<PathBuf>,
    /// Address ranges (CIDR) whose identity headers `--auth headers` believes: the proxy that
    /// authenticates callers [default: loopback].
    #[arg(
        long = "trusted-proxy",
        env = "BERTH_TRUSTED_PROXY",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<String>,
    /// Seed demo inventory when the database is empty.
    #[arg(long, env = "BERTH_DEMO")]
    pub demo: bool,
    /// Keep consumers that present no reservation out of capacity leases hold [default: true];
    /// `false` is strict Placement behaviour (callers exclude reservations with `member_of`).
    #[arg(long, env = "BERTH_FENCE_UNRESERVED")]
    pub fence_unreserved: Option<bool>,
    /// Seconds before a lease starts that preemptible consumers it will evict are told
    /// [default: 120].
    #[arg(long, env = "BERTH_PREEMPTION_NOTICE_SECONDS")]
    pub preemption_notice_seconds: Option<u64>,
    /// PEM bundle of CA certificates trusted for `https` callbacks, in addition to the system's
    /// roots.
    #[arg(long, env = "BERTH_CALLBACK_CA_FILE")]
    pub callback_ca_file: Option<PathBuf>,
    /// Address range (CIDR) callbacks may reach although it is loopback, link-local, private,
    /// multicast or reserved; repeatable or comma-separated [default: none].
    #[arg(long, env = "BERTH_CALLBACK_ALLOW", value_delimiter = ',')]
    pub callback_allow: Vec<String>,
    /// Seconds a bare-metal node claim holds its node unless the request gives a `ttl`
    /// [default: 600].
    #[arg(long, env = "BERTH_CLAIM_TTL_SECONDS")]
    pub claim_ttl_seconds: Option<u64>,
    /// Release a lease that no consumer has presented this many seconds after its start, for
    /// leases created from then on [default: off].
    #[arg(long, env = "BERTH_RELEASE_UNCONSUMED_AFTER_SECONDS")]
    pub release_unconsumed_after_seconds: Option<u64>,
    /// Seconds before such a release that the lease's holder is told [default: 3600, or the
    /// whole delay when it is shorter].
    #[arg(long, env = "BERTH_RELEASE_NOTICE_SECONDS")]
    pub release_notice_seconds: Option<u64>,
    /// For fault testing only: run as if the system clock were this many seconds ahead
    /// (negative: behind), at most a day either way [default: 0].
    #[arg(long, env = "BERTH_CLOCK_OFFSET_SECONDS", allow_hyphen_values = true)]
    pub clock_offset_seconds: Option<i64>,
    /// Most connections served at once; more wait in the listen backlog [default: 1024].
    #[arg(long, env = "BERTH_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Seconds a connection with no request in flight stays open without traffic [default: 60].
    #[arg(long, env = "BERTH_IDLE_TIMEOUT_SECONDS")]
    pub idle_timeout_seconds: Option<u64>,
    /// Seconds a request's headers may take from their first byte [default: 10].
    #[arg(long, env = "BERTH_HEADER_TIMEOUT_SECONDS")]
    pub header_timeout_seconds: Option<u64>,
    /// Authorization policy file (TOML): per-route role overrides and priority grants.
    #[arg(long = "policy", env = "BERTH_POLICY")]
    pub policy_file: Option<PathBuf>,
    /// PEM certificate chain to serve HTTPS with (with `--tls-key`).
    #[arg(long, env = "BERTH_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `--tls-cert`.
    #[arg(long, env = "BERTH_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// The URL the other replicas reach this one at when it takes their writes (PostgreSQL)
    /// [default: the bound address, unless it listens on every address].
    #[arg(long, env = "BERTH_ADVERTISE_URL")]
    pub advertise_url: Option<String>,
    /// Whether this replica forwards its writes to the replica that takes them (PostgreSQL);
    /// `false` decides them here, as a replica whose writer cannot be reached does
    /// [default: true].
    #[arg(long, env = "BERTH_FORWARD_WRITES")]
    pub forward_writes: Option<bool>,
    /// Milliseconds a write batch may wait, before it begins, for as many writes as the batch
    /// before it made, so that callers who write again as soon as they are answered share one
    /// commit; 0 never waits. A batch after one that made a single write never waits
    /// [default: 2; at most 100].
    #[arg(long, env = "BERTH_BATCH_GATHER_MS")]
    pub batch_gather_ms: Option<u64>,
    /// Print the effective configuration and exit.
    #[arg(long)]
    pub print_config: bool,
}

/// The TOML file: the same keys as the flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    placement_listen: Option<String>,
    cors_allowed_origins: Option<Vec<String>>,
    data_dir: Option<PathBuf>,
    database: Option<String>,
    sqlite_synchronous: Option<SqliteSynchronous>,
    auth: Option<AuthMode>,
    tokens: Option<PathBuf>,
    trusted_proxies: Option<Vec<String>>,
    policy_file: Option<PathBuf>,
    demo: Option<bool>,
    placement: Option<PlacementSection>,
    promise: Option<PromiseSection>,
    notifications: Option<NotificationsSection>,
    baremetal: Option<BaremetalSection>,
    leases: Option<LeasesSection>,
    http: Option<HttpSection>,
    keystone: Option<KeystoneSection>,
    provider_clouds: Option<ProviderCloudsSection>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    advertise_url: Option<String>,
    forward_writes: Option<bool>,
    batch_gather_ms: Option<u64>,
}

/// `[keystone]` in the TOML file: where Keystone is and berth's own credentials there.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeystoneSection {
    auth_url: Option<String>,
    www_authenticate_uri: Option<String>,
    username: Option<String>,
    password: Option<Secret>,
    user_domain_id: Option<String>,
    user_domain_name: Option<String>,
    project_name: Option<String>,
    project_domain_id: Option<String>,
    project_domain_name: Option<String>,
    application_credential_id: Option<String>,
    application_credential_secret: Option<Secret>,
    cache_seconds: Option<u64>,
    cache_entries: Option<usize>,
    timeout_seconds: Option<u64>,
    service_token_roles: Option<Vec<String>>,
}

impl KeystoneSection {
    /// The validated settings.
    fn settings(self) -> anyhow::Result<KeystoneSettings> {
        let auth_url = self
            .auth_url
            .context("[keystone] auth_url is required, such as \"http://keystone:5000/v3\"")?;
        anyhow::ensure!(
            http_url(&auth_url).is_some(),
            "[keystone] auth_url {auth_url:?} is not an http(s) URL"
        );
        let domain = |id: Option<String>, name: Option<String>, what: &str| match (id, name) {
            (Some(_), Some(_)) => {
                anyhow::bail!("[keystone] set {what}_domain_id or {what}_domain_name, not both")
            }
            (Some(id), None) => Ok(DomainRef::Id(id)),
            (None, Some(name)) => Ok(DomainRef::Name(name)),
            (None, None) => Ok(DomainRef::Id("default".to_owned())),
        };
        let credentials = match (
            self.username,
            self.password,
            self.application_credential_id,
            self.application_credential_secret,
        ) {
            (Some(username), Some(password), None, None) => Credentials::Password {
                username,
                password,
                user_domain: domain(self.user_domain_id, self.user_domain_name, "user")?,
                project_name: self.project_name.context(
                    "[keystone] project_name is required with a password (the project where berth's user has the service role)",
                )?,
                project_domain: domain(
                    self.project_domain_id,
                    self.project_domain_name,
                    "project",
                )?,
            },
            (None, None, Some(id), Some(secret)) => {
                Credentials::ApplicationCredential { id, secret }
            }
            _ => anyhow::bail!(
                "[keystone] needs berth's credentials: username and password, or application_credential_id and application_credential_secret"
            ),
        };
        let cache_seconds = self
            .cache_seconds
            .unwrap_or(keystone::CACHE_SECONDS_DEFAULT);
        anyhow::ensure!(
            cache_seconds <= 86_400,
            "[keystone] cache_seconds must be between 0 and 86400"
        );
        let cache_entries = self
            .cache_entries
            .unwrap_or(keystone::CACHE_ENTRIES_DEFAULT);
        anyhow::ensure!(
            cache_entries <= 10_000_000,
            "[keystone] cache_entries must be between 0 and 10000000"
        );
        let timeout_seconds = self
            .timeout_seconds
            .unwrap_or(keystone::TIMEOUT_SECONDS_DEFAULT);
        anyhow::ensure!(
            (1..=60).contains(&timeout_seconds),
            "[keystone] timeout_seconds must be between 1 and 60"
        );
        Ok(KeystoneSettings {
            www_authenticate_uri: self
                .www_authenticate_uri
                .unwrap_or_else(|| auth_url.clone()),
            auth_url,
            credentials,
            cache_bound: Duration::from_secs(cache_seconds),
            cache_entries,
            timeout: Duration::from_secs(timeout_seconds),
            service_token_roles: self
                .service_token_roles
                .unwrap_or_else(|| vec!["service".to_owned()]),
        })
    }
}

/// `[http]` in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpSection {
    max_connections: Option<usize>,
    idle_timeout_seconds: Option<u64>,
    header_timeout_seconds: Option<u64>,
}

/// `[baremetal]` in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BaremetalSection {
    claim_ttl_seconds: Option<u64>,
}

/// `[leases]` in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LeasesSection {
    release_unconsumed_after_seconds: Option<u64>,
    release_notice_seconds: Option<u64>,
}

/// `[notifications]` in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NotificationsSection {
    callback_ca_file: Option<PathBuf>,
    callback_allow: Option<Vec<String>>,
}

/// `[provider_clouds]` in the TOML file: the key provider clouds' credentials are sealed with.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderCloudsSection {
    credential_key: Option<Secret>,
    sync_interval_seconds: Option<u64>,
}

impl ProviderCloudsSection {
    /// `sync_interval_seconds`, at least 1, 30 by default.
    fn sync_interval(&self) -> anyhow::Result<Duration> {
        match self.sync_interval_seconds {
            Some(0) => anyhow::bail!("[provider_clouds] sync_interval_seconds must be at least 1"),
            Some(seconds) => Ok(Duration::from_secs(seconds)),
            None => Ok(crate::cloud_sync::SYNC_INTERVAL_DEFAULT),
        }
    }

    fn key(self) -> anyhow::Result<Option<CredentialKey>> {
        self.credential_key
            .map(|text| {
                CredentialKey::from_hex(text.expose()).context(
                    "[provider_clouds] credential_key must be 64 hexadecimal digits (32 bytes), such as the output of `openssl rand -hex 32`",
                )
            })
            .transpose()
    }
}

/// `[promise]` in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PromiseSection {
    policy: Option<PolicySection>,
}

/// `[promise.policy]`: Promise's `policy/reservation`, with its names and units.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct PolicySection {
    max_future_start_range: Option<u32>,
    max_future_end_range: Option<u32>,
    max_duration: Option<u32>,
    expiry: Option<u32>,
    preemption: Option<bool>,
}

impl PolicySection {
    fn policy(self) -> anyhow::Result<Policy> {
        let defaults = Policy::default();
        for (name, days) in [
            ("max-future-start-range", self.max_future_start_range),
            ("max-future-end-range", self.max_future_end_range),
        ] {
            anyhow::ensure!(
                days.is_none_or(|d| d <= 365),
                "[promise.policy] {name} must be between 0 and 365 days"
            );
        }
        anyhow::ensure!(
            self.max_duration != Some(0),
            "[promise.policy] max-duration must be at least 1 hour"
        );
        Ok(Policy {
            max_future_start_days: self.max_future_start_range,
            max_future_end_days: self.max_future_end_range,
            max_duration_hours: self.max_duration.or(defaults.max_duration_hours),
            expiry_minutes: self.expiry,
            preemption: self.preemption.unwrap_or(defaults.preemption),
        })
    }
}

/// `[placement]` in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlacementSection {
    fence_unreserved: Option<bool>,
    preemption_notice_seconds: Option<u64>,
}

/// Where the data lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageUrl {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL server.
    Postgres(String),
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listen address.
    pub listen: SocketAddr,
    /// Where Placement is also served at the root, if anywhere.
    pub placement_listen: Option<SocketAddr>,
    /// The origins whose pages may call berth (CORS); none when empty.
    pub cors_allowed_origins: Vec<axum::http::HeaderValue>,
    /// Database.
    pub storage: StorageUrl,
    /// SQLite's `synchronous` setting (unused with PostgreSQL).
    pub sqlite_synchronous: SqliteSynchronous,
    /// Authentication mode.
    pub auth: AuthMode,
    /// Token file, required for `token` mode.
    pub tokens: Option<PathBuf>,
    /// Seed the demo inventory.
    pub demo: bool,
    /// Largest accepted request body.
    pub body_limit_bytes: usize,
    /// Longest a request may run.
    pub request_timeout: Duration,
    /// Most connections served at once.
    pub max_connections: usize,
    /// How long a connection with no request in flight stays open without traffic.
    pub idle_timeout: Duration,
    /// How long a request's headers may take from their first byte.
    pub header_timeout: Duration,
    /// How long shutdown waits for in-flight requests.
    pub shutdown_grace: Duration,
    /// Whether unreserved consumers are kept out of capacity leases hold.
    pub fence_unreserved: bool,
    /// How long before a lease starts the preemptible consumers it will evict are told.
    pub preemption_notice: Duration,
    /// The reservation policy set at start (`[promise.policy]`), if the file has one.
    pub policy: Option<Policy>,
    /// PEM bundle of extra CA certificates trusted for `https` callbacks (checked to hold at
    /// least one certificate).
    pub callback_ca_file: Option<PathBuf>,
    /// Where callbacks may go: the default refusals less the allowed ranges.
    pub callback_destinations: Destinations,
    /// How long a node claim holds when the request gives no `ttl`.
    pub claim_ttl: Duration,
    /// The release of unconsumed leases: `(after their start, notice before)`, or off.
    pub idle_release: Option<(Duration, Duration)>,
    /// Seconds added to the system clock (fault testing; 0 otherwise).
    pub clock_offset_seconds: i64,
    /// Where `--auth headers` accepts identity headers from.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The authorization policy file, if any.
    pub policy_file: Option<PathBuf>,
    /// Its route overrides and priority grants (empty without a file).
    pub access_policy: crate::policy::AccessPolicy,
    /// Keystone and berth's credentials there, for `--auth keystone` (`Debug` shows no secret).
    pub keystone: Option<KeystoneSettings>,
    /// The certificate chain and key to serve HTTPS with, both PEM.
    pub tls: Option<TlsFiles>,
    /// The key provider clouds' credentials are sealed with (`[provider_clouds]
    /// credential_key`); without one, berth registers no provider cloud.
    pub credential_key: Option<CredentialKey>,
    /// How often provider clouds are read (`[provider_clouds] sync_interval_seconds`, 30 s by
    /// default).
    pub cloud_sync_interval: Duration,
    /// Where the other replicas reach this one, when given (else the bound address).
    pub advertise_url: Option<url::Url>,
    /// Whether this replica forwards its writes to the one that takes them.
    pub forward_writes: bool,
    /// How long a write batch may wait for writes before it begins.
    pub batch_gather: Duration,
}

/// Whether unreserved consumers are fenced and the preemption notice: flags over
/// `[placement]` over defaults.
fn placement_settings(args: &ServeArgs, placement: PlacementSection) -> (bool, Duration) {
    let fence = args
        .fence_unreserved
        .or(placement.fence_unreserved)
        .unwrap_or(true);
    let notice = args
        .preemption_notice_seconds
        .or(placement.preemption_notice_seconds)
        .unwrap_or(120);
    (fence, Duration::from_secs(notice))
}

/// `text` as an `http` or `https` URL with a host, or `None`.
fn http_url(text: &str) -> Option<url::Url> {
    url::Url::parse(text)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
}

/// `--advertise-url`: an `http` or `https` URL with a host, without credentials, query or
/// fragment.
fn advertise(text: &str) -> anyhow::Result<url::Url> {
    let url = http_url(text).filter(|u| {
        u.query().is_none()
            && u.fragment().is_none()
            && u.username().is_empty()
            && u.password().is_none()
    });
    url.with_context(|| {
        format!(
            "--advertise-url {text:?}: give an http or https URL with a host, without credentials, query or fragment"
        )
    })
}

/// The PEM files HTTPS is served with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the server's first.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// Default listen address.
pub const LISTEN_DEFAULT: &str = "127.0.0.1:8778";
/// Default request body limit (Placement bodies are small; reshaper bodies are the largest).
pub const BODY_LIMIT_BYTES_DEFAULT: usize = 1024 * 1024;
/// Default limit on connections served at once.
pub const MAX_CONNECTIONS_DEFAULT: usize = 1024;
/// Default idle timeout of a connection, in seconds.
pub const IDLE_TIMEOUT_SECONDS_DEFAULT: u64 = 60;
/// Default time a request's headers may take, in seconds.
pub const HEADER_TIMEOUT_SECONDS_DEFAULT: u64 = 10;

impl Config {
    /// Layers flags over the file over defaults, then validates.
    pub fn from_args(args: &ServeArgs) -> anyhow::Result<Config> {
        let file = read_file(args.config.as_deref())?;
        let (listen, placement_listen, auth) = listeners(
            args,
            file.listen,
            file.placement_listen,
            args.auth.or(file.auth),
        )?;
        let data_dir = args
            .data_dir
            .clone()
            .or(file.data_dir)
            .unwrap_or_else(|| PathBuf::from("./berth-data"));
        let storage = match args.database.clone().or(file.database) {
            None => StorageUrl::Sqlite(data_dir.join("berth.db")),
            Some(url) => parse_storage_url(&url)?,
        };
        let tokens = args.tokens.clone().or(file.tokens);
        let trusted_proxies = trusted_proxies(match args.trusted_proxies.is_empty() {
            true => file.trusted_proxies.as_deref().unwrap_or_default(),
            false => &args.trusted_proxies,
        })?;
        let policy_file = args.policy_file.clone().or(file.policy_file);
        let access_policy = access_policy(policy_file.as_deref())?;
        let (fence_unreserved, preemption_notice) =
            placement_settings(args, file.placement.unwrap_or_default());
        let policy = file
            .promise
            .and_then(|p| p.policy)
            .map(PolicySection::policy)
            .transpose()?;
        if auth == AuthMode::Token && tokens.is_none() {
            anyhow::bail!("--auth token needs --tokens FILE");
        }
        let keystone = keystone_settings(auth, file.keystone)?;
        let tls = tls_files(
            args.tls_cert.clone().or(file.tls_cert),
            args.tls_key.clone().or(file.tls_key),
        )?;
        let (callback_ca_file, callback_destinations) =
            notifications(args, file.notifications.unwrap_or_default())?;
        let claim_ttl = claim_ttl(args, file.baremetal)?;
        let idle_release = idle_release(args, file.leases.unwrap_or_default())?;
        let clouds = file.provider_clouds.unwrap_or_default();
        let cloud_sync_interval = clouds.sync_interval()?;
        let (max_connections, idle_timeout, header_timeout) =
            connection_settings(args, file.http.unwrap_or_default())?;
        let advertise_url = args.advertise_url.clone().or(file.advertise_url);
        let cors_allowed_origins = cors_origins(
            &args.cors_allowed_origins,
            file.cors_allowed_origins.as_deref(),
        )?;
        Ok(Config {
            listen,
            placement_listen,
            cors_allowed_origins,
            storage,
            sqlite_synchronous: args
                .sqlite_synchronous
                .or(file.sqlite_synchronous)
                .unwrap_or_default(),
            auth,
            tokens,
            demo: args.demo || file.demo.unwrap_or(false),
            fence_unreserved,
            preemption_notice,
            policy,
            callback_ca_file,
            callback_destinations,
            claim_ttl,
            idle_release,
            clock_offset_seconds: clock_offset(args)?,
            trusted_proxies,
            policy_file,
            access_policy,
            keystone,
            tls,
            cloud_sync_interval,
            credential_key: clouds.key()?,
            advertise_url: advertise_url.as_deref().map(advertise).transpose()?,
            forward_writes: args.forward_writes.or(file.forward_writes).unwrap_or(true),
            batch_gather: batch_gather(args.batch_gather_ms.or(file.batch_gather_ms))?,
            body_limit_bytes: BODY_LIMIT_BYTES_DEFAULT,
            request_timeout: Duration::from_secs(30),
            max_connections,
            idle_timeout,
            header_timeout,
            shutdown_grace: Duration::from_secs(10),
        })
    }

    /// The configuration as TOML-like text, with credentials in database URLs redacted.
    pub fn describe(&self) -> String {
        let storage = match &self.storage {
            StorageUrl::Sqlite(path) => format!("sqlite://{}", path.display()),
            StorageUrl::Postgres(url) => redact_url(url),
        };
        let general = format!(
            "listen = \"{}\"\ndatabase = \"{}\"\nsqlite_synchronous = \"{:?}\"\nauth = \"{:?}\"\ntokens = {:?}\ndemo = {}\nbody_limit_bytes = {}\nrequest_timeout_s = {}\nforward_writes = {}\nbatch_gather_ms = {}\n\n[placement]\nfence_unreserved = {}\npreemption_notice_seconds = {}\n",
            self.listen,
            storage,
            self.sqlite_synchronous,
            self.auth,
            self.tokens,
            self.demo,
            self.body_limit_bytes,
            self.request_timeout.as_secs(),
            self.forward_writes,
            self.batch_gather.as_millis(),
            self.fence_unreserved,
            self.preemption_notice.as_secs()
        )
        .to_lowercase();
        // URLs and paths keep their case.
        let general = match &self.advertise_url {
            Some(url) => general.replacen(
                "\n\n[placement]",
                &format!("\nadvertise_url = {:?}\n\n[placement]", url.as_str()),
                1,
            ),
            None => general,
        };
        let ca_file = match &self.callback_ca_file {
            Some(path) => format!("{:?}", path.display().to_string()),
            None => "none".to_owned(),
        };
        let allow: Vec<String> = self
            .callback_destinations
            .allowed()
            .iter()
            .map(|net| format!("{:?}", net.to_string()))
            .collect();
        let tls = match &self.tls {
            Some(files) => format!(
                "tls_cert = {:?}\ntls_key = {:?}\n",
                files.cert.display().to_string(),
                files.key.display().to_string()
            ),
            None => String::new(),
        };
        let keystone = self
            .keystone
            .as_ref()
            .map(describe_keystone)
            .unwrap_or_default();
        let clouds = match self.credential_key {
            Some(_) => format!(
                "\n[provider_clouds]\ncredential_key = \"***\"\nsync_interval_seconds = {}\n",
                self.cloud_sync_interval.as_secs()
            ),
            None => String::new(),
        };
        let leases = match self.idle_release {
            Some((after, notice)) => format!(
                "\n[leases]\nrelease_unconsumed_after_seconds = {}\nrelease_notice_seconds = {}\n",
                after.as_secs(),
                notice.as_secs()
            ),
            None => String::new(),
        };
        format!(
            "{general}{tls}\n[notifications]\ncallback_ca_file = {ca_file}\ncallback_allow = [{}]\n\n[baremetal]\nclaim_ttl_seconds = {}\n{leases}\n[http]\nmax_connections = {}\nidle_timeout_seconds = {}\nheader_timeout_seconds = {}\n{keystone}{clouds}",
            allow.join(", "),
            self.claim_ttl.as_secs(),
            self.max_connections,
            self.idle_timeout.as_secs(),
            self.header_timeout.as_secs()
        )
    }
}

/// Longest clock offset `--clock-offset-seconds` takes, either way: a day.
const CLOCK_OFFSET_MAX_SECONDS: i64 = 86_400;

fn clock_offset(args: &ServeArgs) -> anyhow::Result<i64> {
    let offset = args.clock_offset_seconds.unwrap_or(0);
    if offset.abs() > CLOCK_OFFSET_MAX_SECONDS {
        anyhow::bail!(
            "--clock-offset-seconds {offset}: at most {CLOCK_OFFSET_MAX_SECONDS} seconds either way"
        );
    }
    Ok(offset)
}

/// How long a node claim holds without a `ttl`: the flag's, else the file's, else the default.
/// Longest delay `release_unconsumed_after_seconds` takes: a year.
const IDLE_RELEASE_MAX_SECONDS: u64 = 365 * 86_400;
/// The release notice when none is given: an hour, or the whole delay when it is shorter.
const IDLE_NOTICE_DEFAULT_SECONDS: u64 = 3_600;

/// The release of unconsumed leases: flags over `[leases]`; off unless a delay is given, from 1
/// second to a year, with a notice no longer than the delay.
fn idle_release(
    args: &ServeArgs,
    section: LeasesSection,
) -> anyhow::Result<Option<(Duration, Duration)>> {
    let after = args
        .release_unconsumed_after_seconds
        .or(section.release_unconsumed_after_seconds);
    let notice = args
        .release_notice_seconds
        .or(section.release_notice_seconds);
    let Some(after) = after else {
        anyhow::ensure!(
            notice.is_none(),
            "release_notice_seconds needs release_unconsumed_after_seconds"
        );
        return Ok(None);
    };
    anyhow::ensure!(
        (1..=IDLE_RELEASE_MAX_SECONDS).contains(&after),
        "release_unconsumed_after_seconds = {after}: from 1 to {IDLE_RELEASE_MAX_SECONDS}"
    );
    let notice = notice.unwrap_or(IDLE_NOTICE_DEFAULT_SECONDS.min(after));
    anyhow::ensure!(
        notice <= after,
        "release_notice_seconds = {notice}: at most release_unconsumed_after_seconds ({after})"
    );
    Ok(Some((
        Duration::from_secs(after),
        Duration::from_secs(notice),
    )))
}

/// A write batch's gather: `--batch-gather-ms` over the file over [`BATCH_GATHER_DEFAULT`],
/// at most [`BATCH_GATHER_MAX`].
fn batch_gather(ms: Option<u64>) -> anyhow::Result<Duration> {
    let gather = ms.map_or(BATCH_GATHER_DEFAULT, Duration::from_millis);
    anyhow::ensure!(
        gather <= BATCH_GATHER_MAX,
        "--batch-gather-ms must be at most {} (a write may wait that long)",
        BATCH_GATHER_MAX.as_millis()
    );
    Ok(gather)
}

/// How long a write batch may wait for writes before it begins, unless configured.
pub const BATCH_GATHER_DEFAULT: Duration = Duration::from_millis(2);
/// The longest gather that may be configured.
pub const BATCH_GATHER_MAX: Duration = Duration::from_millis(100);

fn claim_ttl(args: &ServeArgs, section: Option<BaremetalSection>) -> anyhow::Result<Duration> {
    let claim_ttl = args
        .claim_ttl_seconds
        .or(section.and_then(|b| b.claim_ttl_seconds))
        .map_or(berth_app::CLAIM_TTL_DEFAULT, Duration::from_secs);
    anyhow::ensure!(
        (1..=7 * 24 * 3600).contains(&claim_ttl.as_secs()),
        "--claim-ttl-seconds must be between 1 and 604800"
    );
    Ok(claim_ttl)
}

/// The Keystone settings `--auth keystone` needs, from the `[keystone]` section.
fn keystone_settings(
    auth: AuthMode,
    section: Option<KeystoneSection>,
) -> anyhow::Result<Option<KeystoneSettings>> {
    match (auth, section) {
        (AuthMode::Keystone, Some(section)) => section.settings().map(Some),
        (AuthMode::Keystone, None) => anyhow::bail!(
            "--auth keystone needs a [keystone] section in the --config file (auth_url and berth's credentials)"
        ),
        (_, _) => Ok(None),
    }
}

/// The certificate and key of `--tls-cert` and `--tls-key`: both or neither.
fn tls_files(cert: Option<PathBuf>, key: Option<PathBuf>) -> anyhow::Result<Option<TlsFiles>> {
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert, key })),
        (None, None) => Ok(None),
        _ => anyhow::bail!("--tls-cert and --tls-key go together"),
    }
}

/// The `[keystone]` section as the configuration says it, secrets redacted.
fn describe_keystone(settings: &KeystoneSettings) -> String {
    let domain = |what: &str, domain: &DomainRef| match domain {
        DomainRef::Id(id) => format!("{what}_domain_id = {id:?}\n"),
        DomainRef::Name(name) => format!("{what}_domain_name = {name:?}\n"),
    };
    let credentials = match &settings.credentials {
        Credentials::Password {
            username,
            user_domain,
            project_name,
            project_domain,
            ..
        } => format!(
            "username = {username:?}\npassword = \"***\"\n{}project_name = {project_name:?}\n{}",
            domain("user", user_domain),
            domain("project", project_domain)
        ),
        Credentials::ApplicationCredential { id, .. } => {
            format!("application_credential_id = {id:?}\napplication_credential_secret = \"***\"\n")
        }
    };
    format!(
        "\n[keystone]\nauth_url = {:?}\nwww_authenticate_uri = {:?}\n{credentials}cache_seconds = {}\ncache_entries = {}\ntimeout_seconds = {}\nservice_token_roles = {:?}\n",
        settings.auth_url,
        settings.www_authenticate_uri,
        settings.cache_bound.as_secs(),
        settings.cache_entries,
        settings.timeout.as_secs(),
        settings.service_token_roles
    )
}

/// The TOML file, or nothing.
fn read_file(path: Option<&std::path::Path>) -> anyhow::Result<FileConfig> {
    let Some(path) = path else {
        return Ok(FileConfig::default());
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str::<FileConfig>(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Where berth listens, where Placement is also served at the root, and the authentication
/// mode, checked against both.
fn listeners(
    args: &ServeArgs,
    listen: Option<String>,
    placement_listen: Option<String>,
    auth: Option<AuthMode>,
) -> anyhow::Result<(SocketAddr, Option<SocketAddr>, AuthMode)> {
    let listen_text = args
        .listen
        .clone()
        .or(listen)
        .unwrap_or_else(|| LISTEN_DEFAULT.to_owned());
    let listen = address("--listen", &listen_text)?;
    let placement_listen = args
        .placement_listen
        .clone()
        .or(placement_listen)
        .map(|text| address("--placement-listen", &text))
        .transpose()?;
    let auth = auth_mode(auth, listen)?;
    if let Some(address) = placement_listen {
        auth_mode(Some(auth), address)?;
    }
    Ok((listen, placement_listen, auth))
}

/// The origins CORS admits (the flags', else the file's): each `scheme://host[:port]`, nothing
/// more.
fn cors_origins(
    flags: &[String],
    file: Option<&[String]>,
) -> anyhow::Result<Vec<axum::http::HeaderValue>> {
    let items = match flags.is_empty() {
        true => file.unwrap_or_default(),
        false => flags,
    };
    items
        .iter()
        .map(|item| {
            let origin = item.trim();
            let url = url::Url::parse(origin)
                .ok()
                .filter(|url| url.path() == "/" && url.query().is_none() && url.has_host())
                .filter(|_| !origin.ends_with('/'));
            match url {
                Some(_) => axum::http::HeaderValue::from_str(origin)
                    .with_context(|| format!("--cors-allowed-origin {origin:?}")),
                None => anyhow::bail!(
                    "--cors-allowed-origin {origin:?} is not an origin like https://dashboard.example.com"
                ),
            }
        })
        .collect()
}

/// The address a listen flag names.
fn address(flag: &str, text: &str) -> anyhow::Result<SocketAddr> {
    text.parse()
        .with_context(|| format!("{flag} {text:?} is not an address like 127.0.0.1:8778"))
}

/// The authentication mode: `noauth` by default on loopback only, and only there.
fn auth_mode(mode: Option<AuthMode>, listen: SocketAddr) -> anyhow::Result<AuthMode> {
    let auth = match mode {
        Some(mode) => mode,
        None if listen.ip().is_loopback() => AuthMode::Noauth,
        None => anyhow::bail!(
            "refusing to listen on {listen} without authentication: set --auth token, --auth headers or --auth keystone (noauth is only the default on loopback)"
        ),
    };
    if auth.trusts_anyone() && !listen.ip().is_loopback() {
        anyhow::bail!(
            "refusing to listen on {listen} with --auth {}: it is only allowed on a loopback address",
            auth.name()
        );
    }
    Ok(auth)
}

/// The ranges `--auth headers` trusts: loopback unless some are given.
fn trusted_proxies(items: &[String]) -> anyhow::Result<Vec<ipnet::IpNet>> {
    let nets = destination::parse_ranges(items, "--trusted-proxy").map_err(anyhow::Error::msg)?;
    match nets.is_empty() {
        true => Ok(vec![
            "127.0.0.0/8".parse().expect("invariant: a CIDR"),
            "::1/128".parse().expect("invariant: a CIDR"),
        ]),
        false => Ok(nets),
    }
}

/// The authorization policy of the file, or the defaults without one.
fn access_policy(path: Option<&std::path::Path>) -> anyhow::Result<crate::policy::AccessPolicy> {
    path.map_or_else(
        || Ok(crate::policy::AccessPolicy::default()),
        crate::policy::AccessPolicy::load,
    )
}

/// The connection limit and the idle and header timeouts, flags over `[http]` over defaults.
fn connection_settings(
    args: &ServeArgs,
    http: HttpSection,
) -> anyhow::Result<(usize, Duration, Duration)> {
    let max_connections = args
        .max_connections
        .or(http.max_connections)
        .unwrap_or(MAX_CONNECTIONS_DEFAULT);
    anyhow::ensure!(
        (1..=1_000_000).contains(&max_connections),
        "--max-connections must be between 1 and 1000000"
    );
    let idle_timeout_seconds = args
        .idle_timeout_seconds
        .or(http.idle_timeout_seconds)
        .unwrap_or(IDLE_TIMEOUT_SECONDS_DEFAULT);
    anyhow::ensure!(
        (1..=3600).contains(&idle_timeout_seconds),
        "--idle-timeout-seconds must be between 1 and 3600"
    );
    let header_timeout_seconds = args
        .header_timeout_seconds
        .or(http.header_timeout_seconds)
        .unwrap_or(HEADER_TIMEOUT_SECONDS_DEFAULT);
    anyhow::ensure!(
        (1..=3600).contains(&header_timeout_seconds),
        "--header-timeout-seconds must be between 1 and 3600"
    );
    Ok((
        max_connections,
        Duration::from_secs(idle_timeout_seconds),
        Duration::from_secs(header_timeout_seconds),
    ))
}

/// The callback CA file (checked to hold a certificate) and the destination policy, from the
/// flags over `[notifications]`; a flag's allow-list replaces the file's.
fn notifications(
    args: &ServeArgs,
    file: NotificationsSection,
) -> anyhow::Result<(Option<PathBuf>, Destinations)> {
    let ca_file = args.callback_ca_file.clone().or(file.callback_ca_file);
    if let Some(path) = &ca_file {
        crate::notifier::ca_certificates(path)?;
    }
    let allow = match args.callback_allow.is_empty() {
        true => file.callback_allow.unwrap_or_default(),
        false => args.callback_allow.clone(),
    };
    let allow = destination::parse_allow(&allow).map_err(anyhow::Error::msg)?;
    Ok((ca_file, Destinations::new(allow)))
}

fn parse_storage_url(url: &str) -> anyhow::Result<StorageUrl> {
    if let Some(path) = url.strip_prefix("sqlite://") {
        anyhow::ensure!(!path.is_empty(), "--database sqlite:// needs a file path");
        return Ok(StorageUrl::Sqlite(PathBuf::from(path)));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(StorageUrl::Postgres(url.to_owned()));
    }
    anyhow::bail!("--database must start with sqlite:// or postgres://")
}

fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}://***{}", &url[..scheme_end], &url[at..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noauth_is_refused_off_loopback() {
        let args = ServeArgs {
            listen: Some("0.0.0.0:8778".into()),
            ..ServeArgs::default()
        };
        let error = Config::from_args(&args).expect_err("refused").to_string();
        assert!(error.contains("without authentication"), "{error}");
        let args = ServeArgs {
            listen: Some("0.0.0.0:8778".into()),
            auth: Some(AuthMode::Noauth),
            ..ServeArgs::default()
        };
        assert!(Config::from_args(&args).is_err());
        let args = ServeArgs {
            listen: Some("127.0.0.1:8778".into()),
            placement_listen: Some("0.0.0.0:8779".into()),
            auth: Some(AuthMode::Noauth2),
            ..ServeArgs::default()
        };
        let error = Config::from_args(&args).expect_err("refused").to_string();
        assert!(
            error.contains("0.0.0.0:8779") && error.contains("noauth2"),
            "{error}"
        );
        let args = ServeArgs {
            listen: Some("0.0.0.0:8778".into()),
            auth: Some(AuthMode::Headers),
            ..ServeArgs::default()
        };
        assert_eq!(
            Config::from_args(&args).expect("accepted").auth,
            AuthMode::Headers
        );
    }

    #[test]
    fn the_credential_key_is_64_hex_digits_and_never_shown() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("berth.toml");
        let args = ServeArgs {
            config: Some(file.clone()),
            ..ServeArgs::default()
        };
        std::fs::write(&file, "[provider_clouds]\ncredential_key = \"abcd\"\n").expect("write");
        let error = Config::from_args(&args).expect_err("short").to_string();
        assert!(error.contains("credential_key"), "{error}");
        let key = "0123456789abcdef".repeat(4);
        std::fs::write(
            &file,
            format!("[provider_clouds]\ncredential_key = \"{key}\"\n"),
        )
        .expect("write");
        let config = Config::from_args(&args).expect("a key");
        assert!(config.credential_key.is_some());
        let described = config.describe();
        assert!(described.contains("[provider_clouds]"), "{described}");
        assert!(!described.contains(&key), "{described}");
        assert!(!format!("{config:?}").contains(&key));
    }

    #[test]
    fn keystone_mode_reads_its_section_and_never_shows_the_secrets() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("berth.toml");
        let args = ServeArgs {
            config: Some(file.clone()),
            listen: Some("0.0.0.0:8778".into()),
            ..ServeArgs::default()
        };
        std::fs::write(&file, "auth = \"keystone\"\n").expect("write");
        let error = Config::from_args(&args)
            .expect_err("no section")
            .to_string();
        assert!(error.contains("[keystone]"), "{error}");
        std::fs::write(
            &file,
            "auth = \"keystone\"\n[keystone]\nauth_url = \"http://keystone:5000/v3\"\nusername = \"berth\"\npassword = \"hunter2\"\nproject_name = \"service\"\nuser_domain_name = \"Default\"\ncache_seconds = 2\n",
        )
        .expect("write");
        let config = Config::from_args(&args).expect("keystone");
        assert_eq!(config.auth, AuthMode::Keystone);
        let settings = config.keystone.as_ref().expect("settings");
        assert_eq!(settings.cache_bound, Duration::from_secs(2));
        assert_eq!(
            settings.timeout,
            Duration::from_secs(keystone::TIMEOUT_SECONDS_DEFAULT)
        );
        assert_eq!(settings.www_authenticate_uri, "http://keystone:5000/v3");
        assert_eq!(settings.service_token_roles, ["service"]);
        assert!(matches!(
            &settings.credentials,
            Credentials::Password { user_domain: DomainRef::Name(name), project_domain: DomainRef::Id(id), .. }
                if name == "Default" && id == "default"
        ));
        for shown in [format!("{config:?}"), config.describe()] {
            assert!(!shown.contains("hunter2"), "{shown}");
        }
        assert!(
            config
                .describe()
                .contains("[keystone]\nauth_url = \"http://keystone:5000/v3\"")
        );
        std::fs::write(
            &file,
            "auth = \"keystone\"\n[keystone]\nauth_url = \"http://keystone:5000/v3\"\napplication_credential_id = \"ac\"\napplication_credential_secret = \"s3cret\"\n",
        )
        .expect("write");
        let config = Config::from_args(&args).expect("application credential");
        assert!(!format!("{config:?}{}", config.describe()).contains("s3cret"));
        for bad in [
            "[keystone]\nauth_url = \"http://k/v3\"\nusername = \"u\"\n",
            "[keystone]\nauth_url = \"http://k/v3\"\nusername = \"u\"\npassword = \"p\"\n",
            "[keystone]\nauth_url = \"keystone\"\napplication_credential_id = \"a\"\napplication_credential_secret = \"s\"\n",
            "[keystone]\nauth_url = \"http://k/v3\"\napplication_credential_id = \"a\"\napplication_credential_secret = \"s\"\ntimeout_seconds = 0\n",
            "[keystone]\nauth_url = \"http://k/v3\"\napplication_credential_id = \"a\"\napplication_credential_secret = \"s\"\nusername = \"u\"\npassword = \"p\"\nproject_name = \"s\"\n",
        ] {
            std::fs::write(&file, format!("auth = \"keystone\"\n{bad}")).expect("write");
            assert!(Config::from_args(&args).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_tls_certificate_and_key_go_together() {
        let args = ServeArgs {
            tls_cert: Some("cert.pem".into()),
            ..ServeArgs::default()
        };
        assert!(Config::from_args(&args).is_err());
        let args = ServeArgs {
            tls_key: Some("key.pem".into()),
            ..args
        };
        let config = Config::from_args(&args).expect("both");
        assert_eq!(
            config.tls,
            Some(TlsFiles {
                cert: "cert.pem".into(),
                key: "key.pem".into()
            })
        );
        assert!(config.describe().contains("tls_cert = \"cert.pem\""));
        assert_eq!(
            Config::from_args(&ServeArgs::default()).expect("none").tls,
            None
        );
    }

    #[test]
    fn the_claim_ttl_comes_from_the_flag_or_the_file_within_bounds() {
        let config = Config::from_args(&ServeArgs::default()).expect("defaults");
        assert_eq!(config.claim_ttl, berth_app::CLAIM_TTL_DEFAULT);
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("berth.toml");
        std::fs::write(&file, "[baremetal]\nclaim_ttl_seconds = 90\n").expect("write");
        let from_file = ServeArgs {
            config: Some(file.clone()),
            ..ServeArgs::default()
        };
        let config = Config::from_args(&from_file).expect("file");
        assert_eq!(config.claim_ttl, Duration::from_secs(90));
        assert!(config.describe().contains("claim_ttl_seconds = 90"));
        let flag = ServeArgs {
            config: Some(file),
            claim_ttl_seconds: Some(30),
            ..ServeArgs::default()
        };
        assert_eq!(
            Config::from_args(&flag).expect("flag").claim_ttl.as_secs(),
            30
        );
        for bad in [0, 7 * 24 * 3600 + 1] {
            let args = ServeArgs {
                claim_ttl_seconds: Some(bad),
                ..ServeArgs::default()
            };
            assert!(Config::from_args(&args).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_batch_gather_comes_from_the_flag_or_the_file_within_bounds() {
        let config = Config::from_args(&ServeArgs::default()).expect("defaults");
        assert_eq!(config.batch_gather, BATCH_GATHER_DEFAULT);
        assert!(config.describe().contains("batch_gather_ms = 2\n"));
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("berth.toml");
        std::fs::write(&file, "batch_gather_ms = 0\n").expect("write");
        let from_file = ServeArgs {
            config: Some(file.clone()),
            ..ServeArgs::default()
        };
        let config = Config::from_args(&from_file).expect("file");
        assert_eq!(config.batch_gather, Duration::ZERO);
        let flag = ServeArgs {
            config: Some(file),
            batch_gather_ms: Some(100),
            ..ServeArgs::default()
        };
        assert_eq!(
            Config::from_args(&flag).expect("flag").batch_gather,
            BATCH_GATHER_MAX
        );
        let too_long = ServeArgs {
            batch_gather_ms: Some(101),
            ..ServeArgs::default()
        };
        let refused = Config::from_args(&too_long).expect_err("over the bound");
        assert!(
            refused.to_string().contains("--batch-gather-ms"),
            "{refused}"
        );
    }

    #[test]
    fn the_release_of_unconsumed_leases_is_off_unless_a_delay_is_given_within_bounds() {
        let config = Config::from_args(&ServeArgs::default()).expect("defaults");
        assert_eq!(config.idle_release, None);
        assert!(!config.describe().contains("[leases]"));
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("berth.toml");
        std::fs::write(&file, "[leases]\nrelease_unconsumed_after_seconds = 7200\n")
            .expect("write");
        let from_file = ServeArgs {
            config: Some(file.clone()),
            ..ServeArgs::default()
        };
        let config = Config::from_args(&from_file).expect("file");
        let hours = |n: u64| Duration::from_secs(n * 3600);
        assert_eq!(config.idle_release, Some((hours(2), hours(1))));
        assert!(config.describe().contains("release_notice_seconds = 3600"));
        let flags = ServeArgs {
            config: Some(file),
            release_unconsumed_after_seconds: Some(600),
            release_notice_seconds: Some(60),
            ..ServeArgs::default()
        };
        let config = Config::from_args(&flags).expect("flags");
        assert_eq!(
            config.idle_release,
            Some((Duration::from_secs(600), Duration::from_secs(60)))
        );
        // A short delay is noticed from the start, unless the notice is given.
        let short = ServeArgs {
            release_unconsumed_after_seconds: Some(30),
            ..ServeArgs::default()
        };
        let config = Config::from_args(&short).expect("short");
        assert_eq!(
            config.idle_release,
            Some((Duration::from_secs(30), Duration::from_secs(30)))
        );
        for (after, notice) in [
            (Some(0), None),
            (Some(365 * 86_400 + 1), None),
            (Some(60), Some(61)),
            (None, Some(60)),
        ] {
            let args = ServeArgs {
                release_unconsumed_after_seconds: after,
                release_notice_seconds: notice,
                ..ServeArgs::default()
            };
            assert!(Config::from_args(&args).is_err(), "{after:?} {notice:?}");
        }
    }

    #[test]
    fn connection_limits_come_from_the_flags_or_the_http_section() {
        let config = Config::from_args(&ServeArgs::default()).expect("defaults");
        assert_eq!(config.max_connections, MAX_CONNECTIONS_DEFAULT);
        assert_eq!(
            config.idle_timeout,
            Duration::from_secs(IDLE_TIMEOUT_SECONDS_DEFAULT)
        );
        assert_eq!(
            config.header_timeout,
            Duration::from_secs(HEADER_TIMEOUT_SECONDS_DEFAULT)
        );
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("berth.toml");
        std::fs::write(
            &file,
            "[http]\nmax_connections = 8\nidle_timeout_seconds = 5\nheader_timeout_seconds = 2\n",
        )
        .expect("write");
        let from_file = ServeArgs {
            config: Some(file),
            ..ServeArgs::default()
        };
        let config = Config::from_args(&from_file).expect("file");
        assert_eq!(config.max_connections, 8);
        assert_eq!(config.idle_timeout, Duration::from_secs(5));
        assert_eq!(config.header_timeout, Duration::from_secs(2));
        assert!(
            config.describe().contains(
                "[http]\nmax_connections = 8\nidle_timeout_seconds = 5\nheader_timeout_seconds = 2\n"
            ),
            "{}",
            config.describe()
        );
        let flags = ServeArgs {
            max_connections: Some(3),
            idle_timeout_seconds: Some(7),
            header_timeout_seconds: Some(4),
            ..from_file
        };
        let config = Config::from_args(&flags).expect("flags");
        assert_eq!(
            (
                config.max_connections,
                config.idle_timeout.as_secs(),
                config.header_timeout.as_secs()
            ),
            (3, 7, 4),
            "flags beat the file"
        );
        for bad in [
            ServeArgs {
                max_connections: Some(0),
                ..ServeArgs::default()
            },
            ServeArgs {
                idle_timeout_seconds: Some(0),
                ..ServeArgs::default()
            },
            ServeArgs {
                header_timeout_seconds: Some(0),
                ..ServeArgs::default()
            },
        ] {
            assert!(Config::from_args(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn defaults_and_file_layering() {
        let config = Config::from_args(&ServeArgs::default()).expect("defaults");
        assert_eq!(config.listen.to_string(), LISTEN_DEFAULT);
        assert_eq!(config.auth, AuthMode::Noauth);
        assert_eq!(
            config.storage,
            StorageUrl::Sqlite(PathBuf::from("./berth-data/berth.db"))
        );
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("berth.toml");
        std::fs::write(&file, "listen = \"127.0.0.1:9999\"\ndatabase = \"postgres://u:secret@db/berth\"\ndemo = true\n")
            .expect("write");
        let args = ServeArgs {
            config: Some(file.clone()),
            listen: Some("127.0.0.1:7777".into()),
            ..ServeArgs::default()
        };
        let config = Config::from_args(&args).expect("layered");
        assert_eq!(config.listen.port(), 7777, "a flag beats the file");
        assert!(config.demo);
        assert!(
            !config.describe().contains("secret"),
            "credentials are redacted"
        );
        std::fs::write(&file, "listen = \"127.0.0.1:9999\"\nbogus = 1\n").expect("write");
        let args = ServeArgs {
            config: Some(file),
            ..ServeArgs::default()
        };
        assert!(
            Config::from_args(&args).is_err(),
            "unknown keys are refused"
        );
    }

    #[test]
    fn the_callback_ca_file_must_hold_a_certificate() {
        let dir = tempfile::tempdir().expect("dir");
        let ca = dir.path().join("ca.pem");
        let with_flag = |path: &std::path::Path| ServeArgs {
            callback_ca_file: Some(path.to_owned()),
            ..ServeArgs::default()
        };
        let error = format!(
            "{:#}",
            Config::from_args(&with_flag(&ca)).expect_err("unreadable")
        );
        assert!(error.contains("reading the callback CA file"), "{error}");
        let key = rcgen::KeyPair::generate().expect("key");
        for bad in ["not a certificate\n".to_owned(), key.serialize_pem()] {
            std::fs::write(&ca, bad).expect("write");
            let error = format!(
                "{:#}",
                Config::from_args(&with_flag(&ca)).expect_err("no certificate")
            );
            assert!(error.contains("holds no PEM certificate"), "{error}");
        }
        let certified =
            rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
        std::fs::write(&ca, certified.cert.pem()).expect("write");
        let config = Config::from_args(&with_flag(&ca)).expect("accepted");
        assert_eq!(config.callback_ca_file.as_deref(), Some(ca.as_path()));
        assert!(
            config.describe().contains(&format!(
                "[notifications]\ncallback_ca_file = {:?}",
                ca.display().to_string()
            )),
            "{}",
            config.describe()
        );
        // The file's `[notifications]` key, under the flag.
        let file = dir.path().join("berth.toml");
        std::fs::write(
            &file,
            format!(
                "[notifications]\ncallback_ca_file = {:?}\n",
                ca.display().to_string()
            ),
        )
        .expect("write");
        let from_file = ServeArgs {
            config: Some(file.clone()),
            ..ServeArgs::default()
        };
        let config = Config::from_args(&from_file).expect("from the file");
        assert_eq!(config.callback_ca_file.as_deref(), Some(ca.as_path()));
        let missing = dir.path().join("missing.pem");
        let flag_wins = ServeArgs {
            callback_ca_file: Some(missing),
            ..from_file
        };
        let error = format!(
            "{:#}",
            Config::from_args(&flag_wins).expect_err("the flag beats the file")
        );
        assert!(error.contains("missing.pem"), "{error}");
        assert_eq!(
            Config::from_args(&ServeArgs::default())
                .expect("defaults")
                .callback_ca_file,
            None
        );
    }

    #[test]
    fn the_callback_allow_list_comes_from_the_flag_or_the_file() {
        let loopback = "127.0.0.1".parse().expect("ip");
        let config = Config::from_args(&ServeArgs::default()).expect("defaults");
        assert!(config.callback_destinations.check(loopback).is_err());
        assert!(
            config.describe().contains("callback_allow = []\n"),
            "{}",
            config.describe()
        );
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("berth.toml");
        std::fs::write(
            &file,
            "[notifications]\ncallback_allow = [\"127.0.0.0/8\", \"10.1.0.0/16\"]\n",
        )
        .expect("write");
        let from_file = ServeArgs {
            config: Some(file.clone()),
            ..ServeArgs::default()
        };
        let config = Config::from_args(&from_file).expect("file");
        assert!(config.callback_destinations.check(loopback).is_ok());
        assert!(
            config
                .describe()
                .contains("callback_allow = [\"127.0.0.0/8\", \"10.1.0.0/16\"]\n"),
            "{}",
            config.describe()
        );
        // Flags (repeated or comma-separated) replace the file's list.
        let cli = Cli::try_parse_from([
            "berth",
            "serve",
            "--callback-allow",
            "192.168.0.0/16,fd00::/8",
            "--callback-allow",
            "169.254.169.254",
        ])
        .expect("parsed");
        let Command::Serve(mut args) = cli.command else {
            panic!("serve")
        };
        assert_eq!(args.callback_allow.len(), 3, "{:?}", args.callback_allow);
        args.config = Some(file);
        let config = Config::from_args(&args).expect("flags");
        assert!(config.callback_destinations.check(loopback).is_err());
        for allowed in ["192.168.4.4", "fd00::1", "169.254.169.254"] {
            let ip = allowed.parse().expect("ip");
            assert!(config.callback_destinations.check(ip).is_ok(), "{allowed}");
        }
        let bad = ServeArgs {
            callback_allow: vec!["10.0.0.0/40".into()],
            ..ServeArgs::default()
        };
        let error = Config::from_args(&bad).expect_err("bad range").to_string();
        assert!(
            error.contains("--callback-allow \"10.0.0.0/40\""),
            "{error}"
        );
    }

    #[test]
    fn a_clock_offset_moves_the_clock_by_at_most_a_day() {
        use berth_app::Clock as _;
        let config = Config::from_args(&ServeArgs::default()).expect("defaults");
        assert_eq!(config.clock_offset_seconds, 0);
        let behind = Cli::try_parse_from(["berth", "serve", "--clock-offset-seconds", "-90"])
            .expect("a negative offset parses");
        let Command::Serve(args) = behind.command else {
            panic!("serve");
        };
        let config = Config::from_args(&args).expect("within a day");
        assert_eq!(config.clock_offset_seconds, -90);
        let moved = crate::clock::OffsetClock {
            offset_micros: -90_000_000,
        };
        // Read the moved clock first: the system clock, read after it, is then no earlier.
        let early = moved.now().as_micros();
        let skew = crate::clock::SystemClock.now().as_micros() - early;
        assert!((90_000_000..91_000_000).contains(&skew), "{skew}");
        let too_far = ServeArgs {
            clock_offset_seconds: Some(86_401),
            ..ServeArgs::default()
        };
        let refused = Config::from_args(&too_far).expect_err("over a day");
        assert!(
            refused.to_string().contains("--clock-offset-seconds"),
            "{refused}"
        );
    }

    #[test]
    fn writes_are_forwarded_by_default_to_an_advertised_http_url() {
        let config = Config::from_args(&ServeArgs::default()).expect("defaults");
        assert!(config.forward_writes);
        assert_eq!(config.advertise_url, None);
        let cli = Cli::try_parse_from([
            "berth",
            "serve",
            "--advertise-url",
            "https://berth-2.example.net:8778/",
            "--forward-writes",
            "false",
        ])
        .expect("parses");
        let Command::Serve(args) = cli.command else {
            panic!("serve");
        };
        let config = Config::from_args(&args).expect("valid");
        assert!(!config.forward_writes);
        let described = config.describe();
        assert!(
            described.contains("advertise_url = \"https://berth-2.example.net:8778/\"")
                && described.contains("forward_writes = false"),
            "{described}"
        );
        for refused in [
            "ftp://berth-2:8778",
            "http://user:pw@berth-2:8778",
            "http://berth-2:8778/?x=1",
            "http://berth-2:8778/#top",
            "berth-2:8778",
            "/relative",
        ] {
            let args = ServeArgs {
                advertise_url: Some(refused.to_owned()),
                ..ServeArgs::default()
            };
            let error = Config::from_args(&args).expect_err(refused);
            assert!(
                error.to_string().contains("--advertise-url"),
                "{refused}: {error}"
            );
        }
    }

    #[test]
    fn the_sqlite_synchronous_setting_comes_from_the_flag_or_the_file() {
        let config = Config::from_args(&ServeArgs::default()).expect("defaults");
        assert_eq!(config.sqlite_synchronous, SqliteSynchronous::Normal);
        assert!(
            config
                .describe()
                .contains("sqlite_synchronous = \"normal\"")
        );
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("berth.toml");
        std::fs::write(&file, "sqlite_synchronous = \"full\"\n").expect("write");
        let from_file = ServeArgs {
            config: Some(file.clone()),
            ..ServeArgs::default()
        };
        let config = Config::from_args(&from_file).expect("file");
        assert_eq!(config.sqlite_synchronous, SqliteSynchronous::Full);
        assert_eq!(
            config.sqlite_synchronous.store(),
            berth_store_sqlite::Synchronous::Full
        );
        assert!(config.describe().contains("sqlite_synchronous = \"full\""));
        let cli = Cli::try_parse_from([
            "berth",
            "serve",
            "--config",
            &file.display().to_string(),
            "--sqlite-synchronous",
            "normal",
        ])
        .expect("parsed");
        let Command::Serve(args) = cli.command else {
            panic!("serve")
        };
        assert_eq!(
            Config::from_args(&args).expect("flag").sqlite_synchronous,
            SqliteSynchronous::Normal,
            "the flag beats the file"
        );
        assert!(
            Cli::try_parse_from(["berth", "serve", "--sqlite-synchronous", "extra"]).is_err(),
            "only normal, full and off"
        );
        std::fs::write(&file, "sqlite_synchronous = \"extra\"\n").expect("write");
        assert!(Config::from_args(&from_file).is_err());
        // `off`, the power-cut campaign's negative control, is a setting like the others.
        std::fs::write(&file, "sqlite_synchronous = \"off\"\n").expect("write");
        assert_eq!(
            Config::from_args(&from_file)
                .expect("off")
                .sqlite_synchronous,
            SqliteSynchronous::Off
        );
    }

    #[test]
    fn the_reservation_policy_comes_from_the_file() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("berth.toml");
        let args = ServeArgs {
            config: Some(file.clone()),
            ..ServeArgs::default()
        };
        assert_eq!(
            Config::from_args(&ServeArgs::default())
                .expect("defaults")
                .policy,
            None
        );
        std::fs::write(
            &file,
            "[promise.policy]\nmax-future-start-range = 30\nmax-duration = 48\nexpiry = 15\npreemption = false\n",
        )
        .expect("write");
        let policy = Config::from_args(&args)
            .expect("policy")
            .policy
            .expect("set");
        assert_eq!(policy.max_future_start_days, Some(30));
        assert_eq!(policy.max_future_end_days, None);
        assert_eq!(policy.max_duration_hours, Some(48));
        assert_eq!(policy.expiry_minutes, Some(15));
        assert!(!policy.preemption);
        for bad in [
            "[promise.policy]\nmax-future-end-range = 400\n",
            "[promise.policy]\nmax-duration = 0\n",
            "[promise.policy]\nmax_duration = 10\n",
        ] {
            std::fs::write(&file, bad).expect("write");
            assert!(Config::from_args(&args).is_err(), "{bad}");
        }
    }
}
