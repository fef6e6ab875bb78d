//! An MCP server started as a program, spoken to over its stdin and stdout: the transport rmcp
//! drives, written here rather than taken from rmcp because rmcp drops a line it cannot use (one
//! over its length limit, or not JSON) and keeps waiting, so the call that wanted it hangs
//! until its timeout. Here such a line breaks the connection at once, saying what the server
//! sent and the limit it broke: the calls waiting on it fail with that reason (see
//! [`super::mcp`]), and the program is stopped.
//!
//! The program runs in its own process group, killed whole when the connection ends (or is
//! dropped, or the server shuts down), so neither it nor what it started outlives the episode.

use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::model::{ErrorCode, ErrorData, ServerJsonRpcMessage};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// Why a connection broke, when it was this side that broke it (shared with the calls).
pub(crate) type Broken = Arc<OnceLock<String>>;

/// How long a program whose input has ended gets to exit before its group is killed (the MCP
/// stdio shutdown: close its input, wait, kill). `ors mcp` deletes its ORS session then.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(2);

#[cfg(unix)]
type GroupKill = crate::process::GroupGuard;

/// Without process groups, the program alone is killed (its `Child` is `kill_on_drop`).
#[cfg(not(unix))]
struct GroupKill;

#[cfg(not(unix))]
impl GroupKill {
    fn kill_now(&mut self) {}
}

/// A started MCP server program: its input, its process, and its process group, which is
/// killed whole when it is ended, or dropped, whatever happened before.
pub(crate) struct Process {
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    child: tokio::sync::Mutex<Option<Child>>,
    group: Mutex<GroupKill>,
    ended: tokio::sync::OnceCell<()>,
}

impl Process {
    /// `SIGKILL` to every process of the group, now (idempotent).
    pub(crate) fn kill(&self) {
        if let Ok(mut g) = self.group.lock() {
            g.kill_now();
        }
    }

    /// End the program: close its input, give it [`STOP_GRACE`] to exit, then kill its
    /// group (what it started too). Every caller waits for the same ending.
    pub(crate) async fn end(&self) {
        self.ended
            .get_or_init(|| async {
                drop(self.stdin.lock().await.take());
                let child = self.child.lock().await.take();
                if let Some(mut child) = child {
                    let _ = tokio::time::timeout(STOP_GRACE, child.wait()).await;
                    self.kill();
                    let _ = tokio::time::timeout(STOP_GRACE, child.wait()).await;
                } else {
                    self.kill();
                }
            })
            .await;
    }

    /// Write one message, a line, to the program's input.
    async fn write_line(&self, mut line: Vec<u8>) -> std::io::Result<()> {
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        let Some(stdin) = stdin.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the MCP connection is closed",
            ));
        };
        stdin.write_all(&line).await?;
        stdin.flush().await
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Start `cmd` (stdin and stdout piped, stderr inherited) in a process group of its own: the
/// transport rmcp reads and writes, and the process to end.
pub(crate) fn start(
    mut cmd: tokio::process::Command,
    max_line: usize,
    broken: Broken,
) -> std::io::Result<(StdioTransport, Arc<Process>)> {
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd.spawn()?;
    #[cfg(unix)]
    let group = crate::process::GroupGuard(child.id());
    #[cfg(not(unix))]
    let group = GroupKill;
    let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
    let process = Arc::new(Process {
        stdin: tokio::sync::Mutex::new(stdin),
        child: tokio::sync::Mutex::new(Some(child)),
        group: Mutex::new(group),
        ended: tokio::sync::OnceCell::new(),
    });
    let Some(stdout) = stdout else {
        process.kill();
        return Err(std::io::Error::other("the program's stdout is not a pipe"));
    };
    let transport = StdioTransport {
        process: Arc::clone(&process),
        read: BufReader::new(stdout),
        line: Vec::new(),
        max_line,
        broken,
    };
    Ok((transport, process))
}

/// rmcp's view of the program: JSON-RPC messages, one a line, each at most `max_line` bytes.
pub(crate) struct StdioTransport {
    process: Arc<Process>,
    read: BufReader<ChildStdout>,
    /// The line being read; kept across a cancelled `receive` (rmcp polls it in a `select!`).
    line: Vec<u8>,
    max_line: usize,
    broken: Broken,
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // The connection is over (closed, cancelled or broken): end the program, giving it
        // the grace to exit on its own; without a runtime, kill it now.
        let process = Arc::clone(&self.process);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move { process.end().await });
            }
            Err(_) => process.kill(),
        }
    }
}

