//! The three servers the benchmark measures, how each is launched, and what can be read
//! about a running one (its memory, whether it is still alive).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::procs::ServerProcess;

/// How long a server may take to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Our `conformance` example on ors-server.
    Ours,
    /// The Python reference (ors-sdk 0.1.0) serving the same fixture.
    Reference,
    /// The bare hyper server with canned answers: the machine's limit.
    Limit,
}

impl Kind {
    /// Every kind, in table order.
    pub const ALL: [Kind; 3] = [Kind::Ours, Kind::Reference, Kind::Limit];

    /// The name used in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Ours => "ours",
            Kind::Reference => "reference",
            Kind::Limit => "limit",
        }
    }
}

/// Everything needed to launch the servers.
pub struct Launcher {
    /// The release `conformance` binary, when it built.
    pub ours: Option<PathBuf>,
    /// The release `scripted-model` binary, when the agent workload runs and it built.
    pub model: Option<PathBuf>,
    /// The release `code` example, when the sandbox workloads run and it built.
    pub code: Option<PathBuf>,
    /// The release `ors-bench` binary (bare server and load generator).
    pub bench: PathBuf,
    /// The reference venv's python.
    pub python: Option<PathBuf>,
    /// The reference fixture script.
    pub fixture: PathBuf,
    /// Where server logs (stderr) go.
    pub logs: PathBuf,
    /// A command our server and the bare one run under (valgrind, for `--callgrind`); empty:
    /// run them directly.
    pub wrapper: Vec<std::ffi::OsString>,
}

impl Launcher {
    /// A command running `program`, under [`Launcher::wrapper`] when there is one.
    fn wrapped(&self, program: &Path) -> Command {
        match self.wrapper.split_first() {
            Some((wrapper, args)) => {
                let mut c = Command::new(wrapper);
                c.args(args).arg(program);
                c
            }
            None => Command::new(program),
        }
    }

    fn command(
        &self,
        kind: Kind,
        max_sessions: Option<usize>,
        env: &[(&str, &str)],
    ) -> Result<Command, String> {
        let mut cmd = match kind {
            Kind::Ours => {
                let bin = self
                    .ours
                    .as_ref()
                    .ok_or("our conformance example did not build")?;
                let mut c = self.wrapped(bin);
                c.args(["--host", "127.0.0.1", "--port", "0"]);
                // The benchmark measures the default, quiet configuration.
                c.env_remove("RUST_LOG");
                for var in [
                    "ORS_API_KEY",
                    "ORS_TOOL_TIMEOUT_SECS",
                    "ORS_MAX_SESSIONS",
                    "ORS_MAX_CONNECTIONS",
                    "ORS_METRICS",
                ] {
                    c.env_remove(var);
                }
                if let Some(n) = max_sessions {
                    c.env("ORS_MAX_SESSIONS", n.to_string());
                }
                c.envs(env.iter().copied());
                c
            }
            Kind::Reference => {
                let python = self
                    .python
                    .as_ref()
                    .ok_or("the reference virtualenv is not available")?;
                if !self.fixture.exists() {
                    return Err(format!(
                        "the reference fixture {} is missing",
                        self.fixture.display()
                    ));
                }
                let mut c = Command::new(python);
                c.arg(&self.fixture)
                    .args(["--host", "127.0.0.1", "--port", "0"]);
                c.env_remove("ORS_API_KEY");
                if let Some(dir) = self.fixture.parent() {
                    c.current_dir(dir);
                }
                c
            }
            Kind::Limit => {
                let mut c = self.wrapped(&self.bench);
                c.args(["bare", "--host", "127.0.0.1", "--port", "0"]);
                c
            }
        };
        let log = self.logs.join(format!("{}.log", kind.name()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| format!("opening {}: {e}", log.display()))?;
        cmd.stderr(Stdio::from(file));
        Ok(cmd)
    }

    /// Start a server of `kind` and time its launch to the ready line. `max_sessions` raises
    /// our server's live-session cap (the idle-memory run goes up to it).
    pub fn start(
        &self,
        kind: Kind,
        max_sessions: Option<usize>,
    ) -> Result<(ServerProcess, Duration), String> {
        self.start_with(kind, max_sessions, &[])
    }

    /// [`Launcher::start`] with environment variables set for our server (such as
    /// `ORS_METRICS`); the other servers take none.
    pub fn start_with(
        &self,
        kind: Kind,
        max_sessions: Option<usize>,
        env: &[(&str, &str)],
    ) -> Result<(ServerProcess, Duration), String> {
        let cmd = self.command(kind, max_sessions, env)?;
        let t0 = Instant::now();
        let server = ServerProcess::start(cmd, READY_TIMEOUT).map_err(|e| {
            format!(
                "{e} (its stderr is in {})",
                self.logs.join(format!("{}.log", kind.name())).display()
            )
        })?;
        Ok((server, t0.elapsed()))
    }
}

/// The resident set size of a process in KiB (`VmRSS` of `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> Option<u64> {
    crate::procs::status_kib(pid, "VmRSS")
}

/// CPU time (user + system) a process has used, in seconds, from `/proc/PID/stat`. Clock
/// ticks are assumed to be 100 per second, as on every mainstream Linux.
pub fn cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces; the fields after it start past the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) ... utime(11) stime(12).
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// Whether the process is still running (not exited, not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The reference fixture shared with the interop tests.
pub fn fixture_path(root: &Path) -> PathBuf {
    root.join("tools")
        .join("interop")
        .join("python")
        .join("conformance_env.py")
}
