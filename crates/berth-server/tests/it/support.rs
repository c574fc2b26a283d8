//! `TestApp`: a berth server on 127.0.0.1 port 0 over a fresh database, with typed helpers.

use berth_server::auth::AuthMode;
use berth_server::config::{Config, ServeArgs};
use reqwest::{Method, Response, StatusCode};
use serde_json::Value;
use std::path::PathBuf;

/// A running server and a client for it.
pub(crate) struct TestApp {
    pub(crate) base: String,
    pub(crate) client: reqwest::Client,
    running: Option<berth_server::Running>,
    _dir: Option<tempfile::TempDir>,
    pub(crate) database: String,
}

/// How to start a server.
#[derive(Default)]
pub(crate) struct Options {
    pub(crate) database: Option<String>,
    pub(crate) auth: Option<AuthMode>,
    pub(crate) tokens: Option<PathBuf>,
    pub(crate) demo: bool,
    /// `--fence-unreserved`; `None` keeps the default (enforced).
    pub(crate) fence_unreserved: Option<bool>,
    /// `--callback-ca-file`: extra CA certificates trusted for `https` callbacks.
    pub(crate) callback_ca_file: Option<PathBuf>,
    /// `--policy`: the authorization policy file.
    pub(crate) policy: Option<PathBuf>,
    /// `--trusted-proxy`: peers whose identity headers `headers` mode believes.
    pub(crate) trusted_proxies: Vec<String>,
    /// `--max-connections`.
    pub(crate) max_connections: Option<usize>,
    /// `--idle-timeout-seconds`.
    pub(crate) idle_timeout_seconds: Option<u64>,
    /// `--header-timeout-seconds`.
    pub(crate) header_timeout_seconds: Option<u64>,
    /// The request timeout (30 s unless set).
    pub(crate) request_timeout: Option<std::time::Duration>,
    /// `--callback-allow`: address ranges callbacks may reach although the destination policy
    /// refuses them (tests whose receivers listen on 127.0.0.1 allow `127.0.0.0/8`).
    pub(crate) callback_allow: Vec<String>,
    /// `--config`: a TOML configuration file (its `[keystone]` section, for instance).
    pub(crate) config: Option<PathBuf>,
    /// The address to listen on (`127.0.0.1:0` unless set): a server restarted where it was.
    pub(crate) listen: Option<String>,
    /// `--forward-writes` (PostgreSQL replicas); `None` keeps the default (forwarded).
    pub(crate) forward_writes: Option<bool>,
    /// `--advertise-url`: where the other replicas reach this one.
    pub(crate) advertise_url: Option<String>,
    /// `--release-unconsumed-after-seconds` and `--release-notice-seconds`.
    pub(crate) idle_release: Option<(u64, u64)>,
}

/// The range test receivers listen in.
pub(crate) const LOOPBACK: &str = "127.0.0.0/8";

/// A caller in `headers` auth mode: project, user and comma-separated roles.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Who<'a> {
    pub(crate) project: &'a str,
    pub(crate) user: &'a str,
    pub(crate) roles: &'a str,
}

