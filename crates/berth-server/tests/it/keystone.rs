//! `--auth keystone` against a real Keystone: the `keystone` package from PyPI, SQLite, fernet
//! tokens, served by gunicorn on 127.0.0.1 (`scripts/keystone.sh`), bootstrapped with an admin,
//! a service user for berth, a Nova-like service user, two projects with members, a project
//! reader and a system reader. berth validates every token itself; the test checks that each
//! role gets the policy's answer, that missing, garbage, unscoped, revoked and expired tokens get
//! 401 with `WWW-Authenticate: Keystone uri=...`, that a service token lets an expired user token
//! through as keystonemiddleware does, that a cached token stops working within the configured
//! bound (2 s here) after its revocation, and that with Keystone stopped a token berth has not
//! cached gets 503.
//!
//! Keystone's virtualenv is `BERTH_TEST_KEYSTONE_VENV`, or `target/keystone-venv`
//! (`scripts/test.sh` installs it with `scripts/keystone.sh install`). Without it the test prints
//! a loud SKIPPED line and returns, except under `CI=true`, where that is a failure.

use crate::support::{Options, TestApp, free_port, parse};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Lifetime of every token this Keystone issues: short, so that one expires during the test
/// (tokens used later are issued just before their use, so that a slow machine does not expire
/// them first).
const TOKEN_LIFETIME: Duration = Duration::from_secs(40);
/// How long berth believes a validated token.
const CACHE_BOUND: Duration = Duration::from_secs(2);
/// The longest Keystone may take to answer after gunicorn starts.
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// The bootstrapped admin's password.
const ADMIN_PASSWORD: &str = "admin-secret";
/// Every other user's password.
const PASSWORD: &str = "berth-test-pw";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Keystone's virtualenv, or `None` after a loud skip line (a failure under CI).
fn keystone_venv() -> Option<PathBuf> {
    let venv = std::env::var_os("BERTH_TEST_KEYSTONE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/keystone-venv"));
    let installed =
        venv.join("bin/keystone-manage").is_file() && venv.join("bin/gunicorn").is_file();
    match installed {
        true => Some(venv),
        false if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "Keystone is not installed in {} and CI needs the Keystone test",
            venv.display()
        ),
        false => {
            // Straight to the process's stderr: the test harness captures `eprintln!`.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: Keystone is not installed in {} (run `bash scripts/keystone.sh install` \
                 or set BERTH_TEST_KEYSTONE_VENV); the Keystone test did not run",
                venv.display()
            );
            None
        }
    }
}

/// A Keystone served by gunicorn, stopped (by its process id) when dropped.
struct KeystoneServer {
    child: Option<Child>,
    url: String,
    dir: tempfile::TempDir,
}

impl KeystoneServer {
    /// Sets up and starts a Keystone on a free loopback port.
    fn start(venv: &Path) -> KeystoneServer {
        let dir = tempfile::tempdir().expect("keystone dir");
        let port = free_port().to_string();
        let script = workspace().join("scripts/keystone.sh");
        let dir_text = dir.path().display().to_string();
        let env = [
            ("BERTH_KEYSTONE_VENV", venv.display().to_string()),
            ("BERTH_KEYSTONE_ADMIN_PASSWORD", ADMIN_PASSWORD.to_owned()),
            (
                "BERTH_KEYSTONE_EXPIRATION",
                TOKEN_LIFETIME.as_secs().to_string(),
            ),
        ];
        let setup = Command::new("bash")
            .arg(&script)
            .args(["setup", &dir_text, &port])
            .envs(env.clone())
            .output()
            .expect("run keystone.sh setup");
        assert!(
            setup.status.success(),
            "keystone.sh setup failed: {}{}",
            String::from_utf8_lossy(&setup.stdout),
            String::from_utf8_lossy(&setup.stderr)
        );
        let child = Command::new("bash")
            .arg(&script)
            .args(["serve", &dir_text, &port])
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run keystone.sh serve");
        KeystoneServer {
            child: Some(child),
            url: format!("http://127.0.0.1:{port}/v3"),
            dir,
        }
    }

