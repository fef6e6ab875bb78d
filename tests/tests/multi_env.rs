//! One server hosting both example environments, driven by our client: what a user who serves
//! several environments from one process relies on (registration order, the default
//! environment for env-less routes, per-environment tools and tasks, isolation of episodes).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use ors_client::{Client, Error};
use ors_conformance::http::{Request, Response, Target};
use ors_examples::conformance::Conformance;
use ors_examples::gsm8k::{Dataset, Gsm8k, Problems};
use ors_server::{RunningServer, Server, ServerError};
use serde_json::{json, Value};

async fn serve_both() -> RunningServer {
    Server::new()
        .port(0)
        .environment::<Gsm8k>()
        .environment::<Conformance>()
        .bind()
        .await
        .expect("the server binds a free port")
}

/// A raw HTTP/1.1 request, so env-less paths are sent exactly as written.
async fn raw(server: &RunningServer, request: Request) -> Response {
    let target = Target::from_addr(server.local_addr());
    tokio::task::spawn_blocking(move || request.send(&target))
        .await
        .expect("the blocking request")
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn environments_are_listed_in_registration_order_and_the_first_is_the_default() {
    let server = serve_both().await;
    let client = Client::new(server.url()).expect("client");
    assert_eq!(
        client.environments().await.expect("environments"),
        vec!["gsm8k".to_owned(), "conformance".to_owned()]
    );

    // An env-less route goes to the default (first) environment: gsm8k's tools, not the fixture's.
    let r = raw(&server, Request::new("GET", "/tools")).await;
    assert_eq!(r.status(), 200, "{}", r.snippet());
    let tools: Value = r.json().expect("JSON tools");
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .expect("a tools array")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, vec!["submit"]);
    server.shutdown().await;
}

#[tokio::test]
async fn each_environment_serves_its_own_tasks_and_episodes_side_by_side() -> Result<(), Error> {
    let server = serve_both().await;
    let client = Client::new(server.url())?;
    let gsm8k = client.environment("gsm8k");
    let fixture = client.environment("conformance");

    assert_eq!(fixture.num_tasks("train").await?, 25);
    assert!(gsm8k.num_tasks("test").await? >= 50);

    // Episodes of both environments at once, each with its own state.
    let math = gsm8k.session_at("test", 0).await?;
    let a = fixture.session_at("train", 2).await?;
    let b = fixture.session_at("train", 3).await?;
    for _ in 0..3 {
        a.call("counter", json!({})).await?;
    }
    let b_count = b.call("counter", json!({})).await?;
    assert_eq!(
        b_count.blocks[0].as_text(),
        Some("1"),
        "sessions are isolated"
    );

    // The gsm8k task's own answer (after ####) is accepted.
    let task = gsm8k.task("test", 0).await?;
    let answer = task["answer"]
        .as_str()
        .and_then(|a| a.rsplit("####").next())
        .map(str::trim)
        .expect("a GSM8K answer line")
        .to_owned();
    let out = math.call("submit", json!({ "answer": answer })).await?;
    assert_eq!(out.reward, Some(1.0));
    assert!(out.finished);

    // Task-specific tools show up only in the episode's tool list.
    let shared: Vec<String> = fixture.tools().await?.into_iter().map(|t| t.name).collect();
    let episode: Vec<String> = a.tools().await?.into_iter().map(|t| t.name).collect();
    assert!(!shared.contains(&"hint".to_owned()));
    assert!(episode.contains(&"hint".to_owned()));
    let hint = a.call("hint", json!({})).await?;
    assert_eq!(hint.blocks[0].as_text(), Some("The answer is 4"));

    for s in [math, a, b] {
        s.close().await?;
    }
    server.shutdown().await;
    Ok(())
}

/// One environment type served twice, each with its own start-up state under its own name:
/// what a user comparing two data sets (or two configurations) in one server relies on.
#[tokio::test]
async fn one_type_is_served_twice_under_two_names_each_with_its_own_state() -> Result<(), Error> {
    let embedded = Problems::Embedded;
    let mut picked = embedded
        .split_tasks("test")
        .expect("the embedded test split");
    picked.truncate(2);
    let small = Problems::Memory(Dataset {
        train: picked.clone(),
        test: Vec::new(),
    });
    let server = Server::new()
        .port(0)
        .environment::<Gsm8k>()
        .environment_named::<Gsm8k>("gsm8k-small", small)
        .bind()
        .await
        .expect("the server binds a free port");
    let client = Client::new(server.url())?;
    assert_eq!(
        client.environments().await?,
        vec!["gsm8k".to_owned(), "gsm8k-small".to_owned()]
    );
    let (full, two) = (
        client.environment("gsm8k"),
        client.environment("gsm8k-small"),
    );
    assert_eq!(full.num_tasks("train").await?, 160);
    assert_eq!(two.num_tasks("train").await?, 2);
    assert_eq!(two.num_tasks("test").await?, 0);

    // An episode of the small set is built from its own problems, and graded as gsm8k grades.
    let session = two.session_at("train", 1).await?;
    let prompt = session.prompt().await?;
    let text = prompt[0].as_text().expect("a text prompt");
    assert!(text.starts_with(&picked[1].question), "{text}");
    let answer = picked[1].answer.rsplit("####").next().expect("####").trim();
    let out = session.call("submit", json!({ "answer": answer })).await?;
    assert_eq!(out.reward, Some(1.0));
    session.close().await?;
    server.shutdown().await;

    // Two served under one name, or under a name that is no URL segment, do not start.
    let twice = Server::new()
        .port(0)
        .environment::<Gsm8k>()
        .environment_named::<Gsm8k>("GSM8K", Problems::Embedded)
        .bind()
        .await;
    assert!(
        matches!(&twice, Err(ServerError::DuplicateEnvironment(name)) if name == "GSM8K"),
        "{twice:?}"
    );
    let spaced = Server::new()
        .port(0)
        .environment_named::<Gsm8k>("gsm 8k", Problems::Embedded)
        .bind()
        .await;
    assert!(
        matches!(&spaced, Err(ServerError::InvalidEnvironmentName(name)) if name == "gsm 8k"),
        "{spaced:?}"
    );
    Ok(())
}
