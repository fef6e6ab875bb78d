//! Exactly-once tool calls over a network that breaks: our client talks to the server through a
//! TCP proxy that, on a share of its connections, drops, resets, stalls or truncates the byte
//! stream at a random offset of the requests or of the responses. Every session calls
//! `counter` (which counts its own runs) in a loop: each call must return, and return the next
//! number, so no call is lost and none runs twice; a last call with the faults switched off
//! reads each session's final count.
//!
//! The run is seeded: a failure prints its seed, and `ORS_FAULT_SEED=N` replays that plan of
//! faults (the timing of the machine still varies).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ors_client::{Client, Environment};
use ors_examples::conformance::Conformance;
use ors_server::Server;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Sessions calling at once.
const SESSIONS: u64 = 16;
/// `counter` calls per session (through the faults).
const CALLS: u64 = 160;
/// Every connection gets one fault, within this many bytes of one direction. A call and its
/// answer are a few hundred bytes and the client keeps connections alive, so a connection
/// carries a few calls before its fault, which may strike anywhere in a request or a response.
/// (A connection spared would carry every call from then on: the client reuses it.)
const MAX_OFFSET: u64 = 6_000;
/// How long a dropped connection stays silent before the proxy closes it: beyond the client's
/// timeouts, so it must notice by itself.
const BLACK_HOLE: Duration = Duration::from_secs(3);
/// The longest stall (some end within the client's timeouts, some beyond).
const MAX_STALL_MS: u64 = 1_500;
/// Turns a hang into a failure: the whole run takes a fraction of it.
const RUN_LIMIT: Duration = Duration::from_secs(240);

/// xorshift64*: enough randomness for a fault plan, and replayable from its seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform enough in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What happens to a faulty connection once `at` bytes have gone in its direction.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Nothing more is forwarded either way and nothing is closed (a peer or a NAT vanished):
    /// only the client's timeouts can tell.
    Drop,
    /// Both sides are reset (RST).
    Reset,
    /// Both directions pause for this long, then go on.
    Stall(Duration),
    /// The direction's bytes end there (FIN, the receiver sees a cut message) and the
    /// connection closes.
    Truncate,
}

impl Fault {
    fn index(self) -> usize {
        match self {
            Fault::Drop => 0,
            Fault::Reset => 1,
            Fault::Stall(_) => 2,
            Fault::Truncate => 3,
        }
    }
}

const FAULT_NAMES: [&str; 4] = ["drop", "reset", "stall", "truncate"];

/// Which byte stream of the connection a fault is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// Client to server: requests.
    Up,
    /// Server to client: responses.
    Down,
}

#[derive(Debug, Clone, Copy)]
struct Plan {
    fault: Fault,
    dir: Dir,
    /// Bytes of `dir` forwarded before it strikes.
    at: u64,
}

impl Plan {
    /// The next fault, within `MAX_OFFSET` bytes of `sent` in its direction.
    fn draw(rng: &mut Rng, sent: [u64; 2]) -> Plan {
        let fault = match rng.below(4) {
            0 => Fault::Drop,
            1 => Fault::Reset,
            2 => Fault::Stall(Duration::from_millis(rng.below(MAX_STALL_MS))),
            _ => Fault::Truncate,
        };
        let dir = if rng.below(2) == 0 {
            Dir::Up
        } else {
            Dir::Down
        };
        let at = sent[usize::from(dir == Dir::Down)] + rng.below(MAX_OFFSET);
        Plan { fault, dir, at }
    }
}

/// What the proxy did.
#[derive(Default)]
struct Stats {
    connections: AtomicU64,
    /// Faults that struck, by kind and direction (`[kind][0 = up, 1 = down]`).
    struck: [[AtomicU64; 2]; 4],
}

impl Stats {
    fn struck(&self, kind: usize) -> u64 {
        self.struck[kind]
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .sum()
    }

    fn struck_dir(&self, dir: usize) -> u64 {
        self.struck
            .iter()
            .map(|k| k[dir].load(Ordering::Relaxed))
            .sum()
    }

    fn summary(&self) -> String {
        let kinds: Vec<String> = FAULT_NAMES
            .iter()
            .enumerate()
            .map(|(i, name)| {
                format!(
                    "{name} {} (requests {}, responses {})",
                    self.struck(i),
                    self.struck[i][0].load(Ordering::Relaxed),
                    self.struck[i][1].load(Ordering::Relaxed)
                )
            })
            .collect();
        format!(
            "{} connections; faults struck: {}",
            self.connections.load(Ordering::Relaxed),
            kinds.join(", ")
        )
    }
}

