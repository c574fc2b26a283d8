//! A private PostgreSQL cluster for the harness: `initdb` in a temporary directory, a free port
//! on 127.0.0.1, started, restarted by the nemesis and removed at the end with `pg_ctl`. The
//! machine's own PostgreSQL is never touched. As root (initdb refuses it), every command runs
//! as the `postgres` user through `runuser`.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian keeps PostgreSQL's programs, newest first (`BERTH_PG_BIN` overrides).
const BIN_DIRS: [&str; 3] = [
    "/usr/lib/postgresql/17/bin",
    "/usr/lib/postgresql/16/bin",
    "/usr/lib/postgresql/15/bin",
];

/// A running private cluster.
#[derive(Debug)]
pub struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub port: u16,
    as_postgres: bool,
    running: bool,
}

/// The directory of PostgreSQL's programs, if any.
pub fn bin_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("BERTH_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    BIN_DIRS
        .iter()
        .map(PathBuf::from)
        .find(|dir| dir.join("initdb").exists())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.starts_with(b"0\n"))
}

impl Cluster {
    /// Creates and starts a cluster.
    pub fn start() -> Result<Cluster> {
        let bin = bin_dir().context("no PostgreSQL programs (initdb) found; set BERTH_PG_BIN")?;
        let dir = tempfile::Builder::new()
            .prefix("berth-history-pg")
            .tempdir()?;
        let as_postgres = is_root();
        if as_postgres {
            run(Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path()))?;
        }
        let port = crate::replica::free_port()?;
        let mut cluster = Cluster {
            bin,
            dir,
            port,
            as_postgres,
            running: false,
        };
        let data = cluster.data();
        let mut initdb = cluster.command("initdb");
        initdb
            .args(["-U", "postgres", "--auth=trust", "--no-sync", "-D"])
            .arg(&data);
        run(&mut initdb)?;
        cluster.pg_ctl(&["start"])?;
        cluster.running = true;
        Ok(cluster)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        match self.as_postgres {
            true => {
                let mut command = Command::new("runuser");
                command.args(["-u", "postgres", "--"]).arg(path);
                command
            }
            false => Command::new(path),
        }
    }

    fn pg_ctl(&self, action: &[&str]) -> Result<()> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        let mut command = self.command("pg_ctl");
        command
            .args(["-w", "-t", "60", "-m", "fast", "-D"])
            .arg(self.data())
            .args(["-l"])
            .arg(self.dir.path().join("log"))
            .args(["-o", &options])
            .args(action);
        run(&mut command)
    }

    /// Creates database `name`.
    pub fn create_database(&self, name: &str) -> Result<()> {
        let mut command = self.command("createdb");
        command.args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
            name,
        ]);
        run(&mut command)
    }

    /// Restarts the cluster (a fast shutdown: every connection is cut, and the server comes
    /// back).
    pub fn restart(&self) -> Result<()> {
        self.pg_ctl(&["restart"])
    }

    /// The URL of database `name` through port `port` (the cluster's, or a proxy's).
    pub fn url(name: &str, port: u16) -> String {
        format!("postgres://postgres@127.0.0.1:{port}/{name}")
    }

    /// The directory the cluster lives in.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.running {
            let _ = self.pg_ctl(&["stop"]);
        }
    }
}

/// Runs `command`, failing with its output when it fails.
fn run(command: &mut Command) -> Result<()> {
    let out = command
        .output()
        .with_context(|| format!("run {command:?}"))?;
    if !out.status.success() {
        bail!(
            "{command:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
