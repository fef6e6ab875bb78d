//! `ors play`: one episode played by hand, line by line, from a terminal or a pipe.

use std::io::{IsTerminal, Write};

use ors_client::{Environment, Error, Session, TaskRef, ToolSpec};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::render;

/// The help, its example a call of one of this episode's own tools.
fn help(tools: &[ToolSpec]) -> String {
    let with_input = tools.iter().find(|t| t.input_schema.is_some());
    let call = with_input.or(tools.first()).map(call_example);
    let example = call.map(|c| format!(", as `{c}` here")).unwrap_or_default();
    format!(
        "Type a tool call as `NAME {{JSON input}}`, the input an object of the tool's parameters \
         (left out when the tool takes none){example}. Other commands: `tools`, `prompt`, \
         `help`, `quit`."
    )
}

/// A call of `tool` as typed here: its name and an input of its required parameters (all of
/// them when none is required), each a placeholder of its type.
fn call_example(tool: &ToolSpec) -> String {
    let Some(schema) = &tool.input_schema else {
        return tool.name.clone();
    };
    let props = schema.get("properties").and_then(Value::as_object);
    let required = render::required(schema.get("required"));
    let mut input = serde_json::Map::new();
    for (name, prop) in props.into_iter().flatten() {
        if required.is_empty() || required.contains(&name.as_str()) {
            input.insert(name.clone(), placeholder(prop));
        }
    }
    if input.is_empty() {
        return tool.name.clone();
    }
    format!("{} {}", tool.name, Value::Object(input))
}

/// A value of the type a property's schema names: its first enum value, `"..."` for a string.
fn placeholder(prop: &Value) -> Value {
    if let Some(first) = prop.get("enum").and_then(|e| e.get(0)) {
        return first.clone();
    }
    let ty = match prop.get("type") {
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null"),
        t => t.and_then(Value::as_str),
    };
    match ty {
        Some("integer") | Some("number") => json!(0),
        Some("boolean") => json!(false),
        Some("array") => json!([]),
        Some("object") => json!({}),
        _ => json!("..."),
    }
}

/// What one line of input asks for.
#[derive(Debug, PartialEq)]
enum Line {
    Empty,
    Help,
    Tools,
    Prompt,
    Quit,
    Call(String, Value),
    /// A call whose input is JSON but not an object: the tool, and what the input was.
    NotObject(String, &'static str),
    Bad(String),
}

fn parse(line: &str) -> Line {
    let line = line.trim();
    let (head, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    match (head, rest.is_empty()) {
        ("", _) => Line::Empty,
        ("help" | "?", true) => Line::Help,
        ("tools", true) => Line::Tools,
        ("prompt", true) => Line::Prompt,
        ("quit" | "exit", true) => Line::Quit,
        (name, true) => Line::Call(name.to_owned(), Value::Object(Default::default())),
        (name, false) => match serde_json::from_str::<Value>(rest) {
            Ok(v @ Value::Object(_)) => Line::Call(name.to_owned(), v),
            Ok(other) => Line::NotObject(name.to_owned(), ors_core::types::json_kind(&other)),
            Err(e) => Line::Bad(format!("the input is not JSON: {e}")),
        },
    }
}

/// Open an episode on task `index` of `split` (progress events printed as they come), play
/// it, and delete it.
pub async fn run(env: &Environment, split: &str, index: i64) -> Result<(), Error> {
    let session = env
        .session(TaskRef::at(split, index))
        .on_progress(|p| println!("{}", render::progress(p.value)))
        .open()
        .await?;
    let played = play(&session).await;
    let closed = session.close().await;
    played?;
    closed
}

/// Play `session` interactively; returns the episode's total reward. Tool errors and crashes are
/// shown and the game goes on; a dead session or a broken connection ends it with an error.
async fn play(session: &Session) -> Result<f64, Error> {
    let interactive = std::io::stdin().is_terminal();
    println!("{}", render::blocks(&session.prompt().await?));
    let listing = session.listing().await?;
    println!("{}", render::tools_table(&listing));
    if interactive {
        println!("{}", help(&listing.tools));
    }
    let mut total = 0.0;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        if interactive {
            print!("> ");
            let _ = std::io::stdout().flush();
        }
        let line = lines
            .next_line()
            .await
            .map_err(|e| Error::InvalidArgument(format!("cannot read stdin: {e}")))?;
        let Some(line) = line else {
            println!("end of input; total reward {total}");
            return Ok(total);
        };
        match parse(&line) {
            Line::Empty => {}
            Line::Help => println!("{}", help(&listing.tools)),
            Line::Tools => print!("{}", render::tools_table(&listing)),
            Line::Prompt => print!("{}", render::blocks(&session.prompt().await?)),
            Line::Quit => {
                println!("quit; total reward {total}");
                return Ok(total);
            }
            Line::NotObject(name, kind) => {
                let tool = listing.tools.iter().find(|t| t.name == name);
                let example = tool.map(|t| format!(", as `{}`", call_example(t)));
                let example = example.unwrap_or_else(|| " (`tools` lists them)".to_owned());
                println!(
                    "the input must be a JSON object of the tool's parameters{example}, not {kind}"
                );
            }
            Line::Bad(msg) => println!("{msg}"),
            Line::Call(name, input) => match session.call(&name, input).await {
                Ok(out) => {
                    total += out.reward.unwrap_or(0.0);
                    print!("{}", render::output(&out));
                    if out.finished {
                        println!("episode finished; total reward {total}");
                        return Ok(total);
                    }
                    println!("total reward {total}");
                }
                Err(Error::ToolError { message, .. }) => println!("tool error: {message}"),
                Err(Error::ToolCrashed { message }) => println!("tool crashed: {message}"),
                Err(e) => return Err(e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_parse_into_commands_and_calls() {
        assert_eq!(
            parse(r#"submit {"answer": "72"}"#),
            Line::Call("submit".into(), json!({"answer": "72"}))
        );
        assert_eq!(
            parse("  counter  "),
            Line::Call("counter".into(), json!({}))
        );
        assert_eq!(parse("tools"), Line::Tools);
        assert_eq!(parse("quit"), Line::Quit);
        assert_eq!(parse(""), Line::Empty);
        assert_eq!(
            parse("submit 72"),
            Line::NotObject("submit".into(), "a number")
        );
        assert!(matches!(parse("submit {oops"), Line::Bad(m) if m.contains("not JSON")));
    }

    #[test]
    fn the_help_shows_a_call_of_the_episodes_own_tools() {
        let schema = |v: Value| v.as_object().cloned();
        let tools = [
            ToolSpec::new("counter", "d", None),
            ToolSpec::new(
                "move",
                "d",
                schema(json!({"type": "object", "properties": {
                    "dir": {"enum": ["north", "south"]},
                    "steps": {"type": "integer"},
                    "note": {"type": ["string", "null"]}
                }, "required": ["dir", "steps"]})),
            ),
        ];
        assert_eq!(call_example(&tools[1]), r#"move {"dir":"north","steps":0}"#);
        assert_eq!(call_example(&tools[0]), "counter");
        let h = help(&tools);
        assert!(
            h.contains(r#"as `move {"dir":"north","steps":0}` here"#),
            "{h}"
        );
        assert!(!h.contains("gsm8k"), "{h}");
        // Without required fields every field is shown.
        let open = ToolSpec::new(
            "say",
            "d",
            schema(json!({"type": "object", "properties": {"text": {"type": "string"}}})),
        );
        assert_eq!(call_example(&open), r#"say {"text":"..."}"#);
    }
}
