//! The public [`Server`] builder, the accept loop on hyper's HTTP/1 connection driver, the
//! idle-session reaper, and graceful shutdown.

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use ors_runtime::env::{DynEnvironment, EnvHandle, Environment};
use tokio::net::{TcpListener, TcpSocket};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::app::{names, App};
use crate::config::ServerConfig;
use crate::connection::{Activity, Connections};
use crate::error::{ApiError, ServerError};
use crate::ops::{Signal, Signals};
use crate::session::Ending;
use crate::stats::ServerStats;

/// Builder methods that set the config field of their name to the value given.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($arg:ident: $ty:ty) = $value:expr;)*) => {$(
        $(#[$doc])*
        pub fn $name(mut self, $arg: $ty) -> Self {
            self.config.$name = $value;
            self
        }
    )*};
}

/// Builds and runs an ORS server for one or more environments; the first registered one is
/// the default that env-less paths (`/tools`, `/call`, ...) reach.
///
/// Tool calls on one session run one at a time, in the order they arrived (the episode is
/// `&mut`); different sessions run in parallel.
pub struct Server {
    config: ServerConfig,
    envs: Vec<Arc<dyn DynEnvironment>>,
}

impl Default for Server {
    fn default() -> Self {
        Self::new()
    }
}

impl Server {
    /// A server with the default [`ServerConfig`] and no environments yet.
    pub fn new() -> Self {
        Self::with_config(ServerConfig::default())
    }

    /// A server with the given settings and no environments yet.
    pub fn with_config(config: ServerConfig) -> Self {
        Self {
            config,
            envs: Vec::new(),
        }
    }

    /// Serve the environment `E`, which has no start-up state (or whose state is its
    /// `Default`), under its name. The first environment served is the default.
    pub fn environment<E: Environment>(self) -> Self
    where
        E::State: Default,
    {
        self.environment_handle(Arc::new(EnvHandle::<E>::default()))
    }

    /// Serve the environment `E` with its start-up state, under its name: what its splits,
    /// tasks and episodes see (a data set opened from the command line, a client, the tools of
    /// an MCP server).
    ///
    /// ```
    /// use ors_server::prelude::*;
    ///
    /// #[wire]
    /// struct Task { question: String }
    ///
    /// /// What the environment is started with: the word it answers.
    /// struct Word(String);
    ///
    /// struct Greeter { task: Task, word: String }
    ///
    /// #[environment]
    /// impl Environment for Greeter {
    ///     type Task = Task;
    ///     type State = Word;
    ///
    ///     fn splits() -> Vec<Split> { vec![Split::train("train")] }
    ///     async fn tasks(_split: &str) -> Result<Vec<Task>, EnvError> {
    ///         Ok(vec![Task { question: "Who are you?".into() }])
    ///     }
    ///     async fn new(word: &Word, task: Task, _secrets: Secrets) -> Result<Self, EnvError> {
    ///         Ok(Self { task, word: word.0.clone() })
    ///     }
    ///     async fn prompt(&self) -> Result<Blocks, EnvError> {
    ///         Ok(vec![Block::text(&self.task.question)])
    ///     }
    ///
    ///     /// Greet.
    ///     #[tool]
    ///     fn greet(&self) -> String {
    ///         self.word.clone()
    ///     }
    /// }
    ///
    /// // One type, two environments of one server: `/hello/...` and `/bonjour/...`.
    /// let server = ors_server::Server::new()
    ///     .environment_named::<Greeter>("hello", Word("hello".into()))
    ///     .environment_named::<Greeter>("bonjour", Word("bonjour".into()));
    /// # let _ = server;
    /// ```
    pub fn environment_with<E: Environment>(self, state: E::State) -> Self {
        self.environment_handle(Arc::new(EnvHandle::<E>::new(state)))
    }

    /// Serve the environment `E` with its start-up state under `name` instead of its own (a
    /// URL path segment: 1 to 64 characters from `A-Z a-z 0-9 _ -`), so one type can be served
    /// twice, configured two ways.
    pub fn environment_named<E: Environment>(
        self,
        name: impl Into<String>,
        state: E::State,
    ) -> Self {
        self.environment_handle(Arc::new(EnvHandle::<E>::new(state).named(name)))
    }

