//! A running bubblewrap sandbox, seen from the server: requests written to its init's standard
//! input, each command's output read from the init's stdout and stderr up to the markers the
//! init writes once the command's processes are all gone ([`Live::run`]), and `SIGUSR1` to the
//! init to stop a command early. See `init.sh` for the other side.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::{oneshot, watch};

use super::{script, Exec, Instance, Ran, SandboxError};
use crate::env::ToolContext;
use crate::process::capture::{Capture, CHUNK};
use crate::process::{kill, Exit};

/// How long the init may take to confirm that a stopped command's processes are gone, and to
/// exit at shutdown, before the whole sandbox is killed instead.
const GRACE: Duration = Duration::from_secs(5);

/// A sandbox's init and its streams.
pub(crate) struct Live {
    /// The init's PID on the host (bwrap's `child-pid`).
    init_pid: u32,
    stdin: ChildStdin,
    stdout: Stream<ChildStdout>,
    stderr: Stream<ChildStderr>,
    /// Turns `true` once bwrap has exited, which it does after its child, the init (PID 1 of
    /// the sandbox), has: and the kernel ends PID 1 only once every process of its namespace
    /// is gone.
    exited: watch::Receiver<bool>,
    /// Sending (or dropping) it kills bwrap, and with it the sandbox.
    kill: Option<oneshot::Sender<()>>,
    /// The nonce of a command whose call was dropped before its end was read.
    pending: Option<String>,
    /// Whether `SIGUSR1` was sent since the init last read a request: a signal that reaches
    /// it after the command it was meant for ended would stop the next one, so the next
    /// command is preceded by an empty one that takes it ([`Live::settle`]).
    signalled: bool,
}

impl Live {
    pub(crate) fn new(
        mut child: Child,
        init_pid: u32,
        stdin: ChildStdin,
        stdout: ChildStdout,
        stderr: ChildStderr,
    ) -> Self {
        let (exited_tx, exited) = watch::channel(false);
        let (kill, kill_rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            tokio::select! {
                _ = child.wait() => {}
                _ = kill_rx => {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
            }
            let _ = exited_tx.send(true);
        });
        Self {
            init_pid,
            stdin,
            stdout: Stream::new(stdout),
            stderr: Stream::new(stderr),
            exited,
            kill: Some(kill),
            pending: None,
            signalled: false,
        }
    }

    /// Read both streams to the markers of `nonce`, discarding the output: the end of a
    /// command whose call was dropped (it was sent `SIGUSR1` then).
    async fn recover(&mut self, nonce: &str) -> Result<(), SandboxError> {
        signal(self.init_pid, "USR1", &self.exited).await;
        self.signalled = true;
        match tokio::time::timeout(GRACE, self.skip_to(nonce)).await {
            Ok(true) => Ok(()),
            Ok(false) => broken("its init ended while stopping an abandoned command"),
            Err(_) => Err(SandboxError::Broken(format!(
                "an abandoned command's processes were not confirmed gone within {} s",
                GRACE.as_secs()
            ))),
        }
    }

    /// Run an empty command, so that every `SIGUSR1` sent so far has reached the init (each
    /// was delivered before this request is read) and its trap has run (within this
    /// command's processing, which it can only skip), before a real command starts.
    async fn settle(&mut self) -> Result<(), SandboxError> {
        let nonce = nonce();
        let request = format!("{nonce} 1 0\n:\n");
        let exchange = async {
            self.stdin.write_all(request.as_bytes()).await.is_ok()
                && self.stdin.flush().await.is_ok()
                && self.skip_to(&nonce).await
        };
        match tokio::time::timeout(GRACE, exchange).await {
            Ok(true) => {
                self.signalled = false;
                Ok(())
            }
            _ => broken("its init did not answer after a command was stopped"),
        }
    }

    /// Read both streams to the markers of `nonce`, discarding the output; whether both came
    /// (rather than the streams' end).
    async fn skip_to(&mut self, nonce: &str) -> bool {
        let detached = ToolContext::detached();
        let mut out = Capture::new("stdout", 0, &detached);
        let mut err = Capture::new("stderr", 0, &detached);
        matches!(
            tokio::join!(
                self.stdout.until(nonce, &mut out),
                self.stderr.until(nonce, &mut err)
            ),
            (Ok(Some(_)), Ok(Some(_)))
        )
    }

