//! Named toolsets (PROTOCOL_NOTES row `toolset-name`): `/create` with `toolset_name` gives the
//! session that toolset's tools besides the environment's; other sessions do not have them; an
//! unknown name is a 400 naming the known ones.

use ors_server::prelude::*;
use ors_server::{RunningServer, Server, ServerConfig};
use serde_json::{json, Value};

use crate::support::*;

/// Input of the toolsets' `run`.
#[wire]
pub struct Line {
    line: String,
}

/// A toolset selected as `bash`.
#[derive(Default)]
pub struct Bash;

#[toolset]
impl Bash {
    /// Run a line in bash (pretend).
    #[tool]
    fn run(&self, input: Line) -> String {
        format!("bash: {}", input.line)
    }
}

/// A toolset selected as `zsh`: the same tool name as `Bash` (one session has one of them).
#[derive(Default)]
pub struct Zsh {
    runs: u32,
}

#[toolset]
impl Zsh {
    /// Run a line in zsh (pretend), counting the runs of this session.
    #[tool]
    fn run(&mut self, input: Line) -> String {
        self.runs += 1;
        format!("zsh #{}: {}", self.runs, input.line)
    }
}

/// An environment with two selectable toolsets.
pub struct Shells {
    bash: Bash,
    zsh: Zsh,
}

#[environment(name = "shells", select_toolsets(bash, zsh = "z-shell"))]
impl Environment for Shells {
    type Task = Value;

    fn splits() -> Vec<Split> {
        vec![Split::train("train")]
    }

    async fn tasks(_split: &str) -> Result<Vec<Value>, EnvError> {
        Ok(vec![json!({"q": "ls"})])
    }

    async fn new(_task: Value, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Shells {
            bash: Bash,
            zsh: Zsh::default(),
        })
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text("List the files.")])
    }

    /// The environment's own tool.
    #[tool]
    fn pwd(&self) -> String {
        "/".into()
    }
}

async fn start_shells() -> RunningServer {
    let config = ServerConfig {
        port: 0,
        ..ServerConfig::default()
    };
    Server::with_config(config)
        .environment::<Shells>()
        .environment::<Lab>()
        .bind()
        .await
        .expect("the test server binds")
}

/// `/create` a `shells` session, selecting `toolset`: its id and the reply.
async fn shells_session(addr: std::net::SocketAddr, toolset: Option<&str>) -> (String, Reply) {
    let sid = new_sid(addr).await;
    let mut body = json!({"env_name": "shells", "split": "train", "index": 0});
    if let Some(t) = toolset {
        body["toolset_name"] = json!(t);
    }
    let r = create_with(addr, &sid, &[], &body).await;
    (sid, r)
}

/// The tool names `/task_tools` lists for a session.
async fn tool_names(addr: std::net::SocketAddr, sid: &str) -> Vec<String> {
    let listing = get_s(addr, sid, "/shells/task_tools").await.json();
    listing["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect()
}

async fn run(addr: std::net::SocketAddr, sid: &str, line: &str) -> Value {
    let r = send(
        addr,
        "POST",
        "/shells/call",
        &[("X-Session-ID", sid), ("Accept", "text/event-stream")],
        Some(&json!({"name": "run", "input": {"line": line}}).to_string()),
    )
    .await;
    result_of(&r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selected_toolset_adds_its_tools_to_that_session_only() {
    let server = start_shells().await;
    let addr = server.local_addr();
    let mut sids = Vec::new();
    for toolset in [Some("bash"), Some("z-shell"), None] {
        let (sid, r) = shells_session(addr, toolset).await;
        assert_eq!(r.status, 200, "{toolset:?}: {}", r.text());
        sids.push(sid);
    }
    let [bash, zsh, plain] = [&sids[0], &sids[1], &sids[2]];

    assert_eq!(tool_names(addr, bash).await, ["pwd", "run"]);
    assert_eq!(tool_names(addr, zsh).await, ["pwd", "run"]);
    assert_eq!(tool_names(addr, plain).await, ["pwd"]);
    // The shared listing is the environment's own tools.
    let shared = get(addr, "/shells/tools").await.json();
    assert_eq!(
        shared["tools"].as_array().map(Vec::len),
        Some(1),
        "{shared}"
    );

    let out = run(addr, bash, "ls").await;
    assert_eq!(out["output"]["blocks"][0]["text"], "bash: ls", "{out}");
    // The toolset's state is the session's own field.
    run(addr, zsh, "a").await;
    let out = run(addr, zsh, "b").await;
    assert_eq!(out["output"]["blocks"][0]["text"], "zsh #2: b", "{out}");
    let out = run(addr, plain, "ls").await;
    assert_eq!(
        (out["ok"].clone(), out["reason"].clone()),
        (json!(false), json!("not_found")),
        "{out}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_toolset_is_a_400_naming_the_known_ones() {
    let server = start_shells().await;
    let addr = server.local_addr();
    let (_, r) = shells_session(addr, Some("fish")).await;
    r.assert_error(400, "invalid_request");
    let detail = r.detail();
    assert!(detail.contains("'fish'"), "{detail}");
    assert!(detail.contains("bash, z-shell"), "{detail}");
    // A field name is not a toolset name when the toolset is renamed.
    shells_session(addr, Some("zsh"))
        .await
        .1
        .assert_error(400, "invalid_request");
    // An environment without selectable toolsets says it has none.
    let sid = new_sid(addr).await;
    let body = json!({"env_name": "lab", "task_spec": task(1), "toolset_name": "bash"});
    let r = create_with(addr, &sid, &[], &body).await;
    r.assert_error(400, "invalid_request");
    assert!(r.detail().contains("toolsets: none"), "{}", r.detail());
    server.shutdown().await;
}