    /// Serve an already type-erased environment.
    pub fn environment_handle(mut self, env: Arc<dyn DynEnvironment>) -> Self {
        self.envs.push(env);
        self
    }

    /// The settings, to change in place.
    pub fn config_mut(&mut self) -> &mut ServerConfig {
        &mut self.config
    }

    /// The settings.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    setters! {
        /// Set the listen address.
        host(host: impl Into<String>) = host.into();
        /// Set the port (0 picks a free one).
        port(port: u16) = port;
        /// Require this API key on the routes that are not open ([`ServerConfig::api_key`]).
        api_key(key: impl Into<String>) = Some(key.into());
        /// Limit every tool call to `timeout`.
        tool_timeout(timeout: Duration) = Some(timeout);
        /// Delete sessions idle for longer than `timeout`.
        session_timeout(timeout: Duration) = timeout;
        /// Set how many sessions may be live at once.
        max_sessions(max: usize) = max;
    }

    /// Limit calls of one tool to `timeout` (overrides [`Server::tool_timeout`]).
    pub fn tool_timeout_for(mut self, tool: impl Into<String>, timeout: Duration) -> Self {
        self.config.tool_timeouts.insert(tool.into(), timeout);
        self
    }

    /// Bind the listener and serve in the background until [`RunningServer::shutdown`].
    /// Prints nothing (a library does not write to stdout): the ready line is
    /// [`Server::serve`]'s, for binaries.
    pub async fn bind(self) -> Result<RunningServer, ServerError> {
        let app = Arc::new(App::new(self.config, self.envs)?);
        let (host, port) = (&app.config.host, app.config.port);
        let listener = listen(host, port)
            .await
            .map_err(|source| ServerError::Bind {
                addr: format!("{host}:{port}"),
                source,
            })?;
        let local_addr = listener.local_addr()?;
        tracing::info!(addr = %local_addr, envs = ?names(&app.envs), "ors-server ready");
        let stop = CancellationToken::new();
        Ok(RunningServer {
            local_addr,
            task: Some(tokio::spawn(run(Arc::clone(&app), listener, stop.clone()))),
            stop,
            app,
        })
    }

    /// For binaries: bind, print the ready line `ors-server listening on http://HOST:PORT` to
    /// stdout (what scripts and `cargo xtask` wait for), and serve. SIGTERM drains first
    /// (new sessions refused, `/ready` 503, live episodes go on) until the last session ends
    /// or [`ServerConfig::drain`] passes, a second SIGTERM or a SIGINT cutting that short;
    /// SIGINT shuts down at once. Either way the shutdown is graceful.
    pub async fn serve(self) -> Result<(), ServerError> {
        // Handlers first, so a signal right after the ready line is not missed.
        let mut signals = Signals::install()?;
        let running = self.bind().await?;
        let drain = running.app.config.drain;
        print_ready_line(&running.app.config.host, running.local_addr().port());
        if signals.next().await == Signal::Terminate && !drain.is_zero() {
            running.drain_until(drain, signals.next()).await;
        }
        tracing::info!("shutting down");
        running.shutdown().await;
        Ok(())
    }

    /// For binaries: overlay the `ORS_*` environment variables on the settings, then
    /// [`Server::serve`] (which prints the ready line).
    pub async fn serve_from_env(mut self) -> Result<(), ServerError> {
        self.config.apply_env()?;
        self.serve().await
    }
}

/// The line binaries print once the port accepts connections; an IPv6 host is bracketed.
fn ready_line(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("ors-server listening on http://[{host}]:{port}")
    } else {
        format!("ors-server listening on http://{host}:{port}")
    }
}

fn print_ready_line(host: &str, port: u16) {
    let mut out = std::io::stdout().lock();
    // A closed stdout must not stop the server: the line is for whoever still listens.
    let _ = writeln!(out, "{}", ready_line(host, port));
    let _ = out.flush();
}

