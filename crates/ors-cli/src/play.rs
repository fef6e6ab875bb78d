//! `ors play`: one episode played by hand, line by line, from a terminal or a pipe.

use std::io::{IsTerminal, Write};

use ors_client::{Environment, Error, Session, TaskRef};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::render;

const HELP: &str = "\
Type a tool call as `NAME {JSON input}` (the input may be left out when the tool takes none),
e.g. `submit {\"answer\": \"18\"}`. Other commands: `tools`, `prompt`, `help`, `quit`.";

/// What one line of input asks for.
#[derive(Debug, PartialEq)]
enum Line {
    Empty,
    Help,
    Tools,
    Prompt,
    Quit,
    Call(String, Value),
    Bad(String),
}

fn parse(line: &str) -> Line {
    let line = line.trim();
    let (head, rest) = match line.split_once(char::is_whitespace) {
        Some((h, r)) => (h, r.trim()),
        None => (line, ""),
    };
    match (head, rest.is_empty()) {
        ("", _) => Line::Empty,
        ("help" | "?", true) => Line::Help,
        ("tools", true) => Line::Tools,
        ("prompt", true) => Line::Prompt,
        ("quit" | "exit", true) => Line::Quit,
        (name, true) => Line::Call(name.to_owned(), Value::Object(Default::default())),
        (name, false) => match serde_json::from_str::<Value>(rest) {
            Ok(v @ Value::Object(_)) => Line::Call(name.to_owned(), v),
            Ok(_) => Line::Bad("the input must be a JSON object, like {\"answer\": \"18\"}".into()),
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
    let prompt = session.prompt().await?;
    let tools = session.tools().await?;
    print!("{}", render::blocks(&prompt));
    println!();
    print!("{}", render::tools_table(&tools));
    println!();
    if interactive {
        println!("{HELP}");
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
            Line::Help => println!("{HELP}"),
            Line::Tools => print!("{}", render::tools_table(&session.tools().await?)),
            Line::Prompt => print!("{}", render::blocks(&session.prompt().await?)),
            Line::Quit => {
                println!("quit; total reward {total}");
                return Ok(total);
            }
            Line::Bad(msg) => println!("{msg}"),
            Line::Call(name, input) => match session.call(&name, input).await {
                Ok(out) => {
                    total += out.reward.unwrap_or(0.0);
                    print!("{}", render::output(&out));
                    println!("total reward {total}");
                    if out.finished {
                        println!("episode finished; total reward {total}");
                        return Ok(total);
                    }
                }
                Err(Error::ToolError { message, .. }) => println!("tool error: {message}"),
                Err(Error::ToolCrashed { message }) => println!("tool crashed: {message}"),
                Err(e) => return Err(e),
            },
        }
        let _ = std::io::stdout().flush();
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
        assert!(matches!(parse("submit 72"), Line::Bad(_)));
        assert!(matches!(parse("submit {oops"), Line::Bad(m) if m.contains("not JSON")));
    }
}
