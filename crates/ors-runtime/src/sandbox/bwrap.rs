//! The bubblewrap backend: `bwrap` builds the sandbox (namespaces, the filesystem view, no
//! network) and runs a small shell init in it (`init.sh`) that runs each command; this side
//! talks to the init through its standard streams ([`super::instance`]).
//!
//! How the view is built follows Flatpak and the agent CLIs' Linux sandboxes: a fresh tmpfs
//! root made read-only once set up (`--remount-ro /`), the system directories bound read-only
//! (`/bin` and the like recreated as the links they are on merged-`/usr` systems), a prepared
//! `/etc` ([`super::etc`]: not the host's name, machine id, users or shadow passwords), a fresh
//! `/proc` and a minimal `/dev`, and size-limited tmpfs mounts for what is writable.
//! `--unshare-all` gives the sandbox its own user, PID, network, IPC, UTS and cgroup
//! namespaces (the network one holds only a loopback); `--disable-userns` stops commands from
//! making user namespaces of their own (the kernel surface most escapes went through);
//! `--die-with-parent` and `--new-session` tie it to the server and keep it off the server's
//! terminal; `--as-pid-1` makes the init PID 1, so `kill -1` from it reaches every other
//! process of the sandbox.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use super::instance::Live;
use super::{Backend, Exec, Instance, Network, SandboxError, SandboxSettings, WORKSPACE};
use crate::env::ToolContext;
use crate::process::{Exit, DEFAULT_PATH};

const INIT: &str = include_str!("init.sh");
/// How long a sandbox may take to start before it counts as failed.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Room for a command's standard input: the spool where the init keeps it while it runs.
const SPOOL_SLACK: u64 = 1 << 20;
/// The user and group commands are, inside the sandbox's user namespace.
const SANDBOX_ID: &str = "1000";

/// The top-level system directories: bound read-only, or recreated as links.
const SYSTEM_DIRS: &[&str] = &["bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// Sandboxes made by bubblewrap (`bwrap`, an external program: Debian's `bubblewrap`).
#[derive(Debug, Default)]
pub struct Bubblewrap {
    _private: (),
}

impl Bubblewrap {
    /// The backend (the settings say which `bwrap`).
    pub fn new() -> Self {
        Self::default()
    }
}

impl Backend for Bubblewrap {
    fn check(&self, settings: &SandboxSettings) -> Result<(), SandboxError> {
        preflight(settings)?;
        // The real proof: start one and run a command. On a thread of its own with its own
        // runtime, so this works from synchronous and asynchronous code alike.
        let settings = settings.clone();
        let outcome = std::thread::spawn(move || -> Result<(), SandboxError> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| SandboxError::Start(format!("a runtime for the check: {e}")))?;
            rt.block_on(async {
                let mut sandbox: Box<dyn Instance> = Box::new(start(&settings).await?);
                let exec = Exec {
                    argv: vec![OsString::from("true")],
                    timeout: START_TIMEOUT,
                    limits: settings.limits,
                    max_output: 4096,
                    ..Exec::default()
                };
                let ran = sandbox.run(&exec, &ToolContext::detached()).await;
                let stopped = sandbox.shutdown().await;
                let (ran, ()) = (ran?, stopped?);
                if ran.exit != Exit::Code(0) {
                    return Err(unavailable(
                        format!(
                            "`true` failed in a new sandbox ({:?}): {}",
                            ran.exit,
                            String::from_utf8_lossy(&ran.stderr).trim()
                        ),
                        "see docs/programs.md, \"Tools that run programs\"",
                    ));
                }
                Ok(())
            })
        })
        .join();
        outcome.unwrap_or_else(|_| Err(SandboxError::Start("the check panicked".to_owned())))
    }

    fn start<'a>(
        &'a self,
        settings: &'a SandboxSettings,
    ) -> BoxFuture<'a, Result<Box<dyn Instance>, SandboxError>> {
        Box::pin(async move { Ok(Box::new(start(settings).await?) as Box<dyn Instance>) })
    }
}