/// A server accepting connections in the background.
pub struct RunningServer {
    local_addr: SocketAddr,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
    app: Arc<App>,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl RunningServer {
    /// The bound address (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The base URL to reach the server from this machine, e.g. `http://127.0.0.1:8080`.
    pub fn url(&self) -> String {
        let ip = self.local_addr.ip();
        if ip.is_unspecified() {
            let loopback = if ip.is_ipv4() { "127.0.0.1" } else { "[::1]" };
            format!("http://{loopback}:{}", self.local_addr.port())
        } else {
            format!("http://{}", self.local_addr)
        }
    }

    /// What the server holds right now: connections, request-body bytes, sessions, calls.
    pub fn stats(&self) -> ServerStats {
        self.app.stats()
    }

    /// Drain: refuse new sessions (503 `shutting_down` with `Retry-After`) and answer `/ready`
    /// 503, while live sessions go on; return when none is left or `within` has passed,
    /// with the number still live. What [`Server::serve`] does on SIGTERM, before
    /// [`RunningServer::shutdown`].
    pub async fn drain(&self, within: Duration) -> usize {
        self.drain_until(within, std::future::pending::<()>()).await
    }

    async fn drain_until(&self, within: Duration, skip: impl std::future::Future) -> usize {
        // `/create_session` is refused (503 `shutting_down` with `Retry-After`) and `/ready`
        // answers 503, while existing sessions go on as before. `/create` still takes the ids
        // issued before: a client between the two requests of opening a session has an id only
        // this replica serves, and refusing it would lose the episode; no new id is issued, so
        // those are few and soon done.
        self.app.draining.store(true, Ordering::Release);
        tracing::info!(
            sessions = self.app.sessions.len(),
            within_secs = within.as_secs_f64(),
            "draining: no new sessions"
        );
        let left = self.app.drained(within, skip).await;
        tracing::info!(sessions_left = left, "drain over");
        left
    }

    /// Stop accepting, give in-flight calls the grace period, tear down every session, and
    /// return when all that is done.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RunningServer {
    // Dropping without `shutdown` still stops the server, in the background.
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Pending connections the kernel queues for us; tokio's default of 128 drops SYNs when
/// hundreds of clients connect at once.
const ACCEPT_BACKLOG: u32 = 4096;

/// Bind the first address `host:port` resolves to, like [`TcpListener::bind`] but with a deep
/// accept backlog.
async fn listen(host: &str, port: u16) -> std::io::Result<TcpListener> {
    let mut last_err = None;
    for addr in tokio::net::lookup_host((host, port)).await? {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        };
        match socket.and_then(|socket| {
            // As std and tokio do on Unix: a restarted server can reuse its port at once.
            #[cfg(unix)]
            socket.set_reuseaddr(true)?;
            socket.bind(addr)?;
            socket.listen(ACCEPT_BACKLOG)
        }) {
            Ok(listener) => return Ok(listener),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the host resolved to no address",
        )
    }))
}

/// The settings of every served connection (the fuzzing harness uses them too).
pub(crate) fn connection_builder(config: &ServerConfig) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .keep_alive(true)
        // No timer per request head: `crate::connection` watches each connection with one timer.
        .max_header_size(config.max_header_bytes)
        // hyper's minimum; the read buffer must hold at least a whole head.
        .max_buf_size(config.max_header_bytes.max(8192) + 8192)
        // A client may shut its side down once its request is sent (HTTP/1.1 allows it, and
        // some tools do): it still gets its answer, however long the call streams. So the end
        // of a client's input is no longer taken as its leaving: a client that went away is
        // noticed when its stream next writes (a keep-alive comment at the latest).
        .half_close(true);
    builder
}

/// Connections past the limit being answered at once; beyond this they are closed unanswered.
const REFUSING_AT_MOST: usize = 64;
/// How long answering a refused connection may take.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(5);
/// The least time between two "accept failed" warnings.
const ACCEPT_WARNING_EVERY: Duration = Duration::from_secs(5);

