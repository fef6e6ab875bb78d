//! The agent loop against the strict scripted model server (both APIs) and the in-process
//! conformance fixture: every request the client sends must pass the server's checks.

use std::sync::Arc;
use std::time::Duration;

use ors_client::agent::{Message, ModelOptions, OnText};
use ors_client::{
    evaluate, Agent, AgentOptions, Api, Client, EvalOptions, EvalReport, Outcome, StopReason,
};
use ors_examples::scripted_model::{sum_question, Exchange, Reply, RunningModel, ScriptedModel};
use serde_json::json;

use crate::fake::{Fake, FakeResponse};
use crate::support::{client, server};

/// The base URL of `model` for `api`.
fn base(model: &RunningModel, api: Api) -> String {
    match api {
        Api::OpenAi => model.openai_base(),
        Api::Anthropic => model.anthropic_base(),
    }
}

/// The answer to the fixture's question in `x`.
fn right_answer(x: &Exchange) -> String {
    let (a, b) = sum_question(&x.first_user_text).expect("the prompt asks for a sum");
    (a + b).to_string()
}

/// Run `indices` of the fixture's train split with an agent of `model` on `api`.
async fn run(
    api: Api,
    model: ScriptedModel,
    agent: AgentOptions,
    tweak: impl FnOnce(ModelOptions) -> ModelOptions,
    indices: impl IntoIterator<Item = i64>,
) -> (EvalReport, RunningModel) {
    let srv = server().await;
    let model = model.bind("127.0.0.1:0").await.unwrap();
    let c = client(&srv.url());
    let opts = tweak(ModelOptions::new(api, base(&model, api), "scripted").max_retries(3));
    let agent = Agent::with_options(opts.connect(&c).unwrap(), agent);
    let env = c.environment("conformance");
    let options = EvalOptions::default().concurrency(4).max_steps(6);
    let report = evaluate(&env, "train", indices, Arc::new(agent), options).await;
    srv.shutdown().await;
    (report, model)
}

