//! `#[tool(concurrent)]` and `exclusive` (PROTOCOL_NOTES row `tool-concurrency`): concurrent
//! calls of one session share it, every other call has it to itself, and a queued exclusive
//! call holds back the concurrent calls behind it. Overlap is seen through barriers and
//! counters inside the episode, never through timing.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use ors_server::prelude::*;
use ors_server::{RunningServer, Server, ServerConfig};
use serde_json::json;
use tokio::sync::watch;

use crate::support::{
    call, count, finish, new_sid, open_call, post_s, record, result_of, text_of, wait_count, Lab,
};

/// The gates the test opens from outside, by episode tag: a call waiting on its own session
/// could never be let through by another call of that session when that call queues behind it.
fn gate(tag: &str) -> watch::Sender<bool> {
    static GATES: OnceLock<Mutex<HashMap<String, watch::Sender<bool>>>> = OnceLock::new();
    let mut gates = GATES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    gates
        .entry(tag.to_owned())
        .or_insert_with(|| watch::channel(false).0)
        .clone()
}

#[wire]
pub struct GateTask {
    /// Names this episode's gate and observations.
    pub tag: String,
}

pub struct Gate {
    tag: String,
    /// Concurrent `hold` calls inside the episode right now.
    inside: AtomicUsize,
    /// `meet` calls that have arrived.
    arrived: watch::Sender<usize>,
    writes: u64,
}

#[environment(name = "gate")]
impl Environment for Gate {
    type Task = GateTask;

    fn splits() -> Vec<Split> {
        vec![Split::train("train")]
    }

    async fn tasks(_split: &str) -> Result<Vec<GateTask>, EnvError> {
        Ok(vec![])
    }

    async fn new(task: GateTask, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Self {
            tag: task.tag,
            inside: AtomicUsize::new(0),
            arrived: watch::channel(0).0,
            writes: 0,
        })
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text("gate")])
    }

    /// Wait for a second `meet` call to be inside too: "met", or "alone" after 20 s (had the
    /// calls run one after the other).
    #[tool(concurrent)]
    async fn meet(&self) -> String {
        self.arrived.send_modify(|n| *n += 1);
        let mut arrived = self.arrived.subscribe();
        let met = tokio::time::timeout(Duration::from_secs(20), arrived.wait_for(|n| *n >= 2))
            .await
            .is_ok();
        if met { "met" } else { "alone" }.into()
    }

    /// Stay inside the episode until the test opens its gate.
    #[tool(concurrent)]
    async fn hold(&self) -> String {
        self.inside.fetch_add(1, Ordering::SeqCst);
        record(&format!("{}:held", self.tag));
        let mut open = gate(&self.tag).subscribe();
        let _ = open.wait_for(|open| *open).await;
        self.inside.fetch_sub(1, Ordering::SeqCst);
        "held".into()
    }

    /// Change the episode; says how many `hold` calls were inside meanwhile.
    #[tool]
    fn write(&mut self) -> String {
        record(&format!("{}:write", self.tag));
        self.writes += 1;
        format!("inside={}", self.inside.load(Ordering::SeqCst))
    }

    /// Read what `write` changed.
    #[tool(concurrent)]
    fn peek(&self) -> String {
        format!("writes={}", self.writes)
    }

    /// End the episode.
    #[tool(exclusive)]
    fn finish(&mut self) -> ToolOutput {
        ToolOutput::text("done").with_reward(1.0).finish()
    }
}

async fn start() -> RunningServer {
    let config = ServerConfig {
        port: 0,
        shutdown_grace: Duration::from_millis(200),
        ..ServerConfig::default()
    };
    Server::with_config(config)
        .environment::<Lab>()
        .environment::<Gate>()
        .bind()
        .await
        .expect("the test server binds")
}

/// A `gate` episode tagged `tag`, set up.
async fn episode(addr: SocketAddr, tag: &str) -> String {
    let sid = new_sid(addr).await;
    let body = json!({"env_name": "gate", "task_spec": {"tag": tag}}).to_string();
    let r = post_s(addr, &sid, "/create", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    sid
}

fn body(name: &str) -> String {
    json!({"name": name, "input": {}}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_calls_of_one_session_overlap() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, "overlap").await;
    let first = open_call(addr, &sid, &body("meet")).await;
    let second = open_call(addr, &sid, &body("meet")).await;
    let mut said = Vec::new();
    for (stream, _, raw) in [first, second] {
        said.push(text_of(&finish(stream, raw).await));
    }
    assert_eq!(said, ["met", "met"], "each call saw the other inside");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exclusive_call_waits_for_concurrent_ones_and_holds_back_later_ones() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, "writer").await;
    // A concurrent call inside, then a `&mut` call, then a concurrent one after it.
    let hold = open_call(addr, &sid, &body("hold")).await;
    assert_eq!(wait_count("writer:held", 1).await, 1);
    let write = open_call(addr, &sid, &body("write")).await;
    let peek = open_call(addr, &sid, &body("peek")).await;
    assert_eq!(
        count("writer:write"),
        0,
        "the write waits for the call inside"
    );
    let _ = gate("writer").send(true);
    assert_eq!(text_of(&finish(hold.0, hold.2).await), "held");
    // The write ran alone, and the later concurrent call did not overtake it.
    assert_eq!(text_of(&finish(write.0, write.2).await), "inside=0");
    assert_eq!(text_of(&finish(peek.0, peek.2).await), "writes=1");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_finished_latch_refuses_concurrent_calls_queued_behind_the_end() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, "latch").await;
    let hold = open_call(addr, &sid, &body("hold")).await;
    assert_eq!(wait_count("latch:held", 1).await, 1);
    let end = open_call(addr, &sid, &body("finish")).await;
    let late = open_call(addr, &sid, &body("peek")).await;
    let _ = gate("latch").send(true);
    assert_eq!(text_of(&finish(hold.0, hold.2).await), "held");
    let v = result_of(&finish(end.0, end.2).await);
    assert_eq!(v["output"]["finished"], true, "{v}");
    let v = result_of(&finish(late.0, late.2).await);
    assert_eq!(
        (v["ok"].clone(), v["reason"].clone()),
        (json!(false), json!("episode_finished")),
        "{v}"
    );
    let v = result_of(&call(addr, &sid, "meet", json!({})).await);
    assert_eq!(v["reason"], "episode_finished", "{v}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_session_ends_its_concurrent_calls() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, "delete-shared").await;
    let a = open_call(addr, &sid, &body("hold")).await;
    let b = open_call(addr, &sid, &body("hold")).await;
    assert_eq!(
        wait_count("delete-shared:held", 2).await,
        2,
        "both inside at once"
    );
    assert_eq!(post_s(addr, &sid, "/delete", "").await.status, 200);
    for (stream, _, raw) in [a, b] {
        let last = finish(stream, raw).await.events().pop().unwrap();
        assert_eq!(last.0, "error");
        assert!(last.1.contains("was deleted"), "{}", last.1);
    }
    server.shutdown().await;
}