/// Start a sandbox: `bwrap` with the init, once the init said it is ready.
async fn start(settings: &SandboxSettings) -> Result<Live, SandboxError> {
    let bwrap = locate(settings)?;
    // Held until the init is ready; waiting for it is not part of START_TIMEOUT.
    let _turn = STARTS
        .acquire()
        .await
        .map_err(|_| SandboxError::Start("the start queue is closed".to_owned()))?;
    // bwrap writes the init's PID to --info-fd; a shell in front gives it that descriptor (a
    // copy of stderr), as passing one directly would need `unsafe` code between fork and exec.
    // The shell also leaves the server's directory and, for a server running as root, becomes
    // the sandbox's host user through setpriv: a user set on the Command makes std fork the
    // whole server rather than posix_spawn it, and a fork copies the page tables of a server
    // holding a thousand episodes while its memory map is locked (500 first commands at once
    // waited 4 s for their spawn at the median, 10 s at the most).
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c").arg("cd / && exec \"$0\" \"$@\" 3>&2");
    if let Some(id) = host_user(settings) {
        cmd.arg(locate_setpriv()?)
            .arg(format!("--reuid={id}"))
            .arg(format!("--regid={id}"))
            .args(["--clear-groups", "--"]);
    }
    cmd.arg(&bwrap)
        .args(args(settings, super::etc::prepared()?))
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = spawn(cmd)
        .await
        .map_err(|e| SandboxError::Start(format!("could not run {}: {e}", bwrap.display())))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(SandboxError::Start("bwrap's pipes are missing".to_owned()));
    };
    let (mut stdout, mut stderr) = (BufReader::new(stdout), BufReader::new(stderr));
    let handshake = async {
        let mut info = String::new();
        // The info object, ending with a line `}`; bwrap's error instead when it failed.
        loop {
            let line = info.len();
            if stderr.read_line(&mut info).await.unwrap_or(0) == 0 {
                return Err(info);
            }
            if info[line..].trim_end() == "}" {
                break;
            }
        }
        let mut ready = String::new();
        let _ = stdout.read_line(&mut ready).await;
        if ready.trim_end() != "ready" {
            return Err(info);
        }
        Ok(info)
    };
    let info = match tokio::time::timeout(START_TIMEOUT, handshake).await {
        Ok(Ok(info)) => info,
        Ok(Err(said)) => {
            let mut rest = String::new();
            let _ = tokio::time::timeout(Duration::from_secs(2), stderr.read_to_string(&mut rest))
                .await;
            return Err(diagnose(&format!("{said}{rest}")));
        }
        Err(_) => {
            return Err(SandboxError::Start(format!(
                "no answer from the sandbox within {} s",
                START_TIMEOUT.as_secs()
            )))
        }
    };
    let init_pid = child_pid(&info).ok_or_else(|| {
        SandboxError::Start(format!("bwrap did not say the init's PID: {info:?}"))
    })?;
    Ok(Live::new(
        child,
        init_pid,
        stdin,
        stdout.into_inner(),
        stderr.into_inner(),
    ))
}

/// `"child-pid": N` of bwrap's info object.
fn child_pid(info: &str) -> Option<u32> {
    let v: serde_json::Value = serde_json::from_str(info).ok()?;
    v["child-pid"].as_u64().and_then(|p| u32::try_from(p).ok())
}

/// The `bwrap` arguments for these settings, up to and including the init; `etc` is what the
/// sandbox sees as `/etc` ([`super::etc::prepared`]).
pub(crate) fn args(settings: &SandboxSettings, etc: &Path) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |items: &[&str]| a.extend(items.iter().map(OsString::from));
    push(&["--unshare-all", "--unshare-user", "--disable-userns"]);
    push(&["--die-with-parent", "--new-session", "--as-pid-1"]);
    push(&["--hostname", "sandbox"]);
    push(&["--uid", SANDBOX_ID, "--gid", SANDBOX_ID]);
    if settings.network == Network::Host {
        push(&["--share-net"]);
    }
    push(&["--ro-bind", "/usr", "/usr"]);
    for dir in SYSTEM_DIRS {
        let host = Path::new("/").join(dir);
        match std::fs::read_link(&host) {
            Ok(target) => a.extend(["--symlink".into(), target.into(), host.into()]),
            Err(_) if host.is_dir() => {
                a.extend(["--ro-bind".into(), host.clone().into(), host.into()]);
            }
            Err(_) => {}
        }
    }
    a.extend(["--ro-bind".into(), etc.into(), "/etc".into()]);
    for path in &settings.ro_binds {
        a.extend(["--ro-bind".into(), path.into(), path.into()]);
    }
    let disk = settings.disk_bytes.to_string();
    let spool = (settings.disk_bytes + SPOOL_SLACK).to_string();
    let mut push = |items: &[&str]| a.extend(items.iter().map(OsString::from));
    push(&["--proc", "/proc", "--dev", "/dev"]);
    for mount in [WORKSPACE, "/tmp", "/dev/shm"] {
        push(&["--size", &disk, "--tmpfs", mount]);
    }
    push(&["--size", &spool, "--tmpfs", "/run/ors"]);
    push(&["--remount-ro", "/dev", "--remount-ro", "/"]);
    push(&["--chdir", WORKSPACE, "--clearenv"]);
    let fixed = [
        ("PATH", DEFAULT_PATH),
        ("HOME", WORKSPACE),
        ("LANG", "C.UTF-8"),
        ("TMPDIR", "/tmp"),
    ];
    let env = settings.env.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    for (k, v) in fixed.into_iter().chain(env) {
        push(&["--setenv", k, v]);
    }
    push(&["--info-fd", "3", "--", "/bin/sh", "-c"]);
    push(&[init_script(), "ors-sandbox-init"]);
    a
}

