//! Discovery: environments, tools (also in provider formats), splits and tasks.

use ors_client::{Error, ErrorCode, Provider, SplitType};
use ors_examples::conformance::ConformanceTask;

use crate::support::{client, server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_environments_and_answers_health() {
    let srv = server().await;
    let c = client(&srv.url().to_string());
    c.health().await.unwrap();
    let envs = c.environments().await.unwrap();
    assert_eq!(envs, ["conformance", "gsm8k", "progressive"]);
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_shared_tools_with_their_schemas() {
    let srv = server().await;
    let env = client(&srv.url().to_string()).environment("conformance");
    let tools = env.tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for name in [
        "echo", "submit", "counter", "big", "image", "fail", "panic", "sleep", "secret",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert!(
        !names.contains(&"hint"),
        "task-specific tools are not shared"
    );
    let submit = tools.iter().find(|t| t.name == "submit").unwrap();
    let schema = submit.input_schema.as_ref().unwrap();
    assert_eq!(schema["properties"]["answer"]["type"], "string");
    let counter = tools.iter().find(|t| t.name == "counter").unwrap();
    assert!(counter.input_schema.is_none());
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converts_tools_to_provider_formats() {
    let srv = server().await;
    let env = client(&srv.url().to_string()).environment("conformance");
    let n = env.tools().await.unwrap().len();

    let openai = env.tools_for(Provider::OpenAi).await.unwrap();
    assert_eq!(openai.len(), n);
    let submit = openai
        .iter()
        .find(|t| t["function"]["name"] == "submit")
        .unwrap();
    assert_eq!(submit["type"], "function");
    assert_eq!(
        submit["function"]["parameters"]["properties"]["answer"]["type"],
        "string"
    );

    let anthropic = env.tools_for(Provider::Anthropic).await.unwrap();
    let submit = anthropic.iter().find(|t| t["name"] == "submit").unwrap();
    assert_eq!(submit["input_schema"]["required"][0], "answer");

    let gemini = env.tools_for(Provider::Gemini).await.unwrap();
    assert!(gemini.iter().any(|t| t["name"] == "submit"));
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_splits_and_tasks() {
    let srv = server().await;
    let env = client(&srv.url().to_string()).environment("conformance");

    let splits = env.splits().await.unwrap();
    let pairs: Vec<(&str, SplitType)> = splits
        .iter()
        .map(|s| (s.name.as_str(), s.split_type))
        .collect();
    assert_eq!(
        pairs,
        [
            ("train", SplitType::Train),
            ("test", SplitType::Test),
            ("hard", SplitType::Validation)
        ]
    );

    let tasks: Vec<ConformanceTask> = env.tasks_as("test").await.unwrap();
    let ids: Vec<u64> = tasks.iter().map(|t| t.id).collect();
    assert_eq!(ids, [100, 101, 102, 103, 104]);
    assert_eq!(env.tasks("hard").await.unwrap().len(), 3);

    assert_eq!(env.num_tasks("train").await.unwrap(), 25);

    let t: ConformanceTask = env.task_as("train", 3).await.unwrap();
    assert_eq!(t, ConformanceTask::with_id(3));
    assert_eq!(env.task("train", 3).await.unwrap()["answer"], "6");

    let ids = |v: Vec<serde_json::Value>| -> Vec<u64> {
        v.iter().map(|t| t["id"].as_u64().unwrap()).collect()
    };
    assert_eq!(
        ids(env.task_range("train", Some(2), Some(5)).await.unwrap()),
        [2, 3, 4]
    );
    assert_eq!(
        ids(env.task_range("train", Some(-2), None).await.unwrap()),
        [23, 24]
    );
    assert_eq!(
        ids(env.task_range("test", None, Some(2)).await.unwrap()),
        [100, 101]
    );
    assert!(env
        .task_range("train", Some(5), Some(2))
        .await
        .unwrap()
        .is_empty());
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_carry_the_servers_detail() {
    let srv = server().await;
    let c = client(&srv.url().to_string());

    match c.environment("nosuch").tools().await {
        Err(e @ Error::Http { status: 404, .. }) => {
            assert_eq!(e.error_code(), Some(ErrorCode::UnknownEnvironment));
            assert!(e.to_string().contains("'nosuch'"), "{e}");
        }
        other => panic!("expected a 404, got {other:?}"),
    }
    let env = c.environment("conformance");
    match env.task("train", 99).await {
        Err(Error::Http {
            status: 400,
            code,
            detail,
        }) => {
            assert_eq!(code.as_deref(), Some("invalid_request"));
            assert!(!detail.is_empty());
        }
        other => panic!("expected a 400, got {other:?}"),
    }
    assert_eq!(env.task("train", -1).await.unwrap_err().status(), Some(400));
    assert_eq!(
        env.num_tasks("nosuch").await.unwrap_err().status(),
        Some(400)
    );
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_is_sent_when_the_server_wants_one() {
    let srv = crate::support::server_with(|c| c.api_key = Some("s3cret-key".into())).await;
    let url = srv.url().to_string();
    assert_eq!(
        client(&url).environments().await.unwrap_err().status(),
        Some(401)
    );
    let keyed = ors_client::Client::builder(&url)
        .api_key("s3cret-key")
        .build()
        .unwrap();
    assert!(keyed
        .environments()
        .await
        .unwrap()
        .contains(&"gsm8k".to_owned()));
    let s = keyed
        .environment("conformance")
        .session_at("train", 0)
        .await
        .unwrap();
    s.call("echo", serde_json::json!({"text": "k"}))
        .await
        .unwrap();
    s.close().await.unwrap();
    srv.shutdown().await;
}
