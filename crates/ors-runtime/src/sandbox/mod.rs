//! A sandbox per episode, to run the agent's code in: what such a command can reach is its own
//! workspace and nothing else of the host, the server or other episodes.
//!
//! [`Sandboxes`] is made once, at start-up, from [`SandboxSettings`]; making it checks that
//! sandboxes work on this machine (so a server that cannot make one refuses to start, naming
//! the cause and the fix, instead of failing at the first tool call). Each episode takes a
//! [`Sandbox`] from it, which costs nothing until its first command: that command starts the
//! sandbox, and later ones reuse it ([`Program::run_in`]). What a sandbox gives its commands:
//!
//! - **Its own filesystem view**: the host's system directories (`/usr`, `/bin`, `/lib*`, and
//!   a copy of the files of `/etc` that programs read: the dynamic linker's cache,
//!   certificates, time zone; users and groups of its own) read-only, so `python3` and the
//!   usual tools work; a writable
//!   workspace at [`WORKSPACE`] that lasts for the episode; a private `/tmp` and `/dev/shm`;
//!   a fresh `/proc` that shows only the sandbox's processes. Nothing else of the host is
//!   there: not `/home`, `/root`, `/var`, `/srv`, `/opt`, `/sys`, not the server's files and
//!   not another episode's workspace. The rest of the root is read-only.
//! - **No network** ([`Network::None`], the default): its own loopback only, so not the server
//!   on `127.0.0.1` either. [`SandboxSettings::host_network`] opts in to the host's network,
//!   the server's port included, for environments whose commands must download.
//! - **Its own processes**: a PID namespace whose init runs each command. When a command ends,
//!   times out or is cancelled, the init kills every process the command started (detached
//!   and `setsid` ones too) and reports the end only once none is left; the tool's call
//!   returns after that. [`Sandbox::shutdown`] (the episode's teardown) ends the init, which
//!   takes every process and the workspace with it, and returns once the sandbox is gone.
//! - **Limits**: wall time per command (at most [`MAX_TIMEOUT`]), CPU time, memory and the
//!   number of processes ([`Limits`]), the disk (the size of each writable mount) and captured
//!   output; a limit a command ran into is named in [`Finished::limit`].
//! - **A clean environment**: `PATH`, `HOME` (the workspace), `LANG`, `TMPDIR` and the
//!   variables the settings add; none of the server's. The command runs as user 1000 of its
//!   own user namespace, without capabilities or setuid (`no_new_privs`), and may not create
//!   user namespaces of its own; on the host it is the server's user, or `nobody` (65534) when
//!   the server runs as root.
//!
//! A sandbox runs one command at a time; commands of one sandbox wait for each other.
//!
//! The backend is [bubblewrap](https://github.com/containers/bubblewrap) (`bwrap`, Debian's
//! `bubblewrap`), as an external program, so nothing here is `unsafe`: it needs unprivileged
//! user namespaces, which a container only allows with the settings `docs/programs.md` ("Tools
//! that run programs") lists. Other backends (a container or a microVM per episode) can
//! implement [`Backend`].
//!
//! **What it does not protect against**: the sandbox shares the host's kernel, so a kernel
//! bug reachable from an unprivileged user namespace is an escape; CPU time and memory are
//! limited per process, not for the sandbox as a whole (a container's memory limit, or
//! cgroups, bound the total); kernel facts (`/proc/cpuinfo`, `/proc/meminfo`, `uname`) are
//! the host's. For hostile multi-tenant use, run the server's replicas in gVisor,
//! Kata Containers, Firecracker or separate VMs, with this sandbox inside.
//!
//! ```no_run
//! # async fn tool() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use ors_runtime::process::Program;
//! use ors_runtime::sandbox::{SandboxSettings, Sandboxes};
//! use ors_runtime::ToolContext;
//!
//! // At start-up: fails, naming the cause and the fix, where sandboxes cannot be made.
//! let sandboxes = Sandboxes::new(SandboxSettings::new())?;
//! // Per episode: nothing runs until the first command.
//! let sandbox = sandboxes.sandbox();
//! sandbox.write_file("hello.py", b"print('hi')\n").await?;
//! let done = Program::shell("python3 hello.py; cat /etc/hostname")
//!     .timeout(Duration::from_secs(10))
//!     .run_in(&sandbox, &ToolContext::detached())
//!     .await?;
//! assert_eq!(done.stdout, "hi\n"); // and the host's name is not there to read
//! sandbox.shutdown().await?; // in the episode's teardown: every process and file gone
//! # Ok(())
//! # }
//! ```
//!
//! [`Program::run_in`]: crate::process::Program::run_in
//! [`Finished::limit`]: crate::process::Finished::limit
//! [`Limits`]: crate::process::Limits