    async fn run_inner(&mut self, exec: &Exec, ctx: &ToolContext) -> Result<Ran, SandboxError> {
        if *self.exited.borrow() {
            return broken("it had exited");
        }
        if let Some(old) = self.pending.take() {
            self.recover(&old).await?;
        }
        if self.signalled {
            self.settle().await?;
        }
        let nonce = nonce();
        let request = script::request(&nonce, exec)?;
        self.pending = Some(nonce.clone());
        let guard = Abandon {
            pid: self.init_pid,
            exited: self.exited.clone(),
            armed: true,
        };
        let started = Instant::now();
        let mut out = Capture::new("stdout", exec.max_output, ctx);
        let mut err = Capture::new("stderr", exec.max_output, ctx);
        let (stdin, stdout, stderr) = (&mut self.stdin, &mut self.stdout, &mut self.stderr);
        let (init_pid, exited) = (self.init_pid, &self.exited);
        let mut stopped: Option<Exit> = None;
        let tail = {
            let exchange = async {
                if stdin.write_all(&request).await.is_err() || stdin.flush().await.is_err() {
                    return Err("its init no longer reads requests".to_owned());
                }
                let (o, e) = tokio::join!(
                    stdout.until(&nonce, &mut out),
                    stderr.until(&nonce, &mut err)
                );
                match (o, e) {
                    (Ok(Some(tail)), Ok(Some(_))) => Ok(tail),
                    _ => Err("its init ended while a command ran".to_owned()),
                }
            };
            tokio::pin!(exchange);
            let deadline = tokio::time::sleep(exec.timeout);
            tokio::pin!(deadline);
            loop {
                // Stopped at the timeout or the call's cancellation: the init is asked to stop
                // the command, and given GRACE to confirm that its processes are gone.
                stopped = Some(tokio::select! {
                    r = &mut exchange => break r,
                    () = &mut deadline => {
                        if stopped.is_some() {
                            break Err(format!(
                                "a stopped command's processes were not confirmed gone within \
                                 {} s",
                                GRACE.as_secs()
                            ));
                        }
                        Exit::TimedOut
                    }
                    () = ctx.cancelled(), if stopped.is_none() => Exit::Cancelled,
                });
                signal(init_pid, "USR1", exited).await;
                deadline.as_mut().reset(tokio::time::Instant::now() + GRACE);
            }
        };
        let tail = tail.map_err(SandboxError::Broken)?;
        guard.disarm();
        self.pending = None;
        self.signalled |= stopped.is_some();
        let status: i32 = String::from_utf8_lossy(&tail)
            .split_whitespace()
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(-1);
        let exit = stopped.unwrap_or(match status {
            // The shell's reading of a process a signal ended: 128 + the signal.
            129..=192 => Exit::Signal(status - 128),
            s => Exit::Code(s),
        });
        let ((stdout, stdout_dropped), (stderr, stderr_dropped)) =
            (out.into_parts(), err.into_parts());
        Ok(Ran {
            exit,
            stdout,
            stdout_dropped,
            stderr,
            stderr_dropped,
            duration: started.elapsed(),
        })
    }

    async fn stop(mut self) -> Result<(), SandboxError> {
        if self.pending.is_some() {
            signal(self.init_pid, "USR1", &self.exited).await;
        }
        // The end of its input ends the init, after it killed what was left; bwrap follows.
        let _ = self.stdin.shutdown().await;
        drop(self.stdin);
        let mut exited = self.exited.clone();
        // GRACE to exit on its own, then GRACE more once the init is killed.
        for kill in [false, true] {
            if kill {
                tracing::warn!(
                    pid = self.init_pid,
                    "a sandbox's init did not exit; killing it"
                );
                signal(self.init_pid, "KILL", &self.exited).await;
            }
            let gone = tokio::time::timeout(GRACE, exited.wait_for(|e| *e)).await;
            if gone.is_ok() {
                return Ok(());
            }
        }
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
        let _ = exited.wait_for(|e| *e).await;
        broken("it did not stop when asked and was killed")
    }
}

impl Instance for Live {
    fn run<'a>(
        &'a mut self,
        exec: &'a Exec,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Ran, SandboxError>> {
        Box::pin(self.run_inner(exec, ctx))
    }

    fn shutdown(self: Box<Self>) -> BoxFuture<'static, Result<(), SandboxError>> {
        Box::pin(self.stop())
    }
}

/// Stops a command whose call is dropped before its end was read (the next use of the
/// sandbox then reads that end first).
struct Abandon {
    pid: u32,
    exited: watch::Receiver<bool>,
    armed: bool,
}

impl Abandon {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if self.armed && !*self.exited.borrow() {
            let _ = kill("USR1", &self.pid.to_string()).status();
        }
    }
}