/// Counts an open connection until dropped.
struct ConnectionSlot(Arc<App>);

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Take a connection slot, unless the server holds `max_connections` already.
fn connection_slot(app: &Arc<App>) -> Option<ConnectionSlot> {
    take_one(&app.connections, app.config.max_connections).then(|| ConnectionSlot(Arc::clone(app)))
}

/// Add one to `count`, unless it is at `max` already.
fn take_one(count: &AtomicUsize, max: usize) -> bool {
    count
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .is_ok()
}

/// Answer a connection past the limit with 503 `overloaded` and close it: its client learns
/// why and when to retry instead of waiting on a connection nobody reads. At most
/// [`REFUSING_AT_MOST`] at once, each for at most [`REFUSAL_TIMEOUT`]; past that the
/// connection is closed unanswered, as the descriptors kept in reserve are what is at stake.
fn refuse(app: &Arc<App>, tcp: tokio::net::TcpStream, builder: &http1::Builder) {
    app.count(|m| m.rejected_for("too_many_connections"));
    if !take_one(&app.refusing, REFUSING_AT_MOST) {
        return;
    }
    let max = app.config.max_connections;
    let mut builder = builder.clone();
    builder.keep_alive(false);
    let app = Arc::clone(app);
    tokio::spawn(async move {
        let service = service_fn(move |_req| async move {
            let err = ApiError::Overloaded(format!(
                "the server is at its limit of {max} open connections; retry shortly"
            ));
            Ok::<_, std::convert::Infallible>(err.to_response())
        });
        let conn = builder.serve_connection(TokioIo::new(tcp), service);
        let _ = tokio::time::timeout(REFUSAL_TIMEOUT, conn).await;
        app.refusing.fetch_sub(1, Ordering::AcqRel);
    });
}

/// Warns about failed accepts at most once per [`ACCEPT_WARNING_EVERY`], with how many
/// were not reported: out of file descriptors, accept fails as fast as it is retried.
#[derive(Default)]
struct AcceptWarnings {
    last: Option<tokio::time::Instant>,
    unreported: u64,
}

impl AcceptWarnings {
    /// Whether a failure at `now` is reported, and if so how many before it were not.
    fn report(&mut self, now: tokio::time::Instant) -> Option<u64> {
        if self
            .last
            .is_some_and(|last| now.duration_since(last) < ACCEPT_WARNING_EVERY)
        {
            self.unreported += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unreported))
    }
}

/// Accept connections until `stop`, then shut down.
async fn run(app: Arc<App>, listener: TcpListener, stop: CancellationToken) {
    let builder = connection_builder(&app.config);
    let connections = Arc::new(Connections::default());
    let reaper = tokio::spawn(reap(Arc::clone(&app), stop.clone()));
    let expiry = tokio::spawn(Arc::clone(&app.calls.results).run_expiry(stop.clone()));
    let mut warnings = AcceptWarnings::default();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, _peer) = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                if let Some(also_failed) = warnings.report(tokio::time::Instant::now()) {
                    tracing::warn!(error = %e, also_failed, "accept failed");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let Some(slot) = connection_slot(&app) else {
            refuse(&app, tcp, &builder);
            continue;
        };
        let service_app = Arc::clone(&app);
        let (activity, registered) = connections.add();
        let service_activity = Arc::clone(&activity);
        let service =
            service_fn(move |req| Arc::clone(&service_app).serve(req, service_activity.begin()));
        let conn = builder.serve_connection(TokioIo::new(tcp), service);
        let served = Arc::clone(&activity);
        let connection = tokio::spawn(async move {
            if let Err(e) = served.serve(conn).await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop((slot, registered));
        });
        // Its own task, so the connection's task polls no timer when it wakes for a request.
        let timeout = app.config.head_timeout;
        tokio::spawn(close_when_idle(connection, activity, timeout));
    }
    drop(listener);
    shut_down(&app, &connections).await;
    reaper.abort();
    expiry.abort();
    connections.stop_all(true);
}

