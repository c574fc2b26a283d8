//! A real Keystone for the tests that need one: the `keystone` package from PyPI, SQLite,
//! fernet tokens, served by gunicorn on 127.0.0.1 (`scripts/keystone.sh`), and a small client
//! of its v3 API for the tests' own setup (projects, users, roles, services, endpoints).
//!
//! Keystone's virtualenv is `BERTH_TEST_KEYSTONE_VENV`, or `target/keystone-venv`
//! (`scripts/test.sh` installs it with `scripts/keystone.sh install`). Without it a test prints
//! a loud SKIPPED line and returns, except under `CI=true`, where that is a failure.

use crate::support::free_port;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The longest Keystone may take to answer after gunicorn starts.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(90);
/// The bootstrapped admin's password.
pub(crate) const ADMIN_PASSWORD: &str = "admin-secret";

pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Keystone's virtualenv, or `None` after a loud skip line (a failure under CI).
pub(crate) fn keystone_venv(test: &str) -> Option<PathBuf> {
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
                 or set BERTH_TEST_KEYSTONE_VENV); {test} did not run",
                venv.display()
            );
            None
        }
    }
}

/// A Keystone served by gunicorn, stopped (by its process id) when dropped.
pub(crate) struct KeystoneServer {
    child: Option<Child>,
    pub(crate) url: String,
    pub(crate) dir: tempfile::TempDir,
}

impl KeystoneServer {
    /// Sets up and starts a Keystone on a free loopback port.
    pub(crate) fn start(venv: &Path, token_lifetime: Duration) -> KeystoneServer {
        let dir = tempfile::tempdir().expect("keystone dir");
        let port = free_port().to_string();
        let script = workspace().join("scripts/keystone.sh");
        let dir_text = dir.path().display().to_string();
        let env = [
            ("BERTH_KEYSTONE_VENV", venv.display().to_string()),
            ("BERTH_KEYSTONE_ADMIN_PASSWORD", ADMIN_PASSWORD.to_owned()),
            (
                "BERTH_KEYSTONE_EXPIRATION",
                token_lifetime.as_secs().to_string(),
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
    pub(crate) async fn ready(&mut self, client: &reqwest::Client) {
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
    pub(crate) fn stop(&mut self) {
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
pub(crate) enum Scope<'a> {
    Project(&'a str),
    System,
    Unscoped,
}

/// Talks to Keystone's v3 API.
pub(crate) struct KeystoneApi {
    pub(crate) client: reqwest::Client,
    pub(crate) url: String,
}

impl KeystoneApi {
    /// A token of `user`'s password.
    pub(crate) async fn token(&self, user: &str, password: &str, scope: Scope<'_>) -> String {
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
    pub(crate) async fn admin(
        &self,
        admin: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Value {
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

    pub(crate) async fn create(&self, admin: &str, path: &str, kind: &str, body: Value) -> String {
        let made = self
            .admin(admin, Method::POST, path, Some(json!({ kind: body })))
            .await;
        made[kind]["id"].as_str().expect("id").to_owned()
    }

    /// The id of role `name`, made when bootstrap did not.
    pub(crate) async fn role(&self, admin: &str, name: &str) -> String {
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
    pub(crate) async fn revoke(&self, admin: &str, token: &str) {
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
