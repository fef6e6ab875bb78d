//! `ors_runtime::sandbox` against Debian's real bubblewrap: each escape an agent's command
//! would try without a sandbox (and that succeeds with `Program::run`) fails in one, every
//! limit is named when a command runs into it, and nothing a command started outlives it.
//! Installs bubblewrap with apt-get when it is missing and this runs as root.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

mod support;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ors_runtime::process::{Exit, LimitExceeded, Limits, Program};
use ors_runtime::sandbox::{Sandbox, SandboxError, SandboxSettings, Sandboxes, WORKSPACE};
use ors_runtime::ToolContext;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// bwrap, installed once if it is missing.
fn ensure_bwrap() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let found = std::process::Command::new("bwrap")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            eprintln!("sandbox tests: bwrap is missing; installing Debian's bubblewrap");
            let _ = std::process::Command::new("apt-get").arg("update").status();
            let ok = std::process::Command::new("apt-get")
                .args(["install", "-y", "--no-install-recommends", "bubblewrap"])
                .status()
                .is_ok_and(|s| s.success());
            assert!(
                ok,
                "could not install bubblewrap (run as root, or install it)"
            );
        }
    });
}

fn sandboxes(settings: SandboxSettings) -> Sandboxes {
    ensure_bwrap();
    Sandboxes::new(settings).unwrap_or_else(|e| panic!("{e}"))
}

fn default_sandboxes() -> &'static Sandboxes {
    static S: OnceLock<Sandboxes> = OnceLock::new();
    S.get_or_init(|| sandboxes(SandboxSettings::new()))
}

async fn sh(sandbox: &Sandbox, command: &str) -> ors_runtime::process::Finished {
    Program::shell(command)
        .timeout(Duration::from_secs(60))
        .run_in(sandbox, &ToolContext::detached())
        .await
        .unwrap()
}

/// A context whose progress lines arrive on a channel, and its cancellation.
fn watched() -> (
    ToolContext,
    tokio::sync::mpsc::UnboundedReceiver<String>,
    CancellationToken,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let token = CancellationToken::new();
    let ctx = ToolContext::new(
        "s",
        "c",
        token.clone(),
        Some(Arc::new(move |v: Value| {
            let _ = tx.send(v["line"].as_str().unwrap_or_default().to_owned());
        })),
    );
    (ctx, rx, token)
}

async fn line(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>, want: &str) {
    while let Some(l) = rx.recv().await {
        if l == want {
            return;
        }
    }
    panic!("the command never printed {want}");
}