/// The line buffer kept between lines; one grown past it by a big line is freed.
const KEPT_LINE_CAPACITY: usize = 64 << 10;

/// What to do with a line that is not a message rmcp understands.
enum Unusable {
    /// Skip it (a notification of a kind rmcp does not know).
    Skip,
    /// Answer a request of a kind rmcp does not know with "method not found".
    Refuse(Value),
    /// The connection cannot go on.
    Break(String),
}

impl StdioTransport {
    /// Read one `\n`-terminated line into `self.line` (`false` at the end of the stream),
    /// never holding more than `max_line` bytes of it; the error is why the connection must
    /// break. Cancellation-safe: what was read stays in `self.line`, and the next call goes on.
    async fn read_line(&mut self) -> Result<bool, String> {
        // The newline itself does not count against the limit.
        let room = (self.max_line + 1).saturating_sub(self.line.len());
        let mut read = (&mut self.read).take(room as u64);
        if let Err(e) = read.read_until(b'\n', &mut self.line).await {
            return Err(format!("could not be read from: {e}"));
        }
        if self.line.ends_with(b"\n") {
            Ok(true)
        } else if self.line.len() > self.max_line {
            Err(format!(
                "sent a line (one JSON-RPC message) of more than {} bytes, the limit \
                 (McpServer::max_line_bytes)",
                self.max_line
            ))
        } else {
            Ok(false)
        }
    }

    /// Answer the server's request `id` (of a kind rmcp does not know) with "method not found",
    /// so a server waiting for the answer does not wait forever.
    fn refuse(&self, id: Value) {
        let answer = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "this client does not serve that method",
                None,
            ),
        });
        let process = Arc::clone(&self.process);
        tokio::spawn(async move { process.write_line(answer.to_string().into_bytes()).await });
    }

    /// Break the connection for `reason`: record it for the calls, stop the program; the
    /// stream's end (`None`), for `receive` to return.
    fn break_for(&mut self, reason: String) -> Option<RxJsonRpcMessage<RoleClient>> {
        tracing::warn!(reason = %reason, "closing the MCP connection");
        let _ = self.broken.set(reason);
        // A server that broke the protocol gets no grace.
        self.process.kill();
        None
    }
}

/// Judge a line rmcp could not parse as a server message.
fn unusable(line: &[u8], error: &serde_json::Error) -> Unusable {
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(obj)) if obj.contains_key("method") => match obj.get("id") {
            Some(id) => Unusable::Refuse(id.clone()),
            None => Unusable::Skip,
        },
        Ok(Value::Object(_)) => Unusable::Break(format!(
            "sent a response that is not a JSON-RPC response ({error})"
        )),
        Ok(other) => Unusable::Break(format!(
            "sent a line that is not a JSON-RPC message (a JSON {})",
            ors_core::types::json_kind(&other)
        )),
        Err(e) => Unusable::Break(format!(
            "sent a line that is not JSON ({e}; it starts: {})",
            // Its first bytes, on one line.
            ors_core::text::preview(&String::from_utf8_lossy(&line[..line.len().min(120)]), 120)
        )),
    }
}

impl Transport<RoleClient> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let process = Arc::clone(&self.process);
        async move {
            let line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            process.write_line(line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.read_line().await {
                Ok(true) => {}
                Ok(false) => return None,
                Err(reason) => return self.break_for(reason),
            }
            let line = std::mem::take(&mut self.line);
            let text = line.trim_ascii();
            let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
            // A blank line is skipped.
            let parsed = (!text.trim_ascii().is_empty()).then(|| {
                serde_json::from_slice::<ServerJsonRpcMessage>(text).map_err(|e| unusable(text, &e))
            });
            // Keep the buffer for the next line, unless a big one grew it.
            if line.capacity() <= KEPT_LINE_CAPACITY {
                self.line = line;
                self.line.clear();
            }
            match parsed {
                None => {}
                Some(Ok(msg)) => return Some(msg),
                Some(Err(Unusable::Skip)) => {
                    tracing::debug!("skipping a notification of a kind rmcp does not know");
                }
                Some(Err(Unusable::Refuse(id))) => self.refuse(id),
                Some(Err(Unusable::Break(reason))) => return self.break_for(reason),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // The program sees its input end; the drop of this transport ends it.
        drop(self.process.stdin.lock().await.take());
        Ok(())
    }
}