/// Close `connection` (drop its task, and so its socket) once it has gone `timeout` without
/// a request ([`Activity::idle_for`]); return when it ends.
async fn close_when_idle(connection: JoinHandle<()>, activity: Arc<Activity>, timeout: Duration) {
    let abort = connection.abort_handle();
    tokio::select! {
        _ = connection => {}
        _ = activity.idle_for(timeout) => {
            tracing::debug!(secs = timeout.as_secs_f64(), "connection closed: no request");
            abort.abort();
        }
    }
}

/// How long the streams of calls stopped at shutdown get to deliver their `error` event.
const FLUSH_AFTER_ABORT: Duration = Duration::from_secs(2);

/// Stop taking sessions and let in-flight requests finish within the grace period: a running
/// call ends as it would have, its stream carrying its `end`. A call still running when the
/// grace period is over ends one way only: its tool is dropped and its stream gets an
/// `error` event saying the server shut down (its session's cancellation fires only after
/// that, so a tool cannot turn it into an `ok: false` result instead). Then every session is
/// torn down.
async fn shut_down(app: &App, open: &Connections) {
    app.closing.store(true, Ordering::Release);
    let deadline = tokio::time::Instant::now() + app.config.shutdown_grace;
    open.stop_all(false);
    let connections = open.closed();
    tokio::pin!(connections);
    let connections_closed = tokio::time::timeout_at(deadline, &mut connections)
        .await
        .is_ok();
    if !connections_closed || app.calls.active.load(Ordering::Acquire) > 0 {
        // Calls with nobody listening keep no connection open: wait for them too.
        wait_for_calls(app, deadline).await;
    }
    if app.calls.active.load(Ordering::Acquire) > 0 {
        app.calls.abort.cancel();
        // Their tools are dropped at once; each records its error and sends it.
        wait_for_calls(app, tokio::time::Instant::now() + FLUSH_AFTER_ABORT).await;
    }
    if !connections_closed {
        let _ = tokio::time::timeout(FLUSH_AFTER_ABORT, &mut connections).await;
    }
    let sessions = app.sessions.drain();
    let grace = app.config.shutdown_grace;
    futures_util::future::join_all(sessions.iter().map(|s| s.close(Ending::Shutdown, grace))).await;
    tracing::info!(sessions = sessions.len(), "ors-server stopped");
}

/// Wait until no call runs, or `deadline`.
async fn wait_for_calls(app: &App, deadline: tokio::time::Instant) {
    while app.calls.active.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every `reaper_interval`, delete sessions idle longer than `session_timeout`.
async fn reap(app: Arc<App>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(app.config.reaper_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let stale = app.sessions.take_stale();
        if !stale.is_empty() {
            tracing::debug!(count = stale.len(), "reaping idle sessions");
            app.count(|m| m.sessions_reaped.inc_by(stale.len() as u64));
        }
        for session in stale {
            let (grace, idle) = (app.config.shutdown_grace, app.config.session_timeout);
            tokio::spawn(async move { session.close(Ending::TimedOut(idle), grace).await });
        }
        app.sessions.tombstones.sweep();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_failures_are_warned_about_at_most_every_five_seconds() {
        let mut warnings = AcceptWarnings::default();
        let t0 = tokio::time::Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        assert_eq!(warnings.report(t0), Some(0));
        // Twenty failures a second, as out of file descriptors: silent until 5 s have passed.
        assert!((1..100).all(|i| warnings.report(ms(i * 50)).is_none()));
        assert_eq!(warnings.report(ms(5000)), Some(99));
        assert_eq!(warnings.report(ms(5001)), None);
        assert_eq!(warnings.report(ms(10_000)), Some(1));
    }

    #[test]
    fn the_ready_line_brackets_ipv6_hosts() {
        assert_eq!(
            ready_line("127.0.0.1", 8080),
            "ors-server listening on http://127.0.0.1:8080"
        );
        assert_eq!(
            ready_line("::1", 9),
            "ors-server listening on http://[::1]:9"
        );
    }
}