mod backend;
mod bwrap;
mod error;
mod etc;
mod instance;
mod script;
mod settings;

use std::ffi::OsString;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::env::ToolContext;
use crate::process::capture::Capture;
use crate::process::limits::Applied;
use crate::process::workdir::relative_parts;
use crate::process::{Exit, Finished, PathError, Program};

pub use backend::{Backend, Exec, Instance, Ran};
pub use bwrap::Bubblewrap;
pub use error::SandboxError;
pub use settings::{
    Network, SandboxSettings, DEFAULT_DISK_BYTES, DEFAULT_HOST_USER, DEFAULT_LIMITS,
    DEFAULT_TIMEOUT, MAX_TIMEOUT, WORKSPACE,
};

struct Shared {
    settings: SandboxSettings,
    backend: Box<dyn Backend>,
}

/// The sandboxes of one environment: made once at start-up (checked then), shared by every
/// episode, each of which takes its own [`Sandbox`].
#[derive(Clone)]
pub struct Sandboxes {
    shared: Arc<Shared>,
}

impl fmt::Debug for Sandboxes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sandboxes")
            .field("settings", &self.shared.settings)
            .field("backend", &self.shared.backend)
            .finish()
    }
}

impl Sandboxes {
    /// Bubblewrap sandboxes with these settings, once a sandbox has been started and has run a
    /// command here (blocking for as long, a few milliseconds). The error names what is
    /// missing or refused (no `bwrap`, user namespaces disabled or blocked by seccomp or
    /// AppArmor, a masked `/proc`) and the fix.
    pub fn new(settings: SandboxSettings) -> Result<Self, SandboxError> {
        Self::with_backend(settings, Bubblewrap::new())
    }

    /// Sandboxes of another backend, checked the same way.
    pub fn with_backend(
        settings: SandboxSettings,
        backend: impl Backend,
    ) -> Result<Self, SandboxError> {
        for path in &settings.ro_binds {
            if !path.is_absolute() || !path.exists() {
                return Err(SandboxError::Settings(format!(
                    "the read-only path {} must be an absolute path that exists",
                    path.display()
                )));
            }
        }
        for (k, _) in &settings.env {
            if !script::valid_name(k.as_bytes()) {
                return Err(SandboxError::Settings(format!(
                    "the variable name {k:?} is not a shell name"
                )));
            }
        }
        backend.check(&settings)?;
        Ok(Self {
            shared: Arc::new(Shared {
                settings,
                backend: Box::new(backend),
            }),
        })
    }

    /// A sandbox for one episode; it starts with its first command.
    pub fn sandbox(&self) -> Sandbox {
        Sandbox {
            shared: Arc::clone(&self.shared),
            live: tokio::sync::Mutex::new(None),
            started: AtomicBool::new(false),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &SandboxSettings {
        &self.shared.settings
    }
}

/// One episode's sandbox: started by its first command, reused by later ones, stopped by
/// [`Sandbox::shutdown`] (or, without the wait, when dropped).
pub struct Sandbox {
    shared: Arc<Shared>,
    live: tokio::sync::Mutex<Option<Box<dyn Instance>>>,
    started: AtomicBool,
}

impl fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sandbox")
            .field("started", &self.is_started())
            .finish_non_exhaustive()
    }
}

/// A file read from a sandbox's workspace: its first bytes, and its whole size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileContents {
    /// The bytes read (at most the size asked for).
    pub bytes: Vec<u8>,
    /// The file's size.
    pub size: u64,
}

/// How long the file operations of [`Sandbox`] may take.
const FILE_TIMEOUT: Duration = Duration::from_secs(60);

