//! Running programs for tools: a shell command, a test suite, a compiler. What every such
//! tool needs and is easy to get wrong:
//!
//! - **Nothing outlives the call.** The program runs in its own process group; on timeout,
//!   on cancellation (the session deleted, the server's tool timeout) and when it exits, the
//!   whole group is killed, so `sh -c 'sleep 100 & sleep 100'` leaves no process behind. If
//!   the call's future is dropped, the group is killed then too.
//! - **Bounded output.** stdout and stderr are captured up to a cap each (64 KiB by default)
//!   and the rest is counted and dropped, with a marker saying how much.
//! - **A clean environment.** The program sees `PATH`, `HOME` (its working directory),
//!   `LANG=C.UTF-8` and the variables you add, not the server's (which may hold API keys),
//!   unless you ask for [`Program::inherit_env`].
//! - **Optional resource limits** ([`Limits`]: CPU seconds, memory, processes), applied by a
//!   `/bin/sh` wrapper with `ulimit` before it `exec`s the program: no `unsafe` code runs
//!   between `fork` and `exec` in this process (`CommandExt::pre_exec` would need it), and
//!   `/bin/sh` exists wherever the rest of this module works (it uses `kill` as well). A limit
//!   the program ran into is named in [`Finished::limit`] ([`LimitExceeded`]).
//! - **A sandbox, when it runs the agent's code** ([`Program::run_in`]): the episode's own
//!   filesystem, no network, its own processes and limits ([`crate::sandbox`]). Without one, a
//!   program runs as the server's user and sees what the server sees.
//! - **Live output.** With a [`ToolContext`], each line is sent as a `progress` event
//!   `{"stream": "stdout", "line": "..."}` while the program runs.
//!
//! [`WorkDir`] is a per-episode working directory: made in the environment's `new`, removed
//! in `teardown` (or when dropped), with paths from the model confined to it.
//!
//! Unix only (process groups and `kill`).
//!
//! ```
//! # #[cfg(unix)]
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::time::Duration;
//! use ors_runtime::process::{Program, Exit};
//! use ors_runtime::ToolContext;
//!
//! let done = Program::shell("echo hello; echo oops >&2; exit 3")
//!     .timeout(Duration::from_secs(10))
//!     .run(&ToolContext::detached())
//!     .await
//!     .expect("sh runs");
//! assert_eq!(done.exit, Exit::Code(3));
//! assert_eq!(done.stdout, "hello\n");
//! assert_eq!(done.stderr, "oops\n");
//!
//! let slow = Program::shell("sleep 100 & sleep 100")
//!     .timeout(Duration::from_millis(200))
//!     .run(&ToolContext::detached())
//!     .await
//!     .unwrap();
//! assert_eq!(slow.exit, Exit::TimedOut); // and both sleeps are gone
//! # }
//! # #[cfg(not(unix))] fn main() {}
//! ```

pub(crate) mod capture;
mod exit;
pub(crate) mod limits;
pub(crate) mod workdir;

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use crate::env::ToolContext;
use capture::Capture;

pub use exit::Exit;
pub use limits::{LimitExceeded, Limits};
pub use workdir::{PathError, WorkDir};

/// Default cap on captured stdout, and separately on stderr.
pub const DEFAULT_MAX_OUTPUT: usize = 64 * 1024;
/// How long to keep reading output after the program's group was killed: a process that
/// escaped the group (a daemon that called `setsid`) may hold the pipes open.
const DRAIN_AFTER_KILL: Duration = Duration::from_millis(500);
/// The `PATH` a program gets in a clean environment.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Why a program could not be run at all (a program that ran and failed is a [`Finished`]).
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The program could not be started (not found, not executable, bad working directory).
    #[error("could not start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for it failed.
    #[error("waiting for {program}: {source}")]
    Wait {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// A program that ran: how it ended and what it printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// How it ended.
    pub exit: Exit,
    /// Its standard output, up to the cap, then a truncation marker.
    pub stdout: String,
    /// Its standard error, likewise.
    pub stderr: String,
    /// Whether stdout was cut.
    pub stdout_truncated: bool,
    /// Whether stderr was cut.
    pub stderr_truncated: bool,
    /// How long it ran.
    pub duration: Duration,
    /// The limit it ran into, if any: a tool reports it as an error naming the limit.
    pub limit: Option<LimitExceeded>,
}

