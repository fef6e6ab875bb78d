//! `ors call`: one episode, the given calls in order, every result and progress event printed.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Args;
use ors_client::{Client, Error, RunToolOutput, Session};
use serde_json::{json, Value};

use crate::args::{JsonOut, TaskArgs};
use crate::render;

/// Parse `TOOL [INPUT] TOOL [INPUT] ...`: a word starting with `{` (after blanks) is the JSON
/// input of the tool before it; a tool without one gets `{}`. Tool names never start with `{`.
pub fn parse_calls(words: &[String]) -> Result<Vec<(String, Value)>, Error> {
    let mut calls: Vec<(String, Value)> = Vec::new();
    let mut last_has_input = true;
    for word in words {
        if word.trim_start().starts_with('{') {
            let Some((name, input)) = calls.last_mut().filter(|_| !last_has_input) else {
                return Err(Error::InvalidArgument(format!(
                    "{word:?} is an input, but no tool comes before it (write TOOL INPUT)"
                )));
            };
            *input = serde_json::from_str(word)
                .map_err(|e| Error::InvalidArgument(format!("input of {name} is not JSON: {e}")))?;
            last_has_input = true;
        } else {
            calls.push((word.clone(), json!({})));
            last_has_input = false;
        }
    }
    Ok(calls)
}

/// The arguments of `ors call`.
#[derive(Args, Debug)]
pub struct CallArgs {
    /// Environment name.
    env: String,
    #[command(flatten)]
    task: TaskArgs,
    /// Tools to call, each followed by its JSON input unless it takes none, e.g.
    /// `submit '{"answer": "18"}'` or `counter counter`.
    #[arg(required = true, num_args = 1.., value_name = "TOOL [INPUT]")]
    calls: Vec<String>,
    #[command(flatten)]
    out: JsonOut,
}

/// Open the episode, make the calls, print them, delete it. Exit 1 when a call failed.
pub async fn call(client: &Client, args: CallArgs) -> Result<ExitCode, Error> {
    let calls = parse_calls(&args.calls)?;
    let task_ref = args.task.task_ref()?;
    let json = args.out.json;
    let progress: Arc<Mutex<Vec<Value>>> = Arc::default();
    let sink = Arc::clone(&progress);
    let session = client
        .environment(args.env)
        .session(task_ref)
        .on_progress(move |p| {
            if !json {
                println!("{}", render::progress(p.value));
            } else if let Ok(mut events) = sink.lock() {
                events.push(p.value.clone());
            }
        })
        .open()
        .await?;
    let result = episode(&session, &calls, json, &progress).await;
    let closed = session.close().await;
    let failed = result?;
    closed?;
    if failed > 0 {
        let msg = format!("{failed} of {} tool calls failed", calls.len());
        return Ok(crate::render::fail("ors", &msg));
    }
    Ok(ExitCode::SUCCESS)
}

/// Make the calls and print them; returns how many failed (tool error or crash).
async fn episode(
    session: &Session,
    calls: &[(String, Value)],
    json: bool,
    progress: &Mutex<Vec<Value>>,
) -> Result<usize, Error> {
    let prompt = session.prompt().await?;
    if !json {
        println!("session {}", session.sid());
        print!("{}", render::blocks(&prompt));
    }
    let mut total = 0.0;
    let mut failed = 0;
    let mut results = Vec::new();
    for (name, input) in calls {
        if !json {
            println!("\n> {name} {input}");
        }
        let outcome = session.call_raw(name, input.clone()).await;
        let events: Vec<Value> = progress
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default();
        let mut record = json!({"tool": name, "input": input});
        if !events.is_empty() {
            record["progress"] = Value::Array(events);
        }
        // What is printed, and where the record keeps the outcome.
        let (text, key, value) = match outcome {
            Ok(RunToolOutput::Success(out)) => {
                total += out.reward.unwrap_or(0.0);
                let text = render::output(&out);
                (text, "result", json!(RunToolOutput::Success(out)))
            }
            Ok(RunToolOutput::Error(message)) => {
                failed += 1;
                let text = format!("tool error: {message}\n");
                (text, "result", json!(RunToolOutput::Error(message)))
            }
            Err(Error::ToolCrashed { message }) => {
                failed += 1;
                let text = format!("tool crashed: {message}\n");
                (text, "crashed", json!(message))
            }
            Err(e) => return Err(e),
        };
        if !json {
            print!("{text}");
        }
        record[key] = value;
        results.push(record);
    }
    if json {
        let doc = json!({
            "sid": session.sid(),
            "prompt": prompt,
            "calls": results,
            "total_reward": total,
        });
        println!("{}", render::pretty(&doc));
    } else {
        println!("\ntotal reward {total}");
    }
    Ok(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[&str]) -> Vec<String> {
        ws.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn a_tool_without_input_gets_an_empty_object() {
        let calls =
            parse_calls(&words(&["counter", "echo", r#"{"text": "hi"}"#, "counter"])).unwrap();
        assert_eq!(
            calls,
            vec![
                ("counter".to_owned(), json!({})),
                ("echo".to_owned(), json!({"text": "hi"})),
                ("counter".to_owned(), json!({})),
            ]
        );
    }

    #[test]
    fn an_input_needs_a_tool_and_valid_json() {
        assert!(parse_calls(&words(&[r#"{"a": 1}"#])).is_err());
        assert!(parse_calls(&words(&["echo", "{}", "{}"])).is_err());
        let e = parse_calls(&words(&["echo", "{not json"])).unwrap_err();
        assert!(e.to_string().contains("input of echo is not JSON"), "{e}");
    }
}
