//! The `berth` binary itself: refusing unsafe configurations, printing its configuration, and
//! shutting down gracefully on SIGTERM with exit code 0.

use crate::support::free_port;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BERTH: &str = env!("CARGO_BIN_EXE_berth");

#[test]
fn noauth_off_loopback_is_refused_in_one_line() {
    let dir = tempfile::tempdir().expect("dir");
    let output = Command::new(BERTH)
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without authentication"),
        "{stderr}"
    );
}

#[test]
fn print_config_shows_the_effective_configuration() {
    let output = Command::new(BERTH)
        .args([
            "serve",
            "--print-config",
            "--database",
            "postgres://berth:hunter2@db.example/berth",
        ])
        .env("BERTH_LISTEN", "127.0.0.1:9123")
        .output()
        .expect("run");
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("listen = \"127.0.0.1:9123\""),
        "the environment applies: {stdout}"
    );
    assert!(stdout.contains("auth = \"noauth\""), "{stdout}");
    assert!(
        !stdout.contains("hunter2"),
        "credentials are redacted: {stdout}"
    );
}

#[test]
fn sigterm_stops_the_server_with_exit_code_zero() {
    let dir = tempfile::tempdir().expect("dir");
    let port = free_port();
    let mut child = Command::new(BERTH)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(30);
    let url = format!("http://127.0.0.1:{port}");
    loop {
        let ready = Command::new(BERTH)
            .args(["healthcheck", "--url", &url])
            .status()
            .expect("healthcheck");
        if ready.success() {
            break;
        }
        assert!(Instant::now() < deadline, "berth did not become ready");
        std::thread::yield_now();
    }
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("berth did not stop after SIGTERM");
        }
        std::thread::yield_now();
    };
    assert!(status.success(), "exit status {status:?}");
    let after = Command::new(BERTH)
        .args(["healthcheck", "--url", &url])
        .status()
        .expect("healthcheck");
    assert!(!after.success(), "no longer serving");
}