impl Finished {
    /// Whether it exited with code 0.
    pub fn success(&self) -> bool {
        self.exit == Exit::Code(0)
    }

    /// The error a tool gives when the program ran into a limit: which limit, then the
    /// [`report`](Finished::report) (what it printed is not lost).
    pub fn limit_error(&self) -> Option<String> {
        self.limit.map(|limit| {
            format!(
                "the command exceeded {limit}, and it and every process it started were \
                 stopped\n{}",
                self.report()
            )
        })
    }

    /// A summary for the model: how it ended, then stdout and stderr.
    pub fn report(&self) -> String {
        let how = match self.exit {
            Exit::Code(c) => format!("exit code {c}"),
            Exit::Signal(s) => format!("killed by signal {s}"),
            Exit::TimedOut => format!(
                "timed out after {:.1} s; the command and every process it started were killed",
                self.duration.as_secs_f64()
            ),
            Exit::Cancelled => "cancelled; the command and its processes were killed".to_owned(),
        };
        let mut out = format!("[{how}]\n");
        if let Some(limit) = self.limit {
            out.push_str(&format!("[it ran into {limit}]\n"));
        }
        for (name, text) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            if !text.is_empty() {
                let end = if text.ends_with('\n') { "" } else { "\n" };
                out.push_str(&format!("--- {name} ---\n{text}{end}"));
            }
        }
        out
    }

    /// What a program that ended this way printed, with the limit it ran into.
    pub(crate) fn new(
        exit: Exit,
        out: &Capture<'_>,
        err: &Capture<'_>,
        duration: Duration,
        applied: &limits::Applied,
    ) -> Self {
        let stderr = err.text();
        let limit = limits::detect(exit, &stderr, out.truncated() || err.truncated(), applied);
        Finished {
            exit,
            stdout: out.text(),
            stderr,
            stdout_truncated: out.truncated(),
            stderr_truncated: err.truncated(),
            duration,
            limit,
        }
    }
}

/// A program to run for a tool. Build it, then [`Program::run`] it.
#[derive(Debug, Clone)]
pub struct Program {
    program: OsString,
    args: Vec<OsString>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) inherit_env: bool,
    pub(crate) timeout: Option<Duration>,
    pub(crate) max_output: usize,
    pub(crate) limits: Limits,
    pub(crate) stdin: Option<Vec<u8>>,
}