impl Program {
    /// Run it in `sandbox` (starting the sandbox if this is its first command) to its end,
    /// its timeout or the call's cancellation; when this returns, every process it started is
    /// gone. Limits the program does not set are the sandbox's; the timeout is at most the
    /// sandbox's [`MAX_TIMEOUT`]. `ctx` receives each output line as a `progress` event. The
    /// error is the sandbox's: it could not start, it broke, or the program asks for what a
    /// sandbox does not give, such as the server's environment.
    pub async fn run_in(
        &self,
        sandbox: &Sandbox,
        ctx: &ToolContext,
    ) -> Result<Finished, SandboxError> {
        if self.inherit_env {
            return Err(SandboxError::Refused(
                "a sandboxed program cannot have the server's environment (inherit_env): give \
                 it the variables it needs with Program::env"
                    .to_owned(),
            ));
        }
        let settings = &sandbox.shared.settings;
        let exec = Exec {
            argv: self.argv().map(ToOwned::to_owned).collect(),
            cwd: self.cwd.clone(),
            env: self.env.clone(),
            stdin: self.stdin.clone(),
            timeout: self
                .timeout
                .unwrap_or(settings.default_timeout)
                .min(MAX_TIMEOUT),
            limits: self.limits.or(settings.limits),
            max_output: self.max_output,
        };
        let ran = sandbox.exec(&exec, ctx).await?;
        let detached = ToolContext::detached();
        let out = Capture::new("stdout", exec.max_output, &detached);
        let out = out.with(ran.stdout, ran.stdout_dropped);
        let err = Capture::new("stderr", exec.max_output, &detached);
        let err = err.with(ran.stderr, ran.stderr_dropped);
        let applied = Applied {
            timeout: Some(exec.timeout),
            limits: exec.limits,
            disk: Some(settings.disk_bytes),
            max_output: exec.max_output,
        };
        Ok(Finished::new(ran.exit, &out, &err, ran.duration, &applied))
    }
}

impl Sandbox {
    /// Whether a command has started it (and it has not been shut down since).
    pub fn is_started(&self) -> bool {
        self.started.load(Ordering::Relaxed)
    }

    /// The settings it is made with.
    pub fn settings(&self) -> &SandboxSettings {
        &self.shared.settings
    }

    /// Run `exec` in the sandbox, starting it first if needed. A sandbox that broke is shut
    /// down (its processes confirmed gone) and forgotten, so the next command starts anew.
    async fn exec(&self, exec: &Exec, ctx: &ToolContext) -> Result<Ran, SandboxError> {
        let mut live = self.live.lock().await;
        let instance = match live.as_mut() {
            Some(instance) => instance,
            None => {
                let started = self.shared.backend.start(&self.shared.settings).await?;
                self.started.store(true, Ordering::Relaxed);
                live.insert(started)
            }
        };
        match instance.run(exec, ctx).await {
            Err(e @ SandboxError::Broken(_)) => {
                if let Some(dead) = live.take() {
                    self.started.store(false, Ordering::Relaxed);
                    if let Err(stop) = dead.shutdown().await {
                        tracing::warn!(error = %stop, "stopping a broken sandbox");
                    }
                }
                Err(e)
            }
            other => other,
        }
    }

    /// A command of the file operations: no progress events, no cancellation but its timeout.
    async fn file_op(
        &self,
        path: &str,
        argv: &[&str],
        stdin: Option<Vec<u8>>,
        max_output: usize,
    ) -> Result<Ran, SandboxError> {
        let exec = Exec {
            argv: argv.iter().map(OsString::from).collect(),
            stdin,
            timeout: FILE_TIMEOUT,
            limits: self.shared.settings.limits,
            max_output,
            ..Exec::default()
        };
        let ran = self.exec(&exec, &ToolContext::detached()).await?;
        if ran.exit != Exit::Code(0) {
            let mut reason = String::from_utf8_lossy(&ran.stderr).trim().to_owned();
            if reason.contains("No space left on device") {
                reason = format!(
                    "the workspace is full (the disk limit is {}): {reason}",
                    crate::process::limits::bytes(self.shared.settings.disk_bytes)
                );
            } else if reason.is_empty() {
                reason = format!("failed ({:?})", ran.exit);
            }
            return Err(SandboxError::file(path, reason));
        }
        Ok(ran)
    }

