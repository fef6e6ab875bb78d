//! The environment author's toolkit through the server: blocking tools leave other sessions
//! and `/health` answering and time out on time, results over the size limit and outputs with
//! no blocks are refused, and huge splits served by index answer `/tasks` with a 400.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ors_server::prelude::*;
use ors_server::{RunningServer, Server, ServerConfig};
use serde_json::{json, Value};

use crate::support::*;

/// Gates the blocking tool waits on, by a name each test chooses.
fn gate(name: &str) -> Arc<AtomicBool> {
    static GATES: OnceLock<Mutex<HashMap<String, Arc<AtomicBool>>>> = OnceLock::new();
    let mut gates = GATES.get_or_init(Default::default).lock().unwrap();
    Arc::clone(gates.entry(name.to_owned()).or_default())
}

/// Blocking tools currently waiting, by gate.
fn waiting(name: &str) -> Arc<AtomicUsize> {
    static WAITING: OnceLock<Mutex<HashMap<String, Arc<AtomicUsize>>>> = OnceLock::new();
    let mut w = WAITING.get_or_init(Default::default).lock().unwrap();
    Arc::clone(w.entry(name.to_owned()).or_default())
}

#[wire]
struct Gate {
    gate: String,
}

#[wire]
struct Size {
    bytes: usize,
}

/// Rows of the split served by index.
const HUGE: usize = 1_000_000;

struct Kit {
    done: u32,
}

#[environment(name = "kit")]
impl Environment for Kit {
    type Task = JsonObject;
    fn splits() -> Vec<Split> {
        vec![Split::train("huge")]
    }
    async fn num_tasks(_split: &str) -> Result<Option<usize>, EnvError> {
        Ok(Some(HUGE))
    }
    async fn task(_split: &str, index: usize) -> Result<JsonObject, EnvError> {
        let mut t = JsonObject::new();
        t.insert("i".into(), json!(index));
        Ok(t)
    }
    async fn new(_task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Kit { done: 0 })
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text("kit")])
    }

    /// Busy-wait on a blocking-pool thread until the gate opens (at most 60 s).
    #[tool(blocking)]
    fn hold(&mut self, input: Gate) -> String {
        let open = gate(&input.gate);
        let count = waiting(&input.gate);
        count.fetch_add(1, Ordering::SeqCst);
        let until = Instant::now() + Duration::from_secs(60);
        while !open.load(Ordering::SeqCst) && Instant::now() < until {
            std::hint::spin_loop();
        }
        count.fetch_sub(1, Ordering::SeqCst);
        self.done += 1;
        "released".into()
    }

    /// How many `hold` calls finished in this session.
    #[tool]
    fn done(&self) -> String {
        self.done.to_string()
    }

    /// Echo.
    #[tool]
    fn echo(&self) -> String {
        "echo".into()
    }

    /// A text block of this many bytes.
    #[tool]
    fn big(&self, input: Size) -> String {
        "x".repeat(input.bytes)
    }

    /// An output without blocks.
    #[tool]
    fn nothing(&self) -> ToolOutput {
        ToolOutput::blocks(vec![])
    }
}

async fn start_kit(f: impl FnOnce(&mut ServerConfig)) -> RunningServer {
    let mut config = ServerConfig {
        port: 0,
        ..ServerConfig::default()
    };
    f(&mut config);
    // `lab` too: the shared helpers post to `/lab/call`, and a session's own environment
    // (`kit`) serves its episode routes whatever the path names.
    Server::with_config(config)
        .environment::<Kit>()
        .environment::<Lab>()
        .bind()
        .await
        .expect("the test server binds")
}