#[tokio::test]
async fn a_host_file_outside_the_episode_cannot_be_read() {
    // A file of the server's, as an agent would look for one.
    let secret = std::env::temp_dir().join(format!("ors-sandbox-secret-{}", std::process::id()));
    std::fs::write(&secret, "hunter2").unwrap();
    // Without a sandbox the command reads it.
    let bare = Program::new("cat")
        .arg(&secret)
        .run(&ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(bare.stdout, "hunter2");
    let sandbox = default_sandboxes().sandbox();
    let done = sh(
        &sandbox,
        &format!(
            "cat {} /etc/machine-id /etc/shadow; ls /home /root /var /srv /opt /work /sys",
            secret.display()
        ),
    )
    .await;
    std::fs::remove_file(&secret).unwrap();
    assert!(!done.stdout.contains("hunter2"), "{}", done.report());
    assert_eq!(done.stdout, "", "{}", done.report());
    assert!(done.stderr.contains("No such file"), "{}", done.report());
    let root = sh(&sandbox, "ls /").await;
    for entry in root.stdout.lines() {
        assert!(
            [
                "bin",
                "dev",
                "etc",
                "lib",
                "lib32",
                "lib64",
                "libx32",
                "proc",
                "run",
                "sbin",
                "tmp",
                "usr",
                "workspace"
            ]
            .contains(&entry),
            "the sandbox's root shows {entry}: {}",
            root.report()
        );
    }
    // Its /etc names its own host and users, not the host's.
    let etc = sh(&sandbox, "cat /etc/hostname; cut -d: -f1 /etc/passwd").await;
    assert_eq!(
        etc.stdout,
        "sandbox\nroot\nsandbox\nnobody\n",
        "{}",
        etc.report()
    );
    // What is there works: python3 from the host's /usr.
    let done = sh(&sandbox, "python3 -c 'print(6 * 7)'").await;
    assert_eq!(done.stdout, "42\n", "{}", done.report());
    sandbox.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_server_on_loopback_is_unreachable_unless_the_host_network_is_opted_in() {
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = server.local_addr().unwrap().port();
    let probe = format!(
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5); \
         print(\"connected\")'"
    );
    let sandbox = default_sandboxes().sandbox();
    let done = sh(&sandbox, &probe).await;
    assert!(!done.stdout.contains("connected"), "{}", done.report());
    assert!(
        done.stderr.contains("Connection refused"),
        "{}",
        done.report()
    );
    // Its own loopback works: a server inside the sandbox can be reached from inside.
    let own = sh(
        &sandbox,
        "python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); \
         s.listen(); socket.create_connection(s.getsockname(), 5); print(\"own\")'",
    )
    .await;
    assert_eq!(own.stdout, "own\n", "{}", own.report());
    sandbox.shutdown().await.unwrap();

    let host = sandboxes(SandboxSettings::new().host_network()).sandbox();
    let accept = tokio::spawn(async move { server.accept().await.is_ok() });
    let done = sh(&host, &probe).await;
    assert_eq!(done.stdout, "connected\n", "{}", done.report());
    assert!(accept.await.unwrap());
    host.shutdown().await.unwrap();
}

#[tokio::test]
async fn another_live_episode_and_what_it_wrote_outside_its_workspace_are_invisible() {
    // Without a sandbox, one episode's working directory is a path another can read.
    let dir = ors_runtime::process::WorkDir::create("ors-sandbox-episode-").unwrap();
    std::fs::write(dir.path().join("mine.txt"), "theirs").unwrap();
    let bare = Program::new("cat")
        .arg(dir.path().join("mine.txt"))
        .run(&ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(bare.stdout, "theirs");
    drop(dir);
    let (a, b) = (default_sandboxes().sandbox(), default_sandboxes().sandbox());
    let token = format!("ors-token-{}", std::process::id());
    let wrote = sh(
        &a,
        &format!(
            "echo {token} > mine.txt; echo {token} > /tmp/{token}; echo {token} > \
             /dev/shm/{token}; pwd"
        ),
    )
    .await;
    assert!(wrote.success(), "{}", wrote.report());
    let at = wrote.stdout.trim();
    assert_eq!(at, WORKSPACE);
    let looked = sh(
        &b,
        &format!(
            "cat {at}/mine.txt /tmp/{token} /dev/shm/{token}; grep -rs {token} /tmp /dev/shm \
             /run {WORKSPACE}"
        ),
    )
    .await;
    assert!(!looked.stdout.contains(&token), "{}", looked.report());
    // Nor did any of it land on the host.
    for dir in ["/tmp", "/dev/shm"] {
        assert!(!std::path::Path::new(dir).join(&token).exists(), "{dir}");
    }
    // The writer still has its files: they last for the episode.
    let again = sh(&a, &format!("cat mine.txt /tmp/{token}")).await;
    assert_eq!(again.stdout, format!("{token}\n{token}\n"));
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test]
async fn nothing_outside_the_writable_mounts_can_be_written() {
    let sandbox = default_sandboxes().sandbox();
    let done = sh(
        &sandbox,
        "for f in /x /usr/x /usr/local/x /etc/x /bin/x /dev/x /proc/x; do \
         touch $f 2>/dev/null && echo wrote $f; done; echo checked",
    )
    .await;
    assert_eq!(done.stdout, "checked\n", "{}", done.report());
    sandbox.shutdown().await.unwrap();
}

#[tokio::test]
async fn no_process_outlives_its_command_not_even_a_detached_one() {
    // Without a sandbox, a `setsid` daemon escapes the process group that is killed. It
    // writes its pid once it runs in its own session, and the command waits for that (up to
    // 30 s) before it ends: the group is killed when it ends, and a daemon still between
    // fork and setsid would die with it.
    let pidfile = std::env::temp_dir().join(format!("ors-sandbox-escaped-{}", std::process::id()));
    let _ = std::fs::remove_file(&pidfile);
    Program::shell(format!(
        "setsid sh -c 'echo $$ > {0}.tmp && mv {0}.tmp {0} && exec sleep 987.6540' >/dev/null 2>&1 & \
         i=0; while [ ! -s {0} ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done",
        pidfile.display()
    ))
    .run(&ToolContext::detached())
    .await
    .unwrap();
    let escaped = std::fs::read_to_string(&pidfile)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .expect("the control daemon never started");
    let _ = std::fs::remove_file(&pidfile);
    let survived = support::running(escaped);
    std::process::Command::new("kill")
        .arg(escaped.to_string())
        .status()
        .unwrap();
    assert!(survived, "the control daemon did not survive its command");
    let sandbox = default_sandboxes().sandbox();
    let marker = "987.6541";
    let done = sh(
        &sandbox,
        &format!(
            "setsid sleep {marker} & nohup sleep {marker} >/dev/null 2>&1 & (sleep {marker} &); \
             echo started"
        ),
    )
    .await;
    assert_eq!(done.stdout, "started\n", "{}", done.report());
    // The call returned once the sandbox confirmed them gone: no waiting here.
    assert_eq!(support::running_with(marker), Vec::<u32>::new());
    // Nor does the sandbox's own process table show them.
    let inside = sh(&sandbox, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '").await;
    assert!(
        inside.stdout.contains("ors-sandbox-init"),
        "{}",
        inside.report()
    );
    assert!(!inside.stdout.contains(marker), "{}", inside.report());
    sandbox.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_timeout_or_a_cancellation_stops_everything_and_the_sandbox_lives_on() {
    let sandbox = default_sandboxes().sandbox();
    sh(&sandbox, "echo kept > file").await;
    let marker = "987.6542";
    let done = Program::shell(format!("setsid sleep {marker} & sleep {marker}"))
        .timeout(Duration::from_millis(300))
        .run_in(&sandbox, &ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(done.exit, Exit::TimedOut);
    assert_eq!(
        done.limit,
        Some(LimitExceeded::Time(Duration::from_millis(300)))
    );
    assert!(
        done.limit_error()
            .unwrap()
            .starts_with("the command exceeded the time limit of 0.3 s"),
        "{:?}",
        done.limit_error()
    );
    assert_eq!(support::running_with(marker), Vec::<u32>::new());

    let (ctx, mut lines, token) = watched();
    let marker = "987.6543";
    let cmd = format!("setsid sleep {marker} & echo up; sleep {marker}");
    let run = async { Program::shell(&cmd).run_in(&sandbox, &ctx).await };
    let cancel = async {
        line(&mut lines, "up").await;
        token.cancel();
    };
    let (done, ()) = tokio::join!(run, cancel);
    assert_eq!(done.unwrap().exit, Exit::Cancelled);
    assert_eq!(support::running_with(marker), Vec::<u32>::new());
    // The workspace survived both.
    assert_eq!(sh(&sandbox, "cat file").await.stdout, "kept\n");
    sandbox.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_dropped_call_stops_its_command_before_the_next_one_runs() {
    let sandbox = Arc::new(default_sandboxes().sandbox());
    let (ctx, mut lines, _token) = watched();
    let marker = "987.6544";
    let task = {
        let sandbox = Arc::clone(&sandbox);
        tokio::spawn(async move {
            Program::shell(format!("setsid sleep {marker} & echo up; sleep {marker}"))
                .run_in(&sandbox, &ctx)
                .await
        })
    };
    line(&mut lines, "up").await;
    task.abort();
    let _ = task.await;
    // The next command first reads the dropped one's end: both sleeps are gone by then.
    let next = sh(&sandbox, "echo next").await;
    assert_eq!(next.stdout, "next\n");
    assert_eq!(support::running_with(marker), Vec::<u32>::new());
    sandbox.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_process_limit_stops_a_fork_flood_and_is_named() {
    let sandbox = sandboxes(SandboxSettings::new().limits(Limits {
        processes: Some(40),
        ..Limits::default()
    }))
    .sandbox();
    let marker = "987.6545";
    let done = sh(
        &sandbox,
        &format!("i=0; while [ $i -lt 300 ]; do sleep {marker} & i=$((i + 1)); echo $i; done"),
    )
    .await;
    // The shell gives up at the first fork the kernel refuses; the last number is how many ran.
    let counted: u32 = done.stdout.lines().last().unwrap().parse().unwrap();
    assert!(
        (10..40).contains(&counted),
        "{counted} processes ran: {}",
        done.report()
    );
    assert_eq!(
        done.limit,
        Some(LimitExceeded::Processes(40)),
        "{}",
        done.report()
    );
    assert_eq!(support::running_with(marker), Vec::<u32>::new());
    sandbox.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_servers_environment_is_nowhere_to_be_read() {
    // Cargo gives the test (the "server") CARGO_PKG_NAME; no command may see it.
    assert!(std::env::var("CARGO_PKG_NAME").is_ok());
    // Without a sandbox a clean environment is not enough: the server's is in /proc.
    let bare = Program::shell("cat /proc/$PPID/environ")
        .run(&ToolContext::detached())
        .await
        .unwrap();
    assert!(bare.stdout.contains("CARGO_PKG_NAME"), "{}", bare.report());
    let sandbox = default_sandboxes().sandbox();
    let done = sh(
        &sandbox,
        "env; cat /proc/[0-9]*/environ | tr '\\0' '\\n'; id -u",
    )
    .await;
    assert!(!done.stdout.contains("CARGO_PKG_NAME"), "{}", done.report());
    let names: std::collections::BTreeSet<&str> = done
        .stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    let allowed = [
        "HOME", "LANG", "PATH", "PWD", "TMPDIR", "SHLVL", "_", "OLDPWD",
    ];
    assert!(names.iter().all(|n| allowed.contains(n)), "{names:?}");
    // Not the server's user inside; and on the host not root when the server is.
    assert_eq!(done.stdout.lines().last(), Some("1000"));
    sandbox.shutdown().await.unwrap();
}

#[tokio::test]
async fn commands_run_as_another_host_user_when_the_server_is_root() {
    let (ctx, mut lines, token) = watched();
    let sandbox = default_sandboxes().sandbox();
    let marker = "987.6546";
    let cmd = format!("echo up; sleep {marker}");
    let run = async { Program::shell(&cmd).run_in(&sandbox, &ctx).await };
    let look = async {
        line(&mut lines, "up").await;
        // The shell forks `sleep` after it printed: wait (bounded) until it has exec'd.
        let mut pids = support::running_with(marker);
        for _ in 0..3000 {
            if !pids.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            pids = support::running_with(marker);
        }
        let uids: Vec<Option<u32>> = pids.iter().map(|p| support::uid_of(*p)).collect();
        token.cancel();
        uids
    };
    let (_, uids) = tokio::join!(run, look);
    assert!(!uids.is_empty());
    let me = support::uid_of(std::process::id()).unwrap();
    let want = if me == 0 { 65534 } else { me };
    assert!(uids.iter().all(|u| *u == Some(want)), "{uids:?}");
    sandbox.shutdown().await.unwrap();
}

#[tokio::test]
async fn each_limit_is_named_when_a_command_runs_into_it() {
    let sandboxes = sandboxes(SandboxSettings::new().disk_bytes(4 << 20).limits(Limits {
        cpu_secs: Some(1),
        memory_bytes: Some(256 << 20),
        processes: Some(64),
    }));
    let sandbox = sandboxes.sandbox();
    let cpu = sh(&sandbox, "while :; do :; done").await;
    assert_eq!(cpu.limit, Some(LimitExceeded::Cpu(1)), "{}", cpu.report());
    let mem = sh(&sandbox, "python3 -c 'x = bytearray(1 << 30)'").await;
    assert_eq!(
        mem.limit,
        Some(LimitExceeded::Memory(256 << 20)),
        "{}",
        mem.report()
    );
    let disk = sh(&sandbox, "head -c 8M /dev/zero > big").await;
    assert_eq!(
        disk.limit,
        Some(LimitExceeded::Disk(4 << 20)),
        "{}",
        disk.report()
    );
    let out = Program::shell("head -c 100000 /dev/zero | tr '\\0' x")
        .max_output_bytes(1000)
        .run_in(&sandbox, &ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(out.limit, Some(LimitExceeded::Output(1000)));
    assert_eq!(
        out.stdout.len(),
        1000 + "\n[... output truncated at the 1000 B limit: 99000 more bytes]\n".len()
    );
    let fine = sh(&sandbox, "rm big; echo fine").await;
    assert_eq!((fine.limit, fine.stdout.as_str()), (None, "fine\n"));
    sandbox.shutdown().await.unwrap();
}

#[tokio::test]
async fn files_stay_in_the_workspace_and_links_lead_nowhere_outside() {
    let sandbox = default_sandboxes().sandbox();
    assert!(
        !sandbox.is_started(),
        "a sandbox starts with its first command"
    );
    sandbox.write_file("pkg/a.py", b"x = 1\n").await.unwrap();
    assert!(sandbox.is_started());
    let read = sandbox.read_file("pkg/a.py", 100).await.unwrap();
    assert_eq!((read.bytes.as_slice(), read.size), (&b"x = 1\n"[..], 6));
    let cut = sandbox.read_file("pkg/a.py", 2).await.unwrap();
    assert_eq!((cut.bytes.as_slice(), cut.size), (&b"x "[..], 6));
    // A link to a host file reads the sandbox's view: not the host's /etc/passwd.
    sh(&sandbox, "ln -s /etc/passwd users; ln -s /root/.bashrc rc").await;
    let users = sandbox.read_file("users", 1000).await.unwrap();
    let host = std::fs::read_to_string("/etc/passwd").unwrap();
    assert_ne!(users.bytes, host.as_bytes());
    assert!(String::from_utf8_lossy(&users.bytes).starts_with("root:x:0:0:root:/root"));
    let err = sandbox.read_file("rc", 100).await.unwrap_err();
    assert!(err.to_string().contains("not a file"), "{err}");
    for bad in ["/etc/passwd", "../x"] {
        assert!(matches!(
            sandbox.write_file(bad, b"x").await,
            Err(SandboxError::File { .. })
        ));
    }
    // A fresh sandbox gets a copy of the files; later changes to one do not reach the other.
    let grader = default_sandboxes().sandbox();
    sandbox.copy_workspace_to(&grader).await.unwrap();
    sandbox.write_file("pkg/a.py", b"x = 2\n").await.unwrap();
    let copied = grader.read_file("pkg/a.py", 100).await.unwrap();
    assert_eq!(copied.bytes, b"x = 1\n");
    grader.shutdown().await.unwrap();
    sandbox.shutdown().await.unwrap();
}

#[tokio::test]
async fn teardown_removes_every_process_and_the_workspace() {
    let sandbox = default_sandboxes().sandbox();
    sh(&sandbox, "echo data > f").await;
    sandbox.shutdown().await.unwrap();
    assert!(!sandbox.is_started());
    // Started again, it is a new sandbox: the file went with the old one.
    let again = sh(&sandbox, "cat f").await;
    assert!(again.stderr.contains("No such file"), "{}", again.report());
    sandbox.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_server_refuses_to_start_without_bwrap_naming_the_fix() {
    let err = Sandboxes::new(SandboxSettings::new().bwrap("/nonexistent/bwrap")).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("/nonexistent/bwrap does not exist"), "{text}");
    assert!(text.contains("apt-get install bubblewrap"), "{text}");
    // A bwrap the kernel refuses (here a stand-in that says what a blocked one says).
    let dir = tempdir();
    let fake = dir.join("bwrap");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n",
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", fake.to_str().unwrap()])
        .status()
        .unwrap();
    let err = Sandboxes::new(SandboxSettings::new().bwrap(&fake)).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("setting up uid map"), "{text}");
    assert!(text.contains("seccomp=unconfined"), "{text}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A fresh directory readable by the sandbox's host user (nobody, when tests run as root).
fn tempdir() -> std::path::PathBuf {
    static N: Mutex<u32> = Mutex::new(0);
    let mut n = N.lock().unwrap();
    *n += 1;
    let dir = std::env::temp_dir().join(format!("ors-sandbox-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn a_shell_command_sees_nothing_of_the_init_that_runs_it() {
    // A shell command runs in the init's own subshell: a command that could read the nonce
    // marking its end could fake that end and outlive it.
    let sandbox = default_sandboxes().sandbox();
    let done = sh(
        &sandbox,
        "set; echo \"args=$#\"; command -v gone || echo no-function",
    )
    .await;
    assert!(done.stdout.contains("args=0"), "{}", done.report());
    assert!(done.stdout.contains("no-function"), "{}", done.report());
    for name in ["nonce", "script", "lines", "cancelled", "stdin"] {
        assert!(
            !done
                .stdout
                .lines()
                .any(|l| l.starts_with(&format!("{name}="))),
            "{name} is visible: {}",
            done.report()
        );
    }
    sandbox.shutdown().await.unwrap();
}