fn no_rejections(model: &RunningModel) {
    assert_eq!(
        model.rejections(),
        Vec::<String>::new(),
        "malformed requests"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_reads_the_question_and_submits_on_both_apis() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let (report, model) = run(
            api,
            ScriptedModel::arithmetic(),
            AgentOptions::default(),
            |o| o.temperature(0.5),
            0..25,
        )
        .await;
        no_rejections(&model);
        assert_eq!(report.episodes.len(), 25);
        assert_eq!(report.mean_reward(), 1.0, "{api}");
        assert_eq!(report.success_rate(), 1.0);
        assert_eq!(model.requests(), 25, "one model call per episode");
        let ep = &report.episodes[7];
        assert_eq!(ep.stop_reason, StopReason::Finished);
        assert_eq!(ep.steps, 1);
        let trace = ep
            .agent
            .as_ref()
            .expect("an agent's trajectory has its side");
        assert_eq!(trace.api, api.as_str());
        assert_eq!(trace.model, "scripted");
        assert_eq!(trace.sampling.temperature, Some(0.5));
        assert_eq!(trace.model_calls.len(), 1);
        assert_eq!(trace.model_calls[0].step, 1);
        assert!(trace.usage.input_tokens > 0 && trace.usage.output_tokens > 0);
        match trace.messages.as_slice() {
            [Message::User { content }, Message::Assistant { tool_calls, .. }, Message::Tool {
                tool_call_id,
                is_error: false,
                ..
            }] => {
                assert_eq!(content[0].as_text(), Some("What is 7+7?"));
                assert_eq!(tool_calls[0].name, "submit");
                assert_eq!(&tool_calls[0].id, tool_call_id);
                assert_eq!(ep.tool_calls[0].id.as_ref(), Some(tool_call_id));
            }
            other => panic!("unexpected conversation {other:#?}"),
        }
        assert_eq!(ep.tool_calls[0].input, json!({"answer": "14"}));
        // The trajectory is one JSON object that reads back as it was.
        let line = serde_json::to_string(ep).unwrap();
        let back: ors_client::Episode = serde_json::from_str(&line).unwrap();
        assert_eq!(&back, ep);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_without_tools_stops_or_is_nudged() {
    let talker = || {
        ScriptedModel::new(|x| {
            if x.last_user_text.contains("calling one of the tools") {
                Reply::call("submit", json!({ "answer": right_answer(x) }))
            } else {
                Reply::Text("I believe the answer is obvious.".into())
            }
        })
    };
    for api in [Api::OpenAi, Api::Anthropic] {
        let (report, model) = run(api, talker(), AgentOptions::default(), |o| o, [1]).await;
        no_rejections(&model);
        let ep = &report.episodes[0];
        assert_eq!(ep.stop_reason, StopReason::NoToolCall);
        // The answer in prose was the model's turn: steps count model turns.
        assert_eq!((ep.steps, ep.total_reward), (1, 0.0));
        assert!(ep.tool_calls.is_empty());
        assert_eq!(ep.agent.as_ref().unwrap().model_calls.len(), ep.steps);

        let nudging = AgentOptions {
            on_text: OnText::nudge(),
            ..AgentOptions::default()
        };
        let (report, model) = run(api, talker(), nudging, |o| o, [1]).await;
        no_rejections(&model);
        let ep = &report.episodes[0];
        assert_eq!(ep.stop_reason, StopReason::Finished, "{api}");
        assert_eq!((ep.steps, ep.total_reward), (2, 1.0));
        let roles: Vec<&str> = ep
            .agent
            .as_ref()
            .unwrap()
            .messages
            .iter()
            .map(role)
            .collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant", "tool"]);
    }
}

fn role(m: &Message) -> &'static str {
    match m {
        Message::System { .. } => "system",
        Message::User { .. } => "user",
        Message::Assistant { .. } => "assistant",
        Message::Tool { .. } => "tool",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_arguments_go_back_to_the_model_in_call_order() {
    // Two calls in one turn: a good echo and a submit whose arguments are cut off.
    let model = ScriptedModel::new(|x| match x.assistant_turns {
        0 => Reply::Tools(vec![
            ("echo".into(), r#"{"text": "thinking"}"#.into()),
            ("submit".into(), r#"{"answer": "#.into()),
        ]),
        _ => {
            assert_eq!(x.tool_results.len(), 2);
            assert_eq!(x.tool_results[0].text, "thinking");
            assert!(x.tool_results[1].text.contains("not a JSON object"));
            Reply::call("submit", json!({ "answer": right_answer(x) }))
        }
    });
    let (report, model) = run(Api::OpenAi, model, AgentOptions::default(), |o| o, [3]).await;
    no_rejections(&model);
    let ep = &report.episodes[0];
    assert!(ep.error.is_none(), "{:?}", ep.error);
    assert_eq!((ep.steps, ep.total_reward), (2, 1.0));
    let made: Vec<(usize, &str)> = ep
        .tool_calls
        .iter()
        .map(|t| (t.step, t.name.as_str()))
        .collect();
    assert_eq!(
        made,
        [(1, "echo"), (2, "submit")],
        "the broken call is not made"
    );
    let results: Vec<(&str, bool)> = ep
        .agent
        .as_ref()
        .unwrap()
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { name, is_error, .. } => Some((name.as_str(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [("echo", false), ("submit", true), ("submit", false)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_are_retried_and_other_errors_end_the_episode() {
    let flaky = ScriptedModel::new(|x| {
        if x.request_index < 2 {
            Reply::Error {
                status: 429,
                message: "slow down".into(),
                retry_after: Some(Duration::from_millis(20)),
            }
        } else {
            Reply::call("submit", json!({ "answer": right_answer(x) }))
        }
    });
    for api in [Api::OpenAi, Api::Anthropic] {
        let (report, model) = run(api, flaky.clone(), AgentOptions::default(), |o| o, [2]).await;
        no_rejections(&model);
        let ep = &report.episodes[0];
        assert_eq!(ep.total_reward, 1.0, "{api}: {:?}", ep.error);
        assert_eq!(ep.agent.as_ref().unwrap().model_calls[0].attempts, 3);
        assert_eq!(model.requests(), 3);
    }

    let refusing = ScriptedModel::new(|_| Reply::Error {
        status: 400,
        message: "This model's maximum context length is 8 tokens".into(),
        retry_after: None,
    });
    for api in [Api::OpenAi, Api::Anthropic] {
        let (report, model) = run(api, refusing.clone(), AgentOptions::default(), |o| o, [2]).await;
        let ep = &report.episodes[0];
        let error = ep.error.as_ref().expect("a 400 ends the episode");
        assert_eq!((error.kind.as_str(), error.status), ("model", Some(400)));
        assert!(
            error.message.contains("maximum context length"),
            "{}",
            error.message
        );
        assert_eq!(model.requests(), 1, "{api}: a 400 is not retried");
        assert_eq!(ep.stop_reason, StopReason::Error);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_images_reach_the_model_in_each_api_format() {
    let looker = ScriptedModel::new(|x| match x.assistant_turns {
        0 => Reply::call("image", json!({})),
        _ if x.tool_results.first().is_some_and(|r| r.images == 1) => {
            Reply::call("submit", json!({ "answer": right_answer(x) }))
        }
        _ => Reply::Text(format!("no image in {:?}", x.tool_results)),
    });
    for api in [Api::OpenAi, Api::Anthropic] {
        let (report, model) = run(api, looker.clone(), AgentOptions::default(), |o| o, [4]).await;
        no_rejections(&model);
        let ep = &report.episodes[0];
        assert_eq!(ep.total_reward, 1.0, "{api}: {:?}", ep.agent);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_budget_ends_the_episode() {
    let chatter = ScriptedModel::new(|_| Reply::call("echo", json!({"text": "more"})));
    let budget = AgentOptions {
        token_budget: Some(1),
        ..AgentOptions::default()
    };
    let (report, model) = run(Api::OpenAi, chatter, budget, |o| o, [0]).await;
    no_rejections(&model);
    let ep = &report.episodes[0];
    assert_eq!(ep.stop_reason, StopReason::TokenBudget);
    assert_eq!(ep.steps, 1, "the call that spent the budget is still made");
    // The stop before asking the model again is no turn of it.
    assert_eq!(ep.agent.as_ref().unwrap().model_calls.len(), ep.steps);
    assert!(matches!(&ep.tool_calls[0].outcome, Outcome::Output(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_fields_pass_through_and_logprobs_and_token_ids_are_kept() {
    let seen = ScriptedModel::new(|x| {
        assert_eq!(x.body["seed"], 7);
        Reply::call("submit", json!({ "answer": right_answer(x) }))
    });
    let extra = json!({"seed": 7, "logprobs": true, "return_token_ids": true});
    let extra = extra.as_object().unwrap().clone();
    let (report, model) = run(
        Api::OpenAi,
        seen,
        AgentOptions::default(),
        |o| o.extra(extra.clone()).max_tokens(64),
        [5],
    )
    .await;
    no_rejections(&model);
    let trace = report.episodes[0].agent.clone().unwrap();
    assert_eq!(trace.sampling.extra, extra);
    assert_eq!(trace.sampling.max_tokens, Some(64));
    let call = &trace.model_calls[0];
    assert!(call.logprobs.is_some());
    assert!(call.token_ids.as_ref().is_some_and(|t| !t.is_empty()));
    assert!(call
        .prompt_token_ids
        .as_ref()
        .is_some_and(|t| !t.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_key_is_sent_and_a_wrong_one_is_not_retried() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let guarded = ScriptedModel::arithmetic().api_key("sk-right");
        let (report, _) = run(
            api,
            guarded.clone(),
            AgentOptions::default(),
            |o| o.api_key("sk-right"),
            [0],
        )
        .await;
        assert_eq!(report.mean_reward(), 1.0, "{api}");
        let (report, model) = run(
            api,
            guarded,
            AgentOptions::default(),
            |o| o.api_key("sk-wrong"),
            [0],
        )
        .await;
        let error = report.episodes[0].error.as_ref().unwrap();
        assert_eq!(error.status, Some(401));
        assert_eq!(model.requests(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_server_cannot_exhaust_the_client() {
    // A 10 GB answer: refused on its Content-Length, by the model answer limit.
    let fake = Fake::start(|_, _| {
        FakeResponse::raw(|mut conn| async move {
            use tokio::io::AsyncWriteExt;
            let _ = conn
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                      Content-Length: 10000000000\r\n\r\n{",
                )
                .await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        })
    })
    .await;
    let srv = server().await;
    let c: Client = client(&srv.url());
    let model = ModelOptions::new(Api::OpenAi, format!("{}/v1", fake.url), "m")
        .connect(&c)
        .unwrap();
    let report = evaluate(
        &c.environment("conformance"),
        "train",
        [0],
        Arc::new(Agent::new(model)),
        EvalOptions::default(),
    )
    .await;
    let error = report.episodes[0].error.as_ref().unwrap();
    assert_eq!(error.kind, "too_large");
    assert!(
        error
            .message
            .contains("exceeds the client's limit of 32 MiB"),
        "{}",
        error.message
    );
    assert_eq!(fake.count("POST /v1/chat/completions"), 1, "not retried");
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_model_server_is_named() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let srv = server().await;
    let c = client(&srv.url());
    let model = ModelOptions::new(Api::OpenAi, &base, "m")
        .max_retries(0)
        .connect(&c)
        .unwrap();
    let env = c.environment("conformance");
    let report = evaluate(
        &env,
        "train",
        [0],
        Arc::new(Agent::new(model)),
        EvalOptions::default(),
    )
    .await;
    srv.shutdown().await;
    let error = report.episodes[0].error.as_ref().unwrap();
    assert_eq!(error.kind, "model");
    assert!(
        error.message.contains(&format!("cannot connect to {base}")),
        "{}",
        error.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_answer_goes_to_the_terminal_tool_on_both_apis() {
    // gsm8k's `final_answer` is its terminal tool: the model answers in prose, the agent
    // hands the prose to it, and its grade is the episode's reward.
    let srv = server().await;
    let c = client(&srv.url());
    let env = c.environment("gsm8k");
    let mut answers = Vec::new();
    for i in 0..3 {
        let task = env.task("test", i).await.unwrap();
        let (q, a) = (task["question"].as_str(), task["answer"].as_str());
        let expected: i64 = a
            .unwrap()
            .rsplit("####")
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        answers.push((q.unwrap().to_owned(), expected));
    }
    let answers = Arc::new(answers);
    for api in [Api::OpenAi, Api::Anthropic] {
        let table = Arc::clone(&answers);
        let model = ScriptedModel::new(move |x| {
            let Some(i) = table
                .iter()
                .position(|(q, _)| x.first_user_text.starts_with(q))
            else {
                return Reply::Text("I do not know.".into());
            };
            // The second task gets a wrong answer: a plain answer is graded, not rewarded.
            let n = table[i].1 + i64::from(i == 1);
            Reply::Text(format!("Adding it all up, the total is {n}."))
        })
        .bind("127.0.0.1:0")
        .await
        .unwrap();
        let opts = ModelOptions::new(api, base(&model, api), "scripted").max_retries(3);
        let agent = Agent::new(opts.connect(&c).unwrap());
        let options = EvalOptions::default().concurrency(3).max_steps(6);
        let report = evaluate(&env, "test", 0..3, Arc::new(agent), options).await;
        no_rejections(&model);
        let rewards: Vec<f64> = report.episodes.iter().map(|e| e.total_reward).collect();
        assert_eq!(rewards, [1.0, 0.0, 1.0], "{api}");
        for ep in &report.episodes {
            assert!(ep.error.is_none(), "{:?}", ep.error);
            assert_eq!(ep.stop_reason, StopReason::Finished);
            assert!(ep.finished);
            assert_eq!(ep.steps, 1);
            let [turn] = ep.tool_calls.as_slice() else {
                panic!("one call: {:?}", ep.tool_calls)
            };
            assert_eq!(turn.name, "final_answer");
            let n = answers[ep.index as usize].1 + i64::from(ep.index == 1);
            let said = format!("Adding it all up, the total is {n}.");
            assert_eq!(turn.input, json!({ "message": said }));
            assert_eq!(turn.id, None, "no model call id: the agent made this call");
            let trace = ep.agent.as_ref().unwrap();
            let roles: Vec<&str> = trace.messages.iter().map(role).collect();
            assert_eq!(roles, ["user", "assistant"]);
        }
        assert_eq!(model.requests(), 3, "one model call per episode");
    }
    srv.shutdown().await;
}