    /// Waits until Keystone answers its version document.
    async fn ready(&mut self, client: &reqwest::Client) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(response) = client.get(&self.url).send().await
                && response.status() == StatusCode::OK
            {
                return;
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            assert!(
                exited.is_none() && Instant::now() < deadline,
                "Keystone did not start (exit {exited:?}); gunicorn log:\n{}",
                std::fs::read_to_string(self.dir.path().join("gunicorn.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Stops gunicorn by its process id (SIGINT: it stops its worker at once), then waits.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for KeystoneServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a token is scoped to.
#[derive(Debug, Clone, Copy)]
enum Scope<'a> {
    Project(&'a str),
    System,
    Unscoped,
}

/// Talks to Keystone's v3 API.
struct KeystoneApi {
    client: reqwest::Client,
    url: String,
}

impl KeystoneApi {
    /// A token of `user`'s password.
    async fn token(&self, user: &str, password: &str, scope: Scope<'_>) -> String {
        let mut auth = json!({"identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"id": "default"}, "password": password}}}});
        match scope {
            Scope::Project(name) => {
                auth["scope"] = json!({"project": {"name": name, "domain": {"id": "default"}}});
            }
            Scope::System => auth["scope"] = json!({"system": {"all": true}}),
            Scope::Unscoped => {}
        }
        let response = self
            .client
            .post(format!("{}/auth/tokens?nocatalog", self.url))
            .json(&json!({ "auth": auth }))
            .send()
            .await
            .expect("issue a token");
        assert_eq!(response.status(), StatusCode::CREATED, "token for {user}");
        response
            .headers()
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .expect("X-Subject-Token")
            .to_owned()
    }

    /// Sends an admin request and returns its body.
    async fn admin(&self, admin: &str, method: Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .client
            .request(method.clone(), format!("{}{path}", self.url))
            .header("X-Auth-Token", admin);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("keystone admin request");
        let status = response.status();
        let text = response.text().await.expect("body");
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    async fn create(&self, admin: &str, path: &str, kind: &str, body: Value) -> String {
        let made = self
            .admin(admin, Method::POST, path, Some(json!({ kind: body })))
            .await;
        made[kind]["id"].as_str().expect("id").to_owned()
    }

    /// The id of role `name`, made when bootstrap did not.
    async fn role(&self, admin: &str, name: &str) -> String {
        let found = self
            .admin(admin, Method::GET, &format!("/roles?name={name}"), None)
            .await;
        match found["roles"][0]["id"].as_str() {
            Some(id) => id.to_owned(),
            None => {
                self.create(admin, "/roles", "role", json!({"name": name}))
                    .await
            }
        }
    }

    /// Revokes `token`.
    async fn revoke(&self, admin: &str, token: &str) {
        let response = self
            .client
            .delete(format!("{}/auth/tokens", self.url))
            .header("X-Auth-Token", admin)
            .header("X-Subject-Token", token)
            .send()
            .await
            .expect("revoke");
        assert_eq!(response.status(), StatusCode::NO_CONTENT, "revoke");
    }
}

/// One call to berth with a token (and a service token).
async fn call(
    app: &TestApp,
    token: Option<&str>,
    service: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value, Option<String>) {
    let mut request = app.request(method, path, None);
    if let Some(token) = token {
        request = request.header("X-Auth-Token", token);
    }
    if let Some(service) = service {
        request = request.header("X-Service-Token", service);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("call berth");
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (status, body) = parse(response).await;
    (status, body, challenge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn berth_validates_keystone_tokens_itself() {
    let Some(venv) = keystone_venv() else {
        return;
    };
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let mut keystone = KeystoneServer::start(&venv);
    keystone.ready(&client).await;
    let ks = KeystoneApi {
        client: client.clone(),
        url: keystone.url.clone(),
    };
    let admin = ks
        .token("admin", ADMIN_PASSWORD, Scope::Project("admin"))
        .await;

    // Projects, users and roles.
    let project = |name: &str| json!({"name": name, "domain_id": "default"});
    let service = ks
        .create(&admin, "/projects", "project", project("service"))
        .await;
    let alpha = ks
        .create(&admin, "/projects", "project", project("alpha"))
        .await;
    let beta = ks
        .create(&admin, "/projects", "project", project("beta"))
        .await;
    let user = |name: &str| json!({"name": name, "domain_id": "default", "password": PASSWORD});
    let mut users = std::collections::BTreeMap::new();
    for name in ["berth", "nova", "alice", "bob", "rita", "sally"] {
        users.insert(name, ks.create(&admin, "/users", "user", user(name)).await);
    }
    let (member, reader, service_role) = (
        ks.role(&admin, "member").await,
        ks.role(&admin, "reader").await,
        ks.role(&admin, "service").await,
    );
    for (project, name, role) in [
        (&service, "berth", &service_role),
        (&service, "nova", &service_role),
        (&alpha, "alice", &member),
        (&beta, "bob", &member),
        (&alpha, "rita", &reader),
    ] {
        let path = format!("/projects/{project}/users/{}/roles/{role}", users[name]);
        ks.admin(&admin, Method::PUT, &path, None).await;
    }
    let path = format!("/system/users/{}/roles/{reader}", users["sally"]);
    ks.admin(&admin, Method::PUT, &path, None).await;
    // A token that will have expired by the end of the test.
    let expiring = ks.token("alice", PASSWORD, Scope::Project("alpha")).await;
    let expires = Instant::now() + TOKEN_LIFETIME;
    let admin = ks
        .token("admin", ADMIN_PASSWORD, Scope::Project("admin"))
        .await;

    // berth, validating tokens with its own service user's credentials.
    let config = keystone.dir.path().join("berth.toml");
    std::fs::write(
        &config,
        format!(
            "auth = \"keystone\"\n[keystone]\nauth_url = \"{}\"\nusername = \"berth\"\npassword = \"{PASSWORD}\"\nproject_name = \"service\"\ncache_seconds = {}\ntimeout_seconds = 2\n",
            keystone.url,
            CACHE_BOUND.as_secs()
        ),
    )
    .expect("write berth.toml");
    let app = TestApp::spawn_with(Options {
        config: Some(config),
        ..Options::default()
    })
    .await;
    let challenge = format!("Keystone uri=\"{}\"", keystone.url);

    // Each role gets the policy's answer.
    let alice = ks.token("alice", PASSWORD, Scope::Project("alpha")).await;
    let bob = ks.token("bob", PASSWORD, Scope::Project("beta")).await;
    let rita = ks.token("rita", PASSWORD, Scope::Project("alpha")).await;
    let nova = ks.token("nova", PASSWORD, Scope::Project("service")).await;
    let sally = ks.token("sally", PASSWORD, Scope::System).await;
    let admin_system = ks.token("admin", ADMIN_PASSWORD, Scope::System).await;
    let host = json!({"name": "compute-1", "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
    let (status, _, _) = call(
        &app,
        Some(&admin),
        None,
        Method::POST,
        "/reservation/v1/os-hosts",
        Some(host.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "admin enrols a host");
    let (status, _, _) = call(
        &app,
        Some(&alice),
        None,
        Method::POST,
        "/reservation/v1/os-hosts",
        Some(host),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a member does not");
    let lease = json!({"name": "alpha-lease", "start_date": "2040-01-01 10:00",
        "end_date": "2040-01-01 12:00", "events": [],
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1,
                          "hypervisor_properties": "", "resource_properties": ""}]});
    let (status, body, _) = call(
        &app,
        Some(&alice),
        None,
        Method::POST,
        "/reservation/v1/leases",
        Some(lease.clone()),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "a member creates a lease: {body}"
    );
    let lease_id = body["lease"]["id"].as_str().expect("lease id").to_owned();
    assert_eq!(body["lease"]["project_id"], alpha.as_str(), "{body}");
    let lease_path = format!("/reservation/v1/leases/{lease_id}");
    let (status, _, _) = call(
        &app,
        Some(&rita),
        None,
        Method::POST,
        "/reservation/v1/leases",
        Some(lease),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a reader creates nothing");
    for (who, token, method, path, want) in [
        (
            "the project's reader",
            &rita,
            Method::GET,
            lease_path.as_str(),
            StatusCode::OK,
        ),
        (
            "the project's reader",
            &rita,
            Method::DELETE,
            lease_path.as_str(),
            StatusCode::FORBIDDEN,
        ),
        (
            "another project's member",
            &bob,
            Method::GET,
            lease_path.as_str(),
            StatusCode::NOT_FOUND,
        ),
        (
            "the admin",
            &admin,
            Method::GET,
            lease_path.as_str(),
            StatusCode::OK,
        ),
        (
            "the admin, system-scoped",
            &admin_system,
            Method::GET,
            lease_path.as_str(),
            StatusCode::OK,
        ),
        (
            "a member",
            &alice,
            Method::GET,
            "/reservation/v1/os-hosts",
            StatusCode::FORBIDDEN,
        ),
        (
            "a member",
            &alice,
            Method::GET,
            "/placement/resource_providers",
            StatusCode::FORBIDDEN,
        ),
        (
            "a service",
            &nova,
            Method::GET,
            "/placement/resource_providers",
            StatusCode::OK,
        ),
        (
            "a service",
            &nova,
            Method::GET,
            "/reservation/v1/leases",
            StatusCode::FORBIDDEN,
        ),
        (
            "the admin",
            &admin,
            Method::GET,
            "/placement/resource_providers",
            StatusCode::OK,
        ),
        (
            "a system reader",
            &sally,
            Method::GET,
            "/promise/flavors",
            StatusCode::OK,
        ),
        (
            "a system reader",
            &sally,
            Method::GET,
            "/reservation/v1/leases",
            StatusCode::FORBIDDEN,
        ),
        (
            "a system reader",
            &sally,
            Method::GET,
            "/reservation/v1/os-hosts",
            StatusCode::FORBIDDEN,
        ),
        (
            "a project reader",
            &rita,
            Method::GET,
            "/promise/flavors",
            StatusCode::OK,
        ),
    ] {
        let (status, body, _) = call(&app, Some(token), None, method.clone(), path, None).await;
        assert_eq!(status, want, "{who}: {method} {path}: {body}");
    }
    let (status, body, _) = call(
        &app,
        Some(&bob),
        None,
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(
        (status, body["leases"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(0)),
        "{body}"
    );
    let (status, body, _) = call(
        &app,
        Some(&alice),
        None,
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["leases"][0]["id"], lease_id.as_str(), "{body}");

    // Missing, garbage, unscoped and revoked tokens: 401 naming Keystone.
    let admin = ks
        .token("admin", ADMIN_PASSWORD, Scope::Project("admin"))
        .await;
    let unscoped = ks.token("alice", PASSWORD, Scope::Unscoped).await;
    let revoked = ks.token("alice", PASSWORD, Scope::Project("alpha")).await;
    ks.revoke(&admin, &revoked).await;
    let garbage = "gAAAAABnot-a-token".to_owned();
    for (what, token) in [
        ("no token", None),
        ("a garbage token", Some(&garbage)),
        ("an unscoped token", Some(&unscoped)),
        ("a revoked token", Some(&revoked)),
    ] {
        let (status, body, header) = call(
            &app,
            token.map(String::as_str),
            None,
            Method::GET,
            "/reservation/v1/leases",
            None,
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body}");
        assert_eq!(header.as_deref(), Some(challenge.as_str()), "{what}");
        assert!(
            body["error_message"].is_string(),
            "Blazar's error format: {body}"
        );
    }
    let (status, body, _) = call(
        &app,
        Some(&garbage),
        None,
        Method::GET,
        "/placement/resource_providers",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        body["errors"][0]["detail"].is_string(),
        "Placement's error format: {body}"
    );

    // A cached token stops working within the bound after its revocation.
    let cached = ks.token("alice", PASSWORD, Scope::Project("alpha")).await;
    let (status, _, _) = call(
        &app,
        Some(&cached),
        None,
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    ks.revoke(&admin, &cached).await;
    let revoked_at = Instant::now();
    loop {
        let (status, _, _) = call(
            &app,
            Some(&cached),
            None,
            Method::GET,
            "/reservation/v1/leases",
            None,
        )
        .await;
        if status == StatusCode::UNAUTHORIZED {
            break;
        }
        assert_eq!(status, StatusCode::OK);
        assert!(
            revoked_at.elapsed() < CACHE_BOUND + Duration::from_secs(1),
            "a revoked token still works after {:?}",
            revoked_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // An expired token: 401, unless a valid service token comes with it (keystonemiddleware's
    // rule for services acting on a user's behalf). berth's own token has been renewed by now.
    if let Some(left) = expires.checked_duration_since(Instant::now()) {
        tokio::time::sleep(left + Duration::from_secs(1)).await;
    }
    let (status, body, header) = call(
        &app,
        Some(&expiring),
        None,
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "an expired token: {body}");
    assert_eq!(header.as_deref(), Some(challenge.as_str()));
    let nova = ks.token("nova", PASSWORD, Scope::Project("service")).await;
    let (status, body, _) = call(
        &app,
        Some(&expiring),
        Some(&nova),
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "an expired token with a service token: {body}"
    );
    assert_eq!(body["leases"][0]["id"], lease_id.as_str(), "{body}");
    let (status, _, _) = call(
        &app,
        Some(&expiring),
        Some(&alice),
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a service token needs the service role"
    );
    let (status, _, _) = call(
        &app,
        Some(&expiring),
        Some(&garbage),
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a garbage service token");

    // Keystone stopped: a token berth has not cached gets 503, never a pass.
    let fresh = ks.token("alice", PASSWORD, Scope::Project("alpha")).await;
    keystone.stop();
    let started = Instant::now();
    let (status, body, _) = call(
        &app,
        Some(&fresh),
        None,
        Method::GET,
        "/reservation/v1/leases",
        None,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "Keystone down: {body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded by the timeout"
    );
    let (status, body, _) = call(
        &app,
        Some(&fresh),
        None,
        Method::GET,
        "/placement/resource_providers",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let (status, _, _) = call(&app, None, None, Method::GET, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK, "public routes need no Keystone");
    drop(app);
}
