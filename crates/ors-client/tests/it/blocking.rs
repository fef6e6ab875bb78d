//! The blocking facade, used from a plain thread as a synchronous program would.

use ors_client::blocking::Client;
use ors_client::{Error, Secrets};
use serde_json::json;

use crate::support::server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_episode_from_a_plain_thread() {
    let srv = server().await;
    let url = srv.url().to_string();
    let outcome = tokio::task::spawn_blocking(move || {
        std::thread::spawn(move || {
            let c = Client::from_builder(ors_client::Client::builder(&url).no_api_key())?;
            assert!(c.environments()?.contains(&"conformance".to_owned()));
            let env = c.environment("conformance");
            assert_eq!(env.num_tasks("test")?, 5);
            assert_eq!(env.task_range("test", Some(-1), None)?[0]["id"], 104);
            let s = env
                .session(json!("train"), Secrets::default())
                .map(|_| ())
                .unwrap_err();
            assert!(
                matches!(s, Error::InvalidArgument(_)),
                "a bare string is not a task"
            );
            let s = env.session_at("train", 4)?;
            assert_eq!(s.prompt()?[0].as_text(), Some("What is 4+4?"));
            assert!(s.tools()?.iter().any(|t| t.name == "hint"));
            assert_eq!(s.call("counter", json!({}))?.blocks[0].as_text(), Some("1"));
            let out = s.call_as("submit", &json!({"answer": "8"}))?;
            assert_eq!(out.reward, Some(1.0));
            assert!(matches!(
                s.call("fail", json!({"message": "x"})),
                Err(Error::ToolError { .. })
            ));
            s.close()?;
            Ok::<_, Error>(())
        })
        .join()
    })
    .await
    .unwrap();
    outcome.expect("the thread did not panic").unwrap();
    srv.shutdown().await;
}