/// A port nothing listens on (bound, then released).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl TestApp {
    /// The text of `/metrics`.
    pub(crate) async fn metrics_text(&self) -> String {
        self.client
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .expect("send")
            .text()
            .await
            .expect("text")
    }

    /// A server over a fresh SQLite file, noauth.
    pub(crate) async fn spawn() -> TestApp {
        TestApp::spawn_with(Options::default()).await
    }

    /// A server, noauth, whose callbacks may reach 127.0.0.0/8 (where test receivers listen).
    pub(crate) async fn spawn_allowing_loopback() -> TestApp {
        TestApp::spawn_with(Options {
            callback_allow: vec![LOOPBACK.to_owned()],
            ..Options::default()
        })
        .await
    }

    /// A server with options; without a database URL, a fresh SQLite file in a temp dir.
    pub(crate) async fn spawn_with(options: Options) -> TestApp {
        let (dir, database) = match options.database {
            Some(url) => (None, url),
            None => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}", dir.path().join("berth.db").display());
                (Some(dir), url)
            }
        };
        let args = ServeArgs {
            listen: Some(options.listen.unwrap_or_else(|| "127.0.0.1:0".into())),
            database: Some(database.clone()),
            auth: options.auth,
            tokens: options.tokens,
            demo: options.demo,
            fence_unreserved: options.fence_unreserved,
            callback_ca_file: options.callback_ca_file,
            policy_file: options.policy,
            trusted_proxies: options.trusted_proxies,
            max_connections: options.max_connections,
            idle_timeout_seconds: options.idle_timeout_seconds,
            header_timeout_seconds: options.header_timeout_seconds,
            callback_allow: options.callback_allow,
            config: options.config,
            forward_writes: options.forward_writes,
            advertise_url: options.advertise_url,
            release_unconsumed_after_seconds: options.idle_release.map(|(after, _)| after),
            release_notice_seconds: options.idle_release.map(|(_, notice)| notice),
            ..ServeArgs::default()
        };
        let mut config = Config::from_args(&args).expect("config");
        if let Some(timeout) = options.request_timeout {
            config.request_timeout = timeout;
        }
        let running = berth_server::start(&config).await.expect("start");
        let base = format!("http://{}", running.addr());
        TestApp {
            base,
            client: reqwest::Client::new(),
            running: Some(running),
            _dir: dir,
            database,
        }
    }

    /// Stops the server, keeping the database (for restart tests).
    pub(crate) async fn stop(mut self) -> (Option<tempfile::TempDir>, String) {
        if let Some(running) = self.running.take() {
            running.shutdown().await.expect("shutdown");
        }
        (self._dir.take(), self.database.clone())
    }

    /// A request builder for `path`, with a Placement microversion when given.
    pub(crate) fn request(
        &self,
        method: Method,
        path: &str,
        microversion: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let builder = self.client.request(method, format!("{}{path}", self.base));
        match microversion {
            Some(mv) => builder.header("OpenStack-API-Version", format!("placement {mv}")),
            None => builder,
        }
    }

    /// Sends a JSON body (or none) at a microversion and returns status and parsed body.
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        mv: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut builder = self.request(method, path, mv);
        if let Some(body) = body {
            builder = builder.json(&body);
        }
        let response = builder.send().await.expect("send");
        parse(response).await
    }

    /// Sends a JSON body (or none) as `who` (for `headers` auth) and returns status and body.
    pub(crate) async fn call_as(
        &self,
        who: Who<'_>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut builder = self
            .request(method, path, None)
            .header("x-project-id", who.project)
            .header("x-user-id", who.user)
            .header("x-roles", who.roles);
        if let Some(body) = body {
            builder = builder.json(&body);
        }
        parse(builder.send().await.expect("send")).await
    }

    /// `POST` of a JSON body.
    pub(crate) async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, None, Some(body)).await
    }

    /// `GET` at a microversion.
    pub(crate) async fn get(&self, path: &str, mv: Option<&str>) -> (StatusCode, Value) {
        self.call(Method::GET, path, mv, None).await
    }

    /// Creates a provider at 1.39 and returns its uuid.
    pub(crate) async fn create_provider(&self, name: &str, parent: Option<&str>) -> String {
        let mut body = serde_json::json!({ "name": name });
        if let Some(parent) = parent {
            body["parent_provider_uuid"] = Value::String(parent.to_owned());
        }
        let (status, body) = self
            .call(
                Method::POST,
                "/placement/resource_providers",
                Some("1.39"),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["uuid"].as_str().expect("uuid").to_owned()
    }

    /// The generation of a provider.
    pub(crate) async fn generation(&self, uuid: &str) -> u64 {
        let (status, body) = self
            .get(
                &format!("/placement/resource_providers/{uuid}"),
                Some("1.39"),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["generation"].as_u64().expect("generation")
    }

    /// Sets VCPU and MEMORY_MB inventory on a provider.
    pub(crate) async fn set_inventory(&self, uuid: &str, vcpus: u64, memory_mb: u64) {
        let generation = self.generation(uuid).await;
        let body = serde_json::json!({
            "resource_provider_generation": generation,
            "inventories": {"VCPU": {"total": vcpus}, "MEMORY_MB": {"total": memory_mb}},
        });
        let path = format!("/placement/resource_providers/{uuid}/inventories");
        let (status, body) = self
            .call(Method::PUT, &path, Some("1.39"), Some(body))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        // A test that panics still stops its server: abort the serving task via its token.
        if let Some(running) = self.running.take() {
            running.abort();
        }
    }
}

/// Status and body (JSON, or a string for non-JSON bodies, or null when empty).
pub(crate) async fn parse(response: Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.expect("body");
    let body = match text.is_empty() {
        true => Value::Null,
        false => serde_json::from_str(&text).unwrap_or(Value::String(text)),
    };
    (status, body)
}

/// The Placement error code of an error body.
pub(crate) fn code(body: &Value) -> &str {
    body["errors"][0]["code"].as_str().unwrap_or("")
}

/// The Placement error detail of an error body.
pub(crate) fn detail(body: &Value) -> &str {
    body["errors"][0]["detail"].as_str().unwrap_or("")
}