/// The error of a sandbox that broke for `reason`.
fn broken<T>(reason: &str) -> Result<T, SandboxError> {
    Err(SandboxError::Broken(reason.to_owned()))
}

/// Send `signal` to the init through `kill(1)` (no `unsafe` `kill(2)`), unless bwrap has
/// exited: then the PID may already be another process's.
async fn signal(pid: u32, signal: &str, exited: &watch::Receiver<bool>) {
    if *exited.borrow() {
        return;
    }
    let mut cmd = tokio::process::Command::from(kill(signal, &pid.to_string()));
    if let Err(e) = cmd.status().await {
        tracing::warn!(pid, error = %e, "could not run kill(1) on a sandbox's init");
    }
}

/// 32 hex digits no command can guess: the keys of std's per-process random hasher, a
/// counter and the clock.
fn nonce() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let part = |salt: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt ^ n);
        h.write_u64(nanos);
        h.finish()
    };
    format!("{:016x}{:016x}", part(0x5a5a), part(0xa5a5))
}

/// One of the init's output streams, read across commands.
struct Stream<R> {
    reader: R,
    /// Bytes read and not yet handed on.
    buf: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Stream<R> {
    fn new(reader: R) -> Self {
        Self {
            reader,
            buf: Vec::with_capacity(CHUNK),
        }
    }

    /// Hand everything before `nonce` to `capture`, and return the rest of the marker's line;
    /// `None` when the stream ended first.
    async fn until(
        &mut self,
        nonce: &str,
        capture: &mut Capture<'_>,
    ) -> std::io::Result<Option<Vec<u8>>> {
        let finder = memchr::memmem::Finder::new(nonce.as_bytes());
        let marker = nonce.as_bytes();
        let mut chunk = vec![0u8; CHUNK];
        loop {
            // Everything before the marker is output now (a line is sent as progress as soon
            // as it ends); without a marker, all but what could be the start of one.
            let upto = finder
                .find(&self.buf)
                .unwrap_or_else(|| self.buf.len() - marker_start(&self.buf, marker));
            capture.push(&self.buf[..upto]);
            self.buf.drain(..upto);
            if self.buf.starts_with(marker) {
                if let Some(nl) = memchr::memchr(b'\n', &self.buf[marker.len()..]) {
                    let tail = self.buf[marker.len()..marker.len() + nl].to_vec();
                    self.buf.drain(..marker.len() + nl + 1);
                    capture.finish();
                    return Ok(Some(tail));
                }
            }
            let n = self.reader.read(&mut chunk).await?;
            if n == 0 {
                capture.finish();
                return Ok(None);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// The length of the longest end of `buf` that `nonce` starts with (shorter than `nonce`).
fn marker_start(buf: &[u8], nonce: &[u8]) -> usize {
    (1..nonce.len().min(buf.len() + 1))
        .rev()
        .find(|&k| buf.ends_with(&nonce[..k]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_possible_marker_start_is_held_back() {
        assert_eq!(marker_start(b"up\n", b"abc"), 0);
        assert_eq!(marker_start(b"xxab", b"abc"), 2);
        assert_eq!(marker_start(b"a", b"abc"), 1);
        assert_eq!(marker_start(b"", b"abc"), 0);
    }

    #[tokio::test]
    async fn markers_are_found_across_reads_and_output_before_them_kept() {
        let (mut w, r) = tokio::io::duplex(8);
        let writer = tokio::spawn(async move {
            w.write_all(b"hello wor").await.unwrap();
            w.write_all(b"ldNONCE-1234 0 0\nnext").await.unwrap();
            w.write_all(b"NONCE-5678 1 1\n").await.unwrap();
        });
        let mut s = Stream::new(r);
        let ctx = ToolContext::detached();
        let mut c = Capture::new("stdout", 100, &ctx);
        let tail = s.until("NONCE-1234", &mut c).await.unwrap().unwrap();
        assert_eq!(tail, b" 0 0");
        assert_eq!(c.text(), "hello world");
        let mut c = Capture::new("stdout", 100, &ctx);
        let tail = s.until("NONCE-5678", &mut c).await.unwrap().unwrap();
        assert_eq!(tail, b" 1 1");
        assert_eq!(c.text(), "next");
        writer.await.unwrap();
        let mut c = Capture::new("stdout", 100, &ctx);
        assert_eq!(s.until("NONCE-9", &mut c).await.unwrap(), None);
    }

    #[test]
    fn nonces_differ() {
        assert_ne!(nonce(), nonce());
        assert_eq!(nonce().len(), 32);
    }
}
