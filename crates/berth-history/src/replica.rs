//! A replica: the real `berth serve` binary over PostgreSQL (through its own proxy), started,
//! killed with SIGKILL, paused with SIGSTOP and resumed with SIGCONT, and restarted with its
//! clock moved, by the nemesis.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long a replica may take to answer `/healthz` after it starts.
pub const READY_WITHIN: Duration = Duration::from_secs(30);

/// A free port on 127.0.0.1 (bound, then released).
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// One `berth serve` process and how to start it again.
#[derive(Debug)]
pub struct Replica {
    berth: PathBuf,
    dir: PathBuf,
    database: String,
    planted: Option<String>,
    /// Seconds its clock runs ahead (negative: behind) from its next start (`--clock-offset-seconds`).
    pub clock_offset_seconds: i64,
    /// Its HTTP port on 127.0.0.1.
    pub port: u16,
    child: Option<Child>,
}

impl Replica {
    /// Starts `berth serve` (the binary `berth`) over `database`, its files under `dir`, with the
    /// planted defect `planted` (read by a `planted-defects` build only), and waits until it
    /// answers.
    pub async fn start(
        berth: &Path,
        dir: &Path,
        database: String,
        planted: Option<String>,
    ) -> Result<Replica> {
        std::fs::create_dir_all(dir)?;
        let mut replica = Replica {
            berth: berth.to_owned(),
            dir: dir.to_owned(),
            database,
            planted,
            clock_offset_seconds: 0,
            port: free_port()?,
            child: None,
        };
        replica.restart().await?;
        Ok(replica)
    }

    /// The base URL of its HTTP API.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Whether its process is running (not killed).
    pub fn is_up(&self) -> bool {
        self.child.is_some()
    }

    /// Starts the process again (after [`Replica::kill`]) on the same port, and waits until it
    /// answers.
    pub async fn restart(&mut self) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("berth.log"))?;
        let mut command = Command::new(&self.berth);
        command
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{}", self.port),
                "--data-dir",
            ])
            .arg(&self.dir)
            .args(["--database", &self.database])
            .arg(format!(
                "--clock-offset-seconds={}",
                self.clock_offset_seconds
            ))
            .env(
                "BERTH_LOG",
                std::env::var("BERTH_HISTORY_LOG").unwrap_or_else(|_| "warn".to_owned()),
            )
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(defect) = &self.planted {
            command.env("BERTH_PLANTED_DEFECT", defect);
        }
        self.child = Some(
            command
                .spawn()
                .with_context(|| format!("spawn {}", self.berth.display()))?,
        );
        let client = reqwest::Client::new();
        let started = std::time::Instant::now();
        while started.elapsed() < READY_WITHIN {
            let health = client
                .get(format!("{}/healthz", self.base()))
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            if let Some(child) = &mut self.child
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                bail!(
                    "berth exited ({status}) before it answered; see {}",
                    self.dir.join("berth.log").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("berth did not answer within {READY_WITHIN:?}")
    }

    /// SIGKILL, and wait until it is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn signal(&self, signal: &str) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status();
        }
    }

    /// SIGSTOP: the process stays, answering nothing, holding what it holds.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT.
    pub fn resume(&self) {
        self.signal("-CONT");
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.resume();
        self.kill();
    }
}