/// The proxy in front of `upstream`; faults only while `faulty` is set.
struct Proxy {
    addr: SocketAddr,
    faulty: Arc<AtomicBool>,
    stats: Arc<Stats>,
}

impl Proxy {
    async fn start(upstream: SocketAddr, seed: u64) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("the proxy binds a free port");
        let addr = listener.local_addr().expect("the proxy's address");
        let faulty = Arc::new(AtomicBool::new(true));
        let stats = Arc::new(Stats::default());
        let (on, counts) = (faulty.clone(), stats.clone());
        tokio::spawn(async move {
            let mut rng = Rng::new(seed);
            while let Ok((client, _)) = listener.accept().await {
                counts.connections.fetch_add(1, Ordering::Relaxed);
                // Each connection its own generator, so the plan depends on the seed alone.
                let faults = Rng::new(rng.next());
                tokio::spawn(relay(client, upstream, faults, on.clone(), counts.clone()));
            }
        });
        Proxy {
            addr,
            faulty,
            stats,
        }
    }
}

/// Forward one connection both ways until both ends close, with faults drawn from `faults`
/// one after another (a stalled connection goes on) while `on` is set.
async fn relay(
    client: TcpStream,
    upstream: SocketAddr,
    mut faults: Rng,
    on: Arc<AtomicBool>,
    stats: Arc<Stats>,
) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let mut pending = Some(Plan::draw(&mut faults, [0, 0]));
    let (mut client, mut server) = (client, server);
    let (mut cr, mut cw) = client.split();
    let (mut sr, mut sw) = server.split();
    let (mut up_buf, mut down_buf) = (vec![0u8; 4096], vec![0u8; 4096]);
    let (mut up_sent, mut down_sent) = (0u64, 0u64);
    let (mut up_open, mut down_open) = (true, true);
    while up_open || down_open {
        let (dir, n) = tokio::select! {
            r = cr.read(&mut up_buf), if up_open => (Dir::Up, r.unwrap_or(0)),
            r = sr.read(&mut down_buf), if down_open => (Dir::Down, r.unwrap_or(0)),
        };
        let (buf, sent, to) = match dir {
            Dir::Up => (&up_buf[..n], &mut up_sent, &mut sw),
            Dir::Down => (&down_buf[..n], &mut down_sent, &mut cw),
        };
        if n == 0 {
            // Pass a half-close on.
            let _ = to.shutdown().await;
            match dir {
                Dir::Up => up_open = false,
                Dir::Down => down_open = false,
            }
            continue;
        }
        let strikes = pending
            .filter(|p| p.dir == dir && *sent + n as u64 > p.at)
            .filter(|_| on.load(Ordering::Relaxed));
        let Some(p) = strikes else {
            if to.write_all(buf).await.is_err() {
                return;
            }
            *sent += n as u64;
            continue;
        };
        stats.struck[p.fault.index()][usize::from(dir == Dir::Down)]
            .fetch_add(1, Ordering::Relaxed);
        let before = (p.at - *sent) as usize;
        match p.fault {
            Fault::Drop => {
                tokio::time::sleep(BLACK_HOLE).await;
                return;
            }
            Fault::Reset => {
                // A zero linger turns the close into a reset.
                let _ = cr.as_ref().set_zero_linger();
                let _ = sr.as_ref().set_zero_linger();
                return;
            }
            Fault::Stall(pause) => {
                if to.write_all(&buf[..before]).await.is_err() {
                    return;
                }
                tokio::time::sleep(pause).await;
                if to.write_all(&buf[before..]).await.is_err() {
                    return;
                }
                *sent += n as u64;
                pending = Some(Plan::draw(&mut faults, [up_sent, down_sent]));
            }
            Fault::Truncate => {
                let _ = to.write_all(&buf[..before]).await;
                let _ = to.shutdown().await;
                return;
            }
        }
    }
}

