//! What every `ors` test needs: an in-process server with the conformance fixture and gsm8k,
//! a client for it, and the binary run as a user runs it.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use ors_client::Client;
use ors_examples::conformance::Conformance;
use ors_examples::gsm8k::Gsm8k;
use ors_server::{RunningServer, Server, ServerConfig};

/// A server on a free port with the conformance fixture and gsm8k.
pub async fn server_with(tweak: impl FnOnce(&mut ServerConfig)) -> RunningServer {
    let mut cfg = ServerConfig {
        host: "127.0.0.1".into(),
        port: 0,
        ..ServerConfig::default()
    };
    tweak(&mut cfg);
    Server::with_config(cfg)
        .environment::<Conformance>()
        .environment::<Gsm8k>()
        .bind()
        .await
        .expect("the test server starts")
}

pub async fn server() -> RunningServer {
    server_with(|_| {}).await
}

/// A client for `url` with fast retries and no API key from the environment.
pub fn client(url: &str) -> Client {
    Client::builder(url)
        .no_api_key()
        .backoff(Duration::from_millis(10), Duration::from_millis(50))
        .build()
        .expect("valid URL")
}

/// Run `ors ARGS` with `stdin` piped in; never inherits ORS_* settings from the test's
/// environment.
pub async fn ors(args: &[&str], stdin: &str) -> Output {
    ors_env(args, stdin, &[]).await
}

/// Run `ors ARGS` with these environment variables set.
pub async fn ors_env(args: &[&str], stdin: &str, vars: &[(&str, &str)]) -> Output {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let stdin = stdin.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ors"))
            .args(&args)
            .env_remove("ORS_URL")
            .env_remove("ORS_API_KEY")
            .envs(vars)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the ors binary runs");
        if let Some(mut input) = child.stdin.take() {
            let _ = input.write_all(stdin.as_bytes());
        }
        child.wait_with_output().expect("ors finishes")
    })
    .await
    .expect("the blocking task")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn ok(o: &Output) -> String {
    assert!(o.status.success(), "ors failed: {}{}", stdout(o), stderr(o));
    stdout(o)
}