impl Program {
    /// Run `program` (looked up in the clean `PATH` unless it is a path).
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Self {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            inherit_env: false,
            timeout: None,
            max_output: DEFAULT_MAX_OUTPUT,
            limits: Limits::default(),
            stdin: None,
        }
    }

    /// Run a shell command line with `/bin/sh -c`.
    pub fn shell(command: impl AsRef<OsStr>) -> Self {
        Self::new("/bin/sh").arg("-c").arg(command)
    }

    /// Add an argument.
    pub fn arg(self, arg: impl AsRef<OsStr>) -> Self {
        self.args([arg])
    }

    /// Add arguments.
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Run in this directory (also the program's `HOME`).
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Set an environment variable for the program.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Give the program the server's whole environment (secrets included) instead of a clean
    /// one.
    pub fn inherit_env(mut self) -> Self {
        self.inherit_env = true;
        self
    }

    /// Kill the program's process group after this long.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Cap on captured stdout, and separately on stderr, in bytes.
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    /// Resource limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Bytes written to the program's standard input (otherwise it reads nothing).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    fn command(&self) -> tokio::process::Command {
        let mut cmd = if self.limits.is_empty() {
            tokio::process::Command::new(&self.program)
        } else {
            let prelude = format!("{}exec \"$@\"", self.limits.prelude(0));
            let mut sh = tokio::process::Command::new("/bin/sh");
            sh.arg("-c").arg(prelude).arg("sh").arg(&self.program);
            sh
        };
        cmd.args(&self.args);
        if !self.inherit_env {
            cmd.env_clear();
            cmd.env("PATH", DEFAULT_PATH).env("LANG", "C.UTF-8");
            if let Some(dir) = &self.cwd {
                cmd.env("HOME", dir);
            }
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        let stdin = self
            .stdin
            .as_ref()
            .map_or_else(Stdio::null, |_| Stdio::piped());
        cmd.stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.process_group(0);
        cmd
    }

    /// Run it to the end, its timeout, or the call's cancellation. `ctx` receives each output
    /// line as a `progress` event (pass [`ToolContext::detached`] outside a tool).
    pub async fn run(&self, ctx: &ToolContext) -> Result<Finished, ProcessError> {
        let name = self.program.to_string_lossy().into_owned();
        let started = Instant::now();
        let spawned = self.command().spawn();
        let mut child = spawned.map_err(|source| ProcessError::Spawn {
            program: name.clone(),
            source,
        })?;
        // From here on the group is killed whatever happens, also if this future is dropped.
        let mut group = GroupGuard(child.id());
        if let (Some(bytes), Some(mut stdin)) = (self.stdin.clone(), child.stdin.take()) {
            tokio::spawn(async move {
                // A program that does not read its input closes the pipe: not an error.
                let _ = stdin.write_all(&bytes).await;
            });
        }
        let mut out = Capture::new("stdout", self.max_output, ctx);
        let mut err = Capture::new("stderr", self.max_output, ctx);
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        // The outputs are read while waiting; the block ends their borrow of the captures.
        let exit = {
            let outputs = async {
                tokio::join!(
                    capture::read_to_end(stdout, &mut out),
                    capture::read_to_end(stderr, &mut err)
                );
            };
            tokio::pin!(outputs);
            let deadline = async {
                match self.timeout {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(deadline);
            // The program's end, its timeout or the call's cancellation, while reading output.
            let mut outputs_done = false;
            // `Child::wait` is cancel-safe: a new one each turn waits for the same exit.
            let exit = loop {
                tokio::select! {
                    status = child.wait() => {
                        break match status {
                            Ok(s) => exit_of(s),
                            Err(source) => {
                                return Err(ProcessError::Wait { program: name, source })
                            }
                        };
                    }
                    () = &mut outputs, if !outputs_done => outputs_done = true,
                    _ = &mut deadline => break Exit::TimedOut,
                    _ = ctx.cancelled() => break Exit::Cancelled,
                }
            };
            // Whatever ended it, nothing of its group may live on.
            group.kill_now();
            if !matches!(exit, Exit::Code(_) | Exit::Signal(_)) {
                let _ = child.wait().await;
            }
            if !outputs_done {
                let _ = tokio::time::timeout(DRAIN_AFTER_KILL, &mut outputs).await;
            }
            exit
        };
        let duration = started.elapsed();
        tracing::debug!(program = %name, ?exit, ms = duration.as_millis() as u64, "program ended");
        let applied = limits::Applied {
            timeout: self.timeout,
            limits: self.limits,
            disk: None,
            max_output: self.max_output,
        };
        Ok(Finished::new(exit, &out, &err, duration, &applied))
    }

    /// The program and its arguments, as given.
    pub(crate) fn argv(&self) -> impl Iterator<Item = &OsStr> {
        std::iter::once(self.program.as_os_str()).chain(self.args.iter().map(OsString::as_os_str))
    }
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        (None, None) => Exit::Code(-1),
    }
}

/// Kills a program's process group when told to, or when dropped. Also the guard of the MCP
/// servers [`crate::mcp`] starts: the group led by the process it holds the id of (started
/// with `process_group(0)`).
pub(crate) struct GroupGuard(pub(crate) Option<u32>);

impl GroupGuard {
    /// `SIGKILL` to every process of the group, through `kill(1)` (no `unsafe` `killpg` call);
    /// later calls do nothing. A group with no process left makes `kill` fail quietly.
    pub(crate) fn kill_now(&mut self) {
        if let Some(pgid) = self.0.take() {
            if let Err(e) = kill("KILL", &format!("-{pgid}")).status() {
                tracing::warn!(pgid, error = %e, "could not run kill(1) on a tool's process group");
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// `kill -s SIGNAL -- TARGET` (a PID, or `-PGID` for a group), its output discarded: how this
/// crate signals processes without `unsafe` `kill(2)` calls.
pub(crate) fn kill(signal: &str, target: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new("kill");
    cmd.args(["-s", signal, "--", target])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}