fn seed() -> u64 {
    std::env::var("ORS_FAULT_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

/// What one session saw.
#[derive(Debug, Default)]
struct Outcome {
    /// Attempts to open the session that failed (a new session each time; not a call).
    open_failures: u64,
    /// Calls that returned an error: lost, as far as the caller knows.
    lost: Vec<String>,
    /// Calls whose count was not the next one: `(expected, got)`.
    wrong: Vec<(u64, String)>,
    ok: u64,
}

/// Open a session through the faults, then `CALLS` calls of `counter`, each checked.
async fn session(env: Environment, index: u64) -> (Option<ors_client::Session>, Outcome) {
    let mut out = Outcome::default();
    let mut opened = None;
    for _ in 0..50 {
        match env.session_at("train", (index % 25) as i64).await {
            Ok(s) => {
                opened = Some(s);
                break;
            }
            Err(_) => out.open_failures += 1,
        }
    }
    let Some(s) = opened else {
        return (None, out);
    };
    for expected in 1..=CALLS {
        match s.call("counter", json!({})).await {
            Ok(r) => {
                let got = r.blocks.first().and_then(|b| b.as_text()).unwrap_or("");
                if got == expected.to_string() {
                    out.ok += 1;
                } else {
                    out.wrong.push((expected, got.to_owned()));
                }
            }
            Err(e) => out.lost.push(format!("call {expected}: {e}")),
        }
    }
    (Some(s), out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_runs_exactly_once_through_a_network_that_breaks() {
    let seed = seed();
    let server = Server::new()
        .port(0)
        .environment::<Conformance>()
        .bind()
        .await
        .expect("the server binds a free port");
    let proxy = Proxy::start(server.local_addr(), seed).await;
    // Timeouts short enough that a silent connection costs a second, retries enough that
    // losing a call would take dozens of faults in a row.
    let client = Client::builder(format!("http://{}", proxy.addr))
        .request_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(2))
        .heartbeat_timeout(Duration::from_secs(1))
        .ping_interval(None)
        .max_retries(40)
        .reconnect_attempts(40)
        .backoff(Duration::from_millis(5), Duration::from_millis(50))
        .build()
        .expect("client");
    let env = client.environment("conformance");

    let started = Instant::now();
    let runs: Vec<_> = (0..SESSIONS)
        .map(|i| tokio::spawn(session(env.clone(), i)))
        .collect();
    let mut sessions = Vec::new();
    let mut outcomes = Vec::new();
    for run in runs {
        let (s, out) = tokio::time::timeout(RUN_LIMIT, run)
            .await
            .unwrap_or_else(|_| panic!("seed {seed}: a session hung for {RUN_LIMIT:?}"))
            .expect("the session task");
        sessions.push(s);
        outcomes.push(out);
    }
    let took = started.elapsed();

    // The final counts, with the network healthy again.
    proxy.faulty.store(false, Ordering::Relaxed);
    let mut finals = Vec::new();
    for s in sessions.iter().flatten() {
        let r = s
            .call("counter", json!({}))
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: the last call failed: {e}"));
        finals.push(
            r.blocks
                .first()
                .and_then(|b| b.as_text())
                .map(str::to_owned),
        );
    }

    let stats = &proxy.stats;
    let ok: u64 = outcomes.iter().map(|o| o.ok).sum();
    let open_failures: u64 = outcomes.iter().map(|o| o.open_failures).sum();
    eprintln!(
        "seed {seed}: {ok} of {} calls exact in {:.1} s over {SESSIONS} sessions \
         ({open_failures} failed opens retried); {}",
        SESSIONS * CALLS,
        took.as_secs_f64(),
        stats.summary()
    );
    let opened = sessions.iter().flatten().count() as u64;
    assert_eq!(opened, SESSIONS, "seed {seed}: sessions that never opened");
    let lost: Vec<&String> = outcomes.iter().flat_map(|o| &o.lost).collect();
    assert!(
        lost.is_empty(),
        "seed {seed}: {} calls lost: {lost:?}",
        lost.len()
    );
    let wrong: Vec<&(u64, String)> = outcomes.iter().flat_map(|o| &o.wrong).collect();
    assert!(
        wrong.is_empty(),
        "seed {seed}: {} calls counted wrong (run twice or not at all): {wrong:?}",
        wrong.len()
    );
    let expected = (CALLS + 1).to_string();
    assert!(
        finals
            .iter()
            .all(|f| f.as_deref() == Some(expected.as_str())),
        "seed {seed}: final counts {finals:?}, each should be {expected}"
    );
    // The faults must have happened for the run to prove anything.
    for (i, name) in FAULT_NAMES.iter().enumerate() {
        assert!(stats.struck(i) > 0, "seed {seed}: no {name} fault struck");
    }
    for (d, name) in ["requests", "responses"].iter().enumerate() {
        assert!(
            stats.struck_dir(d) > 0,
            "seed {seed}: no fault struck the {name}"
        );
    }
    for s in sessions.into_iter().flatten() {
        let _ = s.close().await;
    }
    server.shutdown().await;
}
