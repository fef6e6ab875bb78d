//! The gsm8k environment without a server: splits, tasks, prompt and `submit`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use ors_examples::gsm8k::{Dataset, Gsm8k, MathTask, Problems};
use ors_server::prelude::*;
use ors_server::runtime::env::{DynEnvironment, EnvHandle, Episode};
use serde_json::{json, Value};

fn natalia() -> MathTask {
    MathTask {
        id: "0".to_owned(),
        question: "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?".to_owned(),
        answer: "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72".to_owned(),
    }
}

async fn episode(task: MathTask) -> Episode<Gsm8k> {
    EnvHandle::<Gsm8k>::default()
        .episode(task, Secrets::default())
        .await
        .unwrap()
}

async fn submit(env: &mut Episode<Gsm8k>, answer: &str) -> Value {
    let out = env
        .call(
            ToolContext::detached(),
            "submit",
            json!({ "answer": answer }),
        )
        .await;
    serde_json::to_value(out).unwrap()
}

fn result(text: &str, reward: f64) -> Value {
    json!({"ok": true, "output": {
        "blocks": [{"type": "text", "text": text, "detail": null}],
        "metadata": null, "reward": reward, "finished": true}})
}

#[test]
fn name_splits_and_tools() {
    let gsm8k = EnvHandle::<Gsm8k>::default();
    assert_eq!(gsm8k.name(), "gsm8k");
    assert_eq!(
        serde_json::to_value(gsm8k.splits()).unwrap(),
        json!([{"name": "train", "type": "train"}, {"name": "test", "type": "test"}])
    );
    let tools = gsm8k.tools();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "submit");
    assert!(!tools[0].description.is_empty());
    let schema = tools[0].input_schema.as_ref().unwrap();
    assert_eq!(schema["properties"]["answer"]["type"], "string");
    assert_eq!(schema["required"], json!(["answer"]));
}

#[tokio::test]
async fn embedded_splits_have_at_least_200_problems() {
    let handle = EnvHandle::<Gsm8k>::default();
    assert!(
        handle.table_errors().is_empty(),
        "{:?}",
        handle.table_errors()
    );
    let train = handle.num_tasks("train").await.unwrap();
    let test = handle.num_tasks("test").await.unwrap();
    assert_eq!((train, test), (160, 50));
    let task = handle.task("test", 0).await.unwrap();
    assert_eq!(task["id"], "0");
    assert!(task["answer"].as_str().unwrap().contains("\n#### "));
    assert!(handle.num_tasks("validation").await.is_err());
}

#[tokio::test]
async fn every_embedded_problem_accepts_its_own_answer() {
    for split in ["train", "test"] {
        for task in Problems::Embedded.split_tasks(split).unwrap() {
            let gold = task.answer.rsplit("#### ").next().unwrap().to_owned();
            let mut env = episode(task).await;
            assert_eq!(submit(&mut env, &gold).await, result("Correct!", 1.0));
        }
    }
}

#[tokio::test]
async fn prompt_is_the_question_and_an_instruction() {
    let env = episode(natalia()).await;
    let prompt = env.get().unwrap().prompt().await.unwrap();
    assert_eq!(prompt.len(), 1);
    let text = prompt[0].as_text().unwrap();
    assert!(text.starts_with(&natalia().question), "{text}");
    assert!(text.contains("submit"), "{text}");
    assert!(
        !text.contains("72"),
        "the prompt must not leak the answer: {text}"
    );
    assert_eq!(env.tools().len(), 1);
}

#[tokio::test]
async fn submit_is_tolerant_of_spelling_but_not_of_value() {
    for good in ["72", " 72 ", "$72", "72.0", "#### 72"] {
        let mut env = episode(natalia()).await;
        assert_eq!(
            submit(&mut env, good).await,
            result("Correct!", 1.0),
            "{good:?}"
        );
    }
    for bad in ["73", "7.2", "", "seventy-two"] {
        let mut env = episode(natalia()).await;
        // A miss does not reveal the expected answer.
        assert_eq!(
            submit(&mut env, bad).await,
            result("Incorrect", 0.0),
            "{bad:?}"
        );
    }
}

#[tokio::test]
async fn commas_in_the_gold_answer_match() {
    let mut task = natalia();
    task.answer = task.answer.replace("#### 72", "#### 1,072");
    let mut env = episode(task).await;
    assert_eq!(submit(&mut env, "1072").await, result("Correct!", 1.0));
}

#[tokio::test]
async fn task_spec_without_id_is_accepted_and_one_without_marker_is_not() {
    let handle = EnvHandle::<Gsm8k>::default();
    let spec = json!({"question": natalia().question, "answer": natalia().answer});
    assert!(handle.create(spec, Secrets::default(), None).await.is_ok());
    let spec = json!({"question": "q", "answer": "72"});
    let err = handle
        .create(spec, Secrets::default(), None)
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("####"), "{err}");
}

/// Two gsm8k environments, each with its own problems: what one serves the other does not
/// see, and neither needs anything set up before the other.
#[tokio::test]
async fn two_sets_of_problems_are_two_environments() {
    let one = Dataset {
        train: vec![natalia()],
        test: Vec::new(),
    };
    let small = EnvHandle::<Gsm8k>::new(Problems::Memory(one)).named("gsm8k-small");
    let embedded = EnvHandle::<Gsm8k>::default();
    assert_eq!(small.name(), "gsm8k-small");
    assert_eq!(small.num_tasks("train").await.unwrap(), 1);
    assert_eq!(small.num_tasks("test").await.unwrap(), 0);
    assert_eq!(embedded.num_tasks("train").await.unwrap(), 160);
    assert_eq!(
        small.task("train", 0).await.unwrap()["answer"],
        natalia().answer
    );
    assert_ne!(
        embedded.task("train", 0).await.unwrap()["answer"],
        natalia().answer
    );
}
