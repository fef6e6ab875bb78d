//! How an environment's sandboxes are made ([`SandboxSettings`], [`Network`]) and the defaults
//! of what they give a command.

use std::path::PathBuf;
use std::time::Duration;

use crate::process::Limits;

/// Where the workspace is, inside the sandbox: the commands' working directory and `HOME`.
pub const WORKSPACE: &str = "/workspace";
/// The longest a command may run (a program's longer timeout is cut to it).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(1800);
/// A command's timeout when its program sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Size of each writable mount (the workspace, `/tmp`, `/dev/shm`) unless set.
pub const DEFAULT_DISK_BYTES: u64 = 128 << 20;
/// Limits of every command unless the settings or the program say otherwise: 2 GiB of address
/// space per process and 128 processes.
pub const DEFAULT_LIMITS: Limits = Limits {
    cpu_secs: None,
    memory_bytes: Some(2 << 30),
    processes: Some(128),
};
/// The host user sandboxes run as when the server runs as root: `nobody`.
pub const DEFAULT_HOST_USER: u32 = 65534;

/// Whether a sandbox's commands reach a network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Network {
    /// Its own loopback only: nothing outside the sandbox, the server included.
    #[default]
    None,
    /// The host's network, as the server has it: the internet, the local network, and the
    /// server's own port on `127.0.0.1`. Opt in only for commands that must download.
    Host,
}

/// How an environment's sandboxes are made: network, limits, disk size, extra read-only host
/// paths and variables. Built with [`SandboxSettings::new`] and its methods.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    pub(crate) network: Network,
    pub(crate) limits: Limits,
    pub(crate) disk_bytes: u64,
    pub(crate) default_timeout: Duration,
    pub(crate) ro_binds: Vec<PathBuf>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) host_user: u32,
    pub(crate) bwrap: Option<PathBuf>,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        Self::new()
    }
}

impl SandboxSettings {
    /// No network, [`DEFAULT_LIMITS`], [`DEFAULT_DISK_BYTES`] per writable mount,
    /// [`DEFAULT_TIMEOUT`], nothing of the host beyond its system directories.
    pub fn new() -> Self {
        Self {
            network: Network::None,
            limits: DEFAULT_LIMITS,
            disk_bytes: DEFAULT_DISK_BYTES,
            default_timeout: DEFAULT_TIMEOUT,
            ro_binds: Vec::new(),
            env: Vec::new(),
            host_user: DEFAULT_HOST_USER,
            bwrap: None,
        }
    }

    /// Give commands the host's network (see [`Network::Host`]: the server's port too).
    pub fn host_network(mut self) -> Self {
        self.network = Network::Host;
        self
    }

    /// The limits of every command; a program's own [`Limits`] replace them field by field.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The size of the workspace, and of `/tmp` and `/dev/shm` each, in bytes; a write past it
    /// fails with "No space left on device".
    pub fn disk_bytes(mut self, bytes: u64) -> Self {
        self.disk_bytes = bytes.max(1 << 20);
        self
    }

    /// The timeout of a command whose program sets none (at most [`MAX_TIMEOUT`]).
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout.min(MAX_TIMEOUT);
        self
    }

    /// Show a host directory or file read-only at the same path (a toolchain in `/opt`, a data
    /// set). It must exist when
    /// [`Sandboxes::new`](super::Sandboxes::new) checks the settings.
    pub fn ro_bind(mut self, path: impl Into<PathBuf>) -> Self {
        self.ro_binds.push(path.into());
        self
    }

    /// A variable every command sees.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The host user (and group) sandboxes run as when the server runs as root (default
    /// [`DEFAULT_HOST_USER`]); a server that is not root runs them as itself.
    pub fn host_user(mut self, uid: u32) -> Self {
        self.host_user = uid;
        self
    }

    /// The `bwrap` program to use (default: `bwrap` on the `PATH`, or `/usr/bin/bwrap`).
    pub fn bwrap(mut self, path: impl Into<PathBuf>) -> Self {
        self.bwrap = Some(path.into());
        self
    }

    /// The network setting.
    pub fn network(&self) -> Network {
        self.network
    }

    /// The size of each writable mount, in bytes.
    pub fn disk(&self) -> u64 {
        self.disk_bytes
    }
}