/// The init without its comments and indentation: it is the command line of the init (and of
/// every command's shell before it `exec`s), so `ps` in a sandbox stays readable.
fn init_script() -> &'static str {
    static SCRIPT: OnceLock<String> = OnceLock::new();
    SCRIPT.get_or_init(|| {
        INIT.lines()
            .map(str::trim_start)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

/// The host user and group a sandbox runs as: the configured one when the server is root
/// (`None`: as the server's user).
fn host_user(settings: &SandboxSettings) -> Option<u32> {
    (effective_uid() == Some(0)).then_some(settings.host_user)
}

/// This process's effective user id, from `/proc/self/status` (no `unsafe` `geteuid`).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// The `bwrap` to run.
fn locate(settings: &SandboxSettings) -> Result<PathBuf, SandboxError> {
    match &settings.bwrap {
        Some(p) if p.is_file() => Ok(p.clone()),
        Some(p) => Err(missing(&format!("{} does not exist", p.display()))),
        None => on_path("bwrap").ok_or_else(|| missing("bubblewrap (`bwrap`) is not installed")),
    }
}

/// The program `name` in the server's `PATH` (or the default one), or else in `/usr/bin`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from(DEFAULT_PATH));
    std::env::split_paths(&path)
        .chain(std::iter::once(PathBuf::from("/usr/bin")))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `setpriv` (util-linux), which a server running as root starts sandboxes through.
fn locate_setpriv() -> Result<PathBuf, SandboxError> {
    on_path("setpriv").ok_or_else(|| {
        unavailable(
            "the server runs as root and starts sandboxes as another user with `setpriv`, \
             which is not installed",
            "install util-linux (`apt-get install util-linux`, `apk add setpriv`), or run the \
             server as a user other than root",
        )
    })
}

fn missing(cause: &str) -> SandboxError {
    unavailable(
        cause,
        "install bubblewrap: `apt-get install bubblewrap` (Debian, Ubuntu), `dnf install \
         bubblewrap` (Fedora), `apk add bubblewrap` (Alpine); in a container image, add it to \
         the Dockerfile (deploy/Dockerfile does)",
    )
}

/// The kernel settings that turn unprivileged user namespaces off, read before trying.
fn preflight(settings: &SandboxSettings) -> Result<(), SandboxError> {
    if !cfg!(target_os = "linux") {
        return Err(unavailable(
            "bubblewrap sandboxes need Linux",
            "serve the environment on Linux (a container or VM on other systems)",
        ));
    }
    locate(settings)?;
    if host_user(settings).is_some() {
        locate_setpriv()?;
    }
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    if read("/proc/sys/user/max_user_namespaces") == Some(0) {
        return Err(unavailable(
            "user namespaces are disabled (user.max_user_namespaces is 0)",
            "`sysctl -w user.max_user_namespaces=15000` on the host (and in /etc/sysctl.d to \
             keep it)",
        ));
    }
    if read("/proc/sys/kernel/unprivileged_userns_clone") == Some(0) {
        return Err(unavailable(
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone is 0)",
            "`sysctl -w kernel.unprivileged_userns_clone=1` on the host",
        ));
    }
    Ok(())
}

/// A sandbox that did not start, from what bwrap said: the cause, and the fix for the usual
/// ones.
fn diagnose(said: &str) -> SandboxError {
    let said = said.trim();
    let has = |s: &str| said.contains(s);
    let fix = if has("Can't mount proc") {
        "the container masks /proc, so a sandbox cannot mount its own: run it with `docker \
         run --security-opt systempaths=unconfined`, or in Kubernetes set the container's \
         securityContext.procMount: Unmasked (which needs the pod's hostUsers: false)"
    } else if has("setting up uid map")
        || has("No permissions to create")
        || has("Creating new namespace failed")
        || has("Operation not permitted")
        || has("Permission denied")
    {
        "unprivileged user namespaces are blocked: in Docker run with `--security-opt \
         seccomp=unconfined --security-opt apparmor=unconfined` (or a seccomp profile that \
         allows unshare, clone and mount); in Kubernetes set securityContext.seccompProfile \
         and appArmorProfile to type: Unconfined (deploy/k8s/statefulset.yaml); on Ubuntu 24.04 \
         hosts, `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor \
         profile for bwrap; as root without CAP_SETUID, run the server as a non-root user"
    } else {
        return SandboxError::Start(format!("bwrap: {said}"));
    };
    unavailable(format!("bwrap failed: {said}"), fix)
}

/// Sandboxes cannot be made here: why, and how to fix it.
fn unavailable(cause: impl Into<String>, fix: &str) -> SandboxError {
    SandboxError::Unavailable {
        cause: cause.into(),
        fix: fix.to_owned(),
    }
}

/// How many sandboxes start at once; the others wait their turn, first come first served. A
/// start is mostly CPU (bwrap's namespaces and mounts, the init's shell), so more at once
/// only share the cores: 1,000 first commands at once would each take as long as all of
/// them, and all miss their callers' deadlines together instead of the last ones alone.
const STARTS_AT_ONCE: usize = 8;

/// The turns of [`STARTS_AT_ONCE`] (tokio's semaphore is fair: waiters are served in order).
static STARTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(STARTS_AT_ONCE);

/// How many threads spawn sandboxes, one per start at once. A spawn returns once the child
/// has exec'd, which on a loaded machine is when the scheduler gets to it: one thread made
/// 500 simultaneous first commands wait up to 18 s in line, for little CPU.
const SPAWNERS: usize = STARTS_AT_ONCE;

/// A program to spawn on a spawner thread, and where to send the child.
struct SpawnJob {
    handle: tokio::runtime::Handle,
    cmd: tokio::process::Command,
    reply: tokio::sync::oneshot::Sender<io::Result<tokio::process::Child>>,
}

/// Spawn `cmd` from one of [`SPAWNERS`] threads that live as long as the process: bwrap's
/// `--die-with-parent` kills the sandbox when the *thread* that started it ends, and a
/// runtime's threads (its blocking pool's above all) come and go.
async fn spawn(cmd: tokio::process::Command) -> io::Result<tokio::process::Child> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnJob>> = OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        for i in 0..SPAWNERS {
            let rx = std::sync::Arc::clone(&rx);
            let spawned = std::thread::Builder::new()
                .name(format!("ors-sandbox-spawner-{i}"))
                .spawn(move || loop {
                    // One thread waits for the next job at a time; the others are spawning.
                    let Ok(Ok(mut job)) = rx.lock().map(|rx| rx.recv()) else {
                        return;
                    };
                    let _entered = job.handle.enter();
                    let _ = job.reply.send(job.cmd.spawn());
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "could not start a sandbox spawner thread");
            }
        }
        tx
    });
    let (reply, answer) = tokio::sync::oneshot::channel();
    let job = SpawnJob {
        handle: tokio::runtime::Handle::current(),
        cmd,
        reply,
    };
    let gone = || io::Error::other("the sandbox spawner threads are gone");
    sender.send(job).map_err(|_| gone())?;
    answer.await.unwrap_or_else(|_| Err(gone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_is_read_only_but_for_sized_mounts_and_has_no_network() {
        let etc = Path::new("/prepared/etc");
        let a: Vec<String> = args(&SandboxSettings::new().disk_bytes(8 << 20), etc)
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let joined = a.join(" ");
        for want in [
            "--unshare-all --unshare-user --disable-userns --die-with-parent --new-session",
            "--ro-bind /usr /usr",
            "--size 8388608 --tmpfs /workspace",
            "--size 8388608 --tmpfs /tmp",
            "--remount-ro /dev --remount-ro /",
            "--clearenv",
        ] {
            assert!(joined.contains(want), "{want} missing from {joined}");
        }
        assert!(joined.contains("--ro-bind /prepared/etc /etc"), "{joined}");
        assert!(!joined.contains("--share-net"));
        let host = args(&SandboxSettings::new().host_network(), etc);
        assert!(host.iter().any(|s| s == "--share-net"));
    }

    #[test]
    fn the_init_is_compact() {
        let s = init_script();
        assert!(!s.contains("# "), "{s}");
        assert!(s.starts_with("pid="), "{s}");
    }

    #[test]
    fn known_failures_name_their_fix() {
        let e = diagnose("bwrap: Can't mount proc on /newroot/proc: Operation not permitted");
        assert!(e.to_string().contains("procMount: Unmasked"), "{e}");
        let e = diagnose("bwrap: setting up uid map: Permission denied");
        assert!(e.to_string().contains("seccomp=unconfined"), "{e}");
        assert!(matches!(diagnose("bwrap: odd"), SandboxError::Start(_)));
    }
}
