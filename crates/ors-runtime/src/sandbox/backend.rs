//! What a backend is ([`Backend`], [`Instance`]): what it is given to run ([`Exec`]) and what
//! it gives back ([`Ran`]), below [`Bubblewrap`] and the [`Sandbox`] that use it.
//!
//! [`Bubblewrap`]: super::Bubblewrap
//! [`Sandbox`]: super::Sandbox

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::error::SandboxError;
use super::settings::SandboxSettings;
use crate::env::ToolContext;
use crate::process::{Exit, Limits};

/// A command for a [`Backend`]'s sandbox: the program, with the sandbox's defaults applied.
#[derive(Debug, Clone, Default)]
pub struct Exec {
    /// The program and its arguments (looked up in the sandbox's `PATH`).
    pub argv: Vec<OsString>,
    /// The working directory inside the sandbox (`None`: [`WORKSPACE`](super::WORKSPACE)).
    pub cwd: Option<PathBuf>,
    /// Variables added to the sandbox's environment.
    pub env: Vec<(OsString, OsString)>,
    /// Its standard input (`None`: nothing to read).
    pub stdin: Option<Vec<u8>>,
    /// When it is stopped.
    pub timeout: Duration,
    /// Its limits.
    pub limits: Limits,
    /// Cap on captured stdout, and separately on stderr.
    pub max_output: usize,
}

/// What a command did: how it ended, and what it printed (kept up to the cap).
#[derive(Debug)]
pub struct Ran {
    /// How it ended.
    pub exit: Exit,
    /// Standard output, as kept.
    pub stdout: Vec<u8>,
    /// Bytes of standard output dropped past the cap.
    pub stdout_dropped: u64,
    /// Standard error, as kept.
    pub stderr: Vec<u8>,
    /// Bytes of standard error dropped past the cap.
    pub stderr_dropped: u64,
    /// How long it ran.
    pub duration: Duration,
}

/// A way to make sandboxes: [`Bubblewrap`](super::Bubblewrap) today; a container or a microVM per episode could
/// be another.
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// Check, at start-up, that sandboxes with these settings can be made here (blocking: it
    /// may start one); the error names the cause and the fix.
    fn check(&self, settings: &SandboxSettings) -> Result<(), SandboxError>;

    /// Start a sandbox.
    fn start<'a>(
        &'a self,
        settings: &'a SandboxSettings,
    ) -> BoxFuture<'a, Result<Box<dyn Instance>, SandboxError>>;
}

/// One running sandbox of a [`Backend`].
pub trait Instance: Send + Sync {
    /// Run a command to its end, its timeout or `ctx`'s cancellation, sending its output lines
    /// to `ctx` as progress; return once every process it started is gone. A
    /// [`SandboxError::Broken`] means the sandbox is unusable.
    fn run<'a>(
        &'a mut self,
        exec: &'a Exec,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Ran, SandboxError>>;

    /// Stop the sandbox: every process and the workspace gone when it returns.
    fn shutdown(self: Box<Self>) -> BoxFuture<'static, Result<(), SandboxError>>;
}