    /// Write a file of the workspace (a path relative to it; folders are made as needed),
    /// replacing it. The sandbox's own view decides where it lands, so a link the agent made
    /// cannot lead the write outside the sandbox.
    pub async fn write_file(&self, path: &str, contents: &[u8]) -> Result<(), SandboxError> {
        let rel = relative(path)?;
        // `sh -c SCRIPT sh PATH`: the path is an argument, never part of the script.
        let script = "case $1 in */*) mkdir -p -- \"${1%/*}\" || exit 1;; esac; exec cat >\"$1\"";
        self.file_op(
            path,
            &["/bin/sh", "-c", script, "sh", &rel],
            Some(contents.to_vec()),
            4096,
        )
        .await?;
        Ok(())
    }

    /// Read up to `max` bytes of a file of the workspace (a path relative to it), and its size.
    pub async fn read_file(&self, path: &str, max: usize) -> Result<FileContents, SandboxError> {
        let rel = relative(path)?;
        // The size first, on a line of its own, then the bytes.
        let script = "[ -f \"$1\" ] || { echo \"not a file\" >&2; exit 1; }; \
                      wc -c <\"$1\" && exec head -c \"$2\" -- \"$1\"";
        let ran = self
            .file_op(
                path,
                &["/bin/sh", "-c", script, "sh", &rel, &max.to_string()],
                None,
                max + 32,
            )
            .await?;
        let mut out = ran.stdout;
        let Some(nl) = out.iter().position(|&b| b == b'\n') else {
            return Err(SandboxError::file(path, "its size could not be read"));
        };
        let line = String::from_utf8_lossy(&out[..nl]);
        let size = line.trim().parse().unwrap_or(0);
        out.drain(..=nl);
        Ok(FileContents { bytes: out, size })
    }

    /// Copy every file of this sandbox's workspace into `to`'s (for example a fresh sandbox to
    /// grade the agent's work in, away from anything the agent left running or changed
    /// elsewhere). Nothing is copied from a sandbox that never started.
    pub async fn copy_workspace_to(&self, to: &Sandbox) -> Result<(), SandboxError> {
        if !self.is_started() {
            return Ok(());
        }
        let disk = usize::try_from(self.shared.settings.disk_bytes).unwrap_or(usize::MAX);
        // A tar stream of the workspace: a bit more than its files, never more than twice.
        let ran = self
            .file_op(
                WORKSPACE,
                &["tar", "-C", WORKSPACE, "-cf", "-", "."],
                None,
                disk.saturating_mul(2),
            )
            .await?;
        if ran.stdout_dropped > 0 {
            return Err(SandboxError::file(
                WORKSPACE,
                "the workspace's archive is larger than twice the disk limit",
            ));
        }
        to.file_op(
            WORKSPACE,
            &["tar", "-C", WORKSPACE, "--no-same-owner", "-xf", "-"],
            Some(ran.stdout),
            4096,
        )
        .await?;
        Ok(())
    }

    /// Stop the sandbox, if it started: when this returns, every process of it is gone and so
    /// is its workspace. Call it in the episode's teardown; a later command starts a new one.
    pub async fn shutdown(&self) -> Result<(), SandboxError> {
        let instance = self.live.lock().await.take();
        self.started.store(false, Ordering::Relaxed);
        match instance {
            Some(i) => i.shutdown().await,
            None => Ok(()),
        }
    }
}

/// `path` as a path relative to the workspace: not empty, not absolute, no `..`.
fn relative(path: &str) -> Result<String, SandboxError> {
    if path.contains('\0') {
        return Err(SandboxError::file(path, "the path contains a NUL byte"));
    }
    let parts = relative_parts(path).map_err(|e| {
        let reason = match e {
            PathError::Parent(_) => "the path goes up with '..'; paths stay inside the workspace",
            PathError::Absolute(_) => "the path is absolute; give a path relative to the workspace",
            // Empty: the walk refuses nothing else.
            _ => "the path is empty",
        };
        SandboxError::file(path, reason)
    })?;
    let parts: Vec<_> = parts.iter().map(|s| s.to_string_lossy()).collect();
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_relative_to_the_workspace() {
        assert_eq!(relative("./a//b.py").unwrap(), "a/b.py");
        for bad in ["", ".", "/etc/passwd", "../x", "a/../../x"] {
            assert!(relative(bad).is_err(), "{bad}");
        }
    }
}