async fn kit_session(addr: SocketAddr) -> String {
    let sid = new_sid(addr).await;
    let r = create_with(
        addr,
        &sid,
        &[],
        &json!({"env_name": "kit", "task_spec": {}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    sid
}

/// Wait (bounded, to turn a hang into a failure) until `n` tools wait on `name`.
async fn until_waiting(name: &str, n: usize) {
    for _ in 0..3000 {
        if waiting(name).load(Ordering::SeqCst) >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "only {} of {n} blocking tools started",
        waiting(name).load(Ordering::SeqCst)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_blocking_tools_leave_health_and_other_sessions_answering() {
    let server = start_kit(|_| {}).await;
    let addr = server.local_addr();
    let name = "eight";
    let mut held = Vec::new();
    for _ in 0..8 {
        let sid = kit_session(addr).await;
        let body = json!({"name": "hold", "input": {"gate": name}}).to_string();
        held.push(open_call(addr, &sid, &body).await);
    }
    until_waiting(name, 8).await;
    // Two worker threads and eight busy tools: were the tools on the workers, none of these
    // could be answered until the gate opens.
    assert_eq!(get(addr, "/health").await.status, 200);
    let other = kit_session(addr).await;
    assert_eq!(
        text_of(&call(addr, &other, "echo", json!({})).await),
        "echo"
    );
    assert_eq!(
        waiting(name).load(Ordering::SeqCst),
        8,
        "the tools were still running"
    );
    gate(name).store(true, Ordering::SeqCst);
    for (open, _, raw) in held {
        assert_eq!(text_of(&finish(open, raw).await), "released");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_tool_times_out_on_time_and_its_thread_finishes_in_the_background() {
    let server = start_kit(|c| {
        c.tool_timeouts
            .insert("hold".into(), Duration::from_millis(200));
    })
    .await;
    let addr = server.local_addr();
    let name = "timeout";
    let sid = kit_session(addr).await;
    let reply = call(addr, &sid, "hold", json!({"gate": name})).await;
    let result = result_of(&reply);
    assert_eq!(result["ok"], false, "{result}");
    assert!(
        result["error"].as_str().unwrap().contains("timed out"),
        "{result}"
    );
    // Answered while the tool still holds the episode on its thread.
    assert_eq!(waiting(name).load(Ordering::SeqCst), 1);
    gate(name).store(true, Ordering::SeqCst);
    // The next call waits for the thread to hand the episode back, with its work done.
    assert_eq!(text_of(&call(addr, &sid, "done", json!({})).await), "1");
    server.shutdown().await;
}

#[tokio::test]
async fn results_over_the_limit_and_outputs_without_blocks_are_refused() {
    let server = start_kit(|c| c.max_result_bytes = 1000).await;
    let addr = server.local_addr();
    let sid = kit_session(addr).await;
    assert_eq!(
        text_of(&call(addr, &sid, "big", json!({"bytes": 10})).await).len(),
        10
    );
    let result = result_of(&call(addr, &sid, "big", json!({"bytes": 2000})).await);
    assert_eq!(result["ok"], false);
    let error = result["error"].as_str().unwrap();
    let size = RunToolOutput::Success(ToolOutput::text("x".repeat(2000)))
        .to_json()
        .len();
    assert!(
        error.starts_with(&format!("tool 'big' returned a result of {size} bytes")),
        "{error}"
    );
    assert!(
        error.ends_with("more than this server's limit of 1000 bytes (ORS_MAX_RESULT_BYTES)"),
        "{error}"
    );
    let result = result_of(&call(addr, &sid, "nothing", json!({})).await);
    if cfg!(debug_assertions) {
        assert_eq!(result["ok"], false);
        assert!(
            result["error"].as_str().unwrap().contains("no blocks"),
            "{result}"
        );
    } else {
        assert_eq!(result["ok"], true);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_split_served_by_index_pages_instead_of_listing() {
    let server = start_kit(|_| {}).await;
    let addr = server.local_addr();
    let r = post(addr, "/kit/num_tasks", r#"{"split": "huge"}"#).await;
    assert_eq!(r.json(), json!({"num_tasks": HUGE}));
    let r = post(addr, "/kit/tasks", r#"{"split": "huge"}"#).await;
    r.assert_error(400, "invalid_request");
    assert!(r.detail().contains("/task_range"), "{}", r.detail());
    let r = post(
        addr,
        "/kit/task",
        &format!(r#"{{"split": "huge", "index": {}}}"#, HUGE - 1),
    )
    .await;
    assert_eq!(r.json()["task"], json!({"i": HUGE - 1}));
    let r = post(addr, "/kit/task_range", r#"{"split": "huge", "start": -3}"#).await;
    let tasks: Vec<Value> = r.json()["tasks"].as_array().unwrap().clone();
    assert_eq!(
        tasks,
        [
            json!({"i": HUGE - 3}),
            json!({"i": HUGE - 2}),
            json!({"i": HUGE - 1})
        ]
    );
    post(
        addr,
        "/kit/task_range",
        r#"{"split": "huge", "start": 0, "stop": 20000}"#,
    )
    .await
    .assert_error(400, "invalid_request");
    let sid = new_sid(addr).await;
    let body = json!({"env_name": "kit", "split": "huge", "index": HUGE - 1});
    assert_eq!(create_with(addr, &sid, &[], &body).await.status, 200);
    server.shutdown().await;
}
