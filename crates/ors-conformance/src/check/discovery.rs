//! Discovery checks: the environment is listed, its tools and splits parse and are usable, and
//! the task endpoints agree with each other.

use ors_client::{Environment, Error, ToolSpec};
use ors_core::TerminalToolSpec;
use serde_json::{json, Value};

use super::options::sample_indices;
use super::report::{count, id_part, Recorder};
use super::CheckItem;

/// What the split checks learnt about one split, for the episode checks.
pub(super) struct SplitInfo {
    /// The split's name.
    pub name: String,
    /// How many tasks it has (from `tasks`, else `num_tasks`); `None` when neither answered.
    pub count: Option<u64>,
}

/// `discovery.listed`: `/list_environments` names the environment.
pub(super) fn listed(rec: &mut Recorder<'_>, envs: Result<Vec<String>, Error>, env: &str) {
    let id = "discovery.listed";
    rec.push(match envs {
        Ok(envs) if envs.iter().any(|e| e.eq_ignore_ascii_case(env)) => CheckItem::ok(id),
        Ok(envs) => CheckItem::problem(
            id,
            format!(
                "GET /list_environments does not list '{env}' (it lists {}); check the name, or \
                 register the environment on the server",
                if envs.is_empty() {
                    "nothing".to_owned()
                } else {
                    envs.join(", ")
                }
            ),
        ),
        Err(e) => CheckItem::problem(
            id,
            format!("GET /list_environments failed: {e}; it must answer a JSON list of names"),
        ),
    });
}

/// `discovery.tools`, then the spec checks of each shared tool; returns the tools and the
/// terminal tool the listing names.
pub(super) async fn tools(
    rec: &mut Recorder<'_>,
    env: &Environment,
) -> (Vec<ToolSpec>, Option<TerminalToolSpec>) {
    let id = "discovery.tools";
    let (tools, terminal) = match env.listing().await {
        Ok(t) => (t.tools, t.terminal_tool),
        Err(e) => {
            rec.push(CheckItem::problem(
                id,
                format!(
                    "GET /{}/tools failed: {e}; it must answer {{\"tools\": [{{\"name\", \
                     \"description\", \"input_schema\"}}, ...]}}",
                    env.name()
                ),
            ));
            return (Vec::new(), None);
        }
    };
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    let twice: Vec<&str> = names
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    rec.push(if tools.is_empty() {
        CheckItem::problem(
            id,
            "the environment lists no tools: an agent acts only through tools; add at least one",
        )
    } else if !twice.is_empty() {
        CheckItem::problem(
            id,
            format!(
                "several tools are named {}: a call by name cannot tell them apart; rename them",
                twice.join(", ")
            ),
        )
    } else {
        CheckItem::ok_with(id, count(tools.len(), "tool"))
    });
    for spec in &tools {
        tool_spec(rec, spec, "tool");
    }
    (tools, terminal)
}

/// `tool.<name>.terminal` for the terminal tool the listing names (PROTOCOL_NOTES row
/// `terminal-tool`); returns it as the tool a harness calls, to be fuzzed as the others are:
/// its one field a required string (the model's answer in prose), or no input.
pub(super) fn terminal_tool(
    rec: &mut Recorder<'_>,
    term: &TerminalToolSpec,
    tools: &[ToolSpec],
) -> ToolSpec {
    let id = format!("tool.{}.terminal", id_part(&term.name));
    let name = &term.name;
    rec.push(if !ors_core::is_valid_tool_name(name) {
        CheckItem::problem(
            id,
            format!(
                "the terminal tool's name {name:?} breaks the tool name rule (1 to {} letters, \
                 digits, _ or -); harnesses call it by name; rename it",
                ors_core::MAX_TOOL_NAME_LEN
            ),
        )
    } else if tools.iter().any(|t| &t.name == name) {
        CheckItem::problem(
            id,
            format!(
                "the terminal tool '{name}' is also listed among the tools: it is the handler of \
                 an answer given without a tool call, listed apart; mark only one tool terminal, \
                 or rename one of them"
            ),
        )
    } else {
        CheckItem::ok_with(
            id,
            match &term.arg {
                Some(arg) => format!("an answer in prose goes in '{arg}'"),
                None => "takes no input".to_owned(),
            },
        )
    });
    let schema = term.arg.as_ref().and_then(|arg| {
        let properties = json!({ arg: {"type": "string"} });
        json!({"type": "object", "properties": properties, "required": [arg]})
            .as_object()
            .cloned()
    });
    ToolSpec::new(name, term.description.clone(), schema)
}

/// `tool.<name>.name`, `.description` and `.input-schema` for one tool spec.
pub(super) fn tool_spec(rec: &mut Recorder<'_>, spec: &ToolSpec, what: &str) {
    let base = format!("tool.{}", id_part(&spec.name));
    let name = &spec.name;
    rec.push(if ors_core::is_valid_tool_name(name) {
        CheckItem::ok(format!("{base}.name"))
    } else {
        let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-';
        let suggestion: String = name
            .chars()
            .map(|c| if allowed(c) { c } else { '_' })
            .take(ors_core::MAX_TOOL_NAME_LEN)
            .collect();
        CheckItem::problem(
            format!("{base}.name"),
            format!(
                "the {what} name {name:?} breaks the rule OpenAI, Anthropic and Gemini enforce \
                 (1 to {} characters, each a letter, digit, _ or -), so models cannot call it; \
                 rename it, e.g. {suggestion:?}",
                ors_core::MAX_TOOL_NAME_LEN
            ),
        )
    });
    rec.push(if spec.description.trim().is_empty() {
        CheckItem::problem(
            format!("{base}.description"),
            format!(
                "the {what} '{name}' has an empty description: the model reads it to decide \
                 when and how to call the tool; write one (a doc comment on the #[tool] method, \
                 a docstring in Python)"
            ),
        )
    } else {
        CheckItem::ok(format!("{base}.description"))
    });
    rec.push(match schema_problem(spec) {
        None if spec.input_schema.is_none() => {
            CheckItem::ok_with(format!("{base}.input-schema"), "no input")
        }
        None => CheckItem::ok(format!("{base}.input-schema")),
        Some(p) => CheckItem::problem(
            format!("{base}.input-schema"),
            format!("the input_schema of the {what} '{name}' {p}"),
        ),
    });
}

/// What is wrong with a tool's input schema, if anything.
pub(super) fn schema_problem(spec: &ToolSpec) -> Option<String> {
    let schema = spec.input_schema.as_ref()?;
    let value = Value::Object(schema.clone());
    if let Err(e) = super::schema::Schema::new(value) {
        return Some(format!(
            "is not a valid JSON Schema: {e}; providers reject such a tool definition: fix the \
             schema (or set input_schema to null for no input)"
        ));
    }
    root_type_problem(schema)
}

/// What is wrong with the root of a valid input schema, if anything: it must be an object.
pub(super) fn root_type_problem(schema: &serde_json::Map<String, Value>) -> Option<String> {
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => None,
        other => Some(format!(
            "has type {}, not \"object\": a tool input is a JSON object of named fields \
             (providers require `\"type\": \"object\"` at the root); wrap the value in a field",
            other.map_or_else(|| "(none)".to_owned(), Value::to_string)
        )),
    }
}

/// `discovery.splits` and the checks of each split; returns what the episodes need.
pub(super) async fn splits(
    rec: &mut Recorder<'_>,
    env: &Environment,
    tasks: Option<usize>,
) -> Vec<SplitInfo> {
    let id = "discovery.splits";
    let splits = match env.splits().await {
        Ok(s) => s,
        Err(e) => {
            rec.push(CheckItem::problem(
                id,
                format!(
                    "GET /{}/splits failed: {e}; it must answer [{{\"name\": ..., \"type\": \
                     \"train\" | \"validation\" | \"test\"}}, ...]",
                    env.name()
                ),
            ));
            return Vec::new();
        }
    };
    rec.push(if splits.is_empty() {
        CheckItem::problem(
            id,
            "the environment has no splits, so no task can be served; add at least one",
        )
    } else {
        let names: Vec<String> = splits
            .iter()
            .map(|s| format!("{} ({})", s.name, s.split_type))
            .collect();
        CheckItem::ok_with(id, names.join(", "))
    });
    let mut out = Vec::with_capacity(splits.len());
    for split in &splits {
        out.push(one_split(rec, env, &split.name, tasks).await);
    }
    out
}

/// `split.<name>.tasks`, `.num-tasks`, `.task` and `.task-range`.
async fn one_split(
    rec: &mut Recorder<'_>,
    env: &Environment,
    split: &str,
    sample: Option<usize>,
) -> SplitInfo {
    let id = |check: &str| format!("split.{}.{check}", id_part(split));
    let failed = |route: &str, e: Error| {
        let env = env.name();
        CheckItem::problem(
            id(&route.replace('_', "-")),
            format!("POST /{env}/{route} for split '{split}' failed: {e}"),
        )
    };
    let listed = match env.tasks(split).await {
        Ok(tasks) => {
            rec.push(if tasks.is_empty() {
                CheckItem::problem(
                    id("tasks"),
                    format!(
                        "split '{split}' has no tasks, so no episode can start on it; add tasks \
                         or drop the split"
                    ),
                )
            } else {
                CheckItem::ok_with(id("tasks"), count(tasks.len(), "task"))
            });
            Some(tasks)
        }
        // Listing a huge split may be refused by design; the index routes then serve it.
        Err(Error::Http {
            status: 400,
            detail,
            ..
        }) if detail.contains("not supported") => {
            rec.push(CheckItem::ok_with(
                id("tasks"),
                "listing not supported; checked through num_tasks and task",
            ));
            None
        }
        Err(e) => {
            rec.push(failed("tasks", e));
            None
        }
    };
    let counted = env.num_tasks(split).await;
    let counted = counted.map_err(|e| rec.push(failed("num_tasks", e))).ok();
    if let Some(n) = counted {
        rec.push(match &listed {
            Some(tasks) if tasks.len() as u64 != n => CheckItem::problem(
                id("num-tasks"),
                format!(
                    "num_tasks of split '{split}' says {n} but tasks lists {}; a trainer \
                     that samples by index would ask for tasks that do not exist or never \
                     see some; count the same list tasks serves",
                    tasks.len()
                ),
            ),
            _ => CheckItem::ok(id("num-tasks")),
        });
    }
    let count = listed.as_ref().map(|t| t.len() as u64).or(counted);
    if let Some(n) = count.filter(|c| *c > 0) {
        let agrees = task_agrees(env, split, listed.as_deref(), n, sample).await;
        rec.push(CheckItem::of(id("task"), agrees));
        if let Some(tasks) = &listed {
            let agrees = range_agrees(env, split, tasks).await;
            rec.push(CheckItem::of(id("task-range"), agrees));
        }
    }
    SplitInfo {
        name: split.to_owned(),
        count,
    }
}

/// `split.<name>.task`: `task(i)` answers, and equals `tasks[i]`, for the sampled indices.
async fn task_agrees(
    env: &Environment,
    split: &str,
    listed: Option<&[Value]>,
    count: u64,
    sample: Option<usize>,
) -> Result<(), String> {
    for i in sample_indices(count, sample) {
        let got = env.task(split, i as i64).await.map_err(|e| {
            let env = env.name();
            format!("POST /{env}/task for task {i} of split '{split}' failed: {e}")
        })?;
        if let Some(want) = listed.and_then(|t| t.get(i as usize)) {
            if got != *want {
                return Err(format!(
                    "task {i} of split '{split}' differs between task ({}) and tasks ({}); an \
                     episode created by index would not run the task listed; serve one list \
                     from both",
                    show(&got),
                    show(want)
                ));
            }
        }
    }
    Ok(())
}

/// `split.<name>.task-range`: the first and last few tasks by `task_range` equal `tasks`.
async fn range_agrees(env: &Environment, split: &str, tasks: &[Value]) -> Result<(), String> {
    let n = tasks.len() as i64;
    for (start, stop) in [(0, n.min(3)), ((n - 2).max(0), n)] {
        let got = env
            .task_range(split, Some(start), Some(stop))
            .await
            .map_err(|e| {
                let env = env.name();
                format!("POST /{env}/task_range {start}..{stop} of split '{split}' failed: {e}")
            })?;
        if got != tasks[start as usize..stop as usize] {
            return Err(format!(
                "task_range {start}..{stop} of split '{split}' gives {} tasks that differ from \
                 tasks[{start}..{stop}] (first: {}); serve one list from both",
                got.len(),
                got.first().map_or_else(|| "none".to_owned(), show)
            ));
        }
    }
    Ok(())
}

/// A task, short enough for a problem line.
fn show(v: &Value) -> String {
    ors_core::text::preview(&v.to_string(), 120)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The problems of a terminal tool named `name` beside `tools`.
    fn terminal_problems(name: &str, tools: &[ToolSpec]) -> Vec<String> {
        let mut ignore = |_: &CheckItem| {};
        let mut rec = Recorder::new(&mut ignore);
        let term = TerminalToolSpec {
            name: name.to_owned(),
            arg: Some("answer".to_owned()),
            description: String::new(),
        };
        terminal_tool(&mut rec, &term, tools);
        rec.into_items()
            .into_iter()
            .filter_map(|i| i.problem)
            .collect()
    }

    #[test]
    fn a_bad_terminal_tool_is_named_in_one_plain_sentence() {
        let listed = [ToolSpec::new("submit", "Submit.", None)];
        let problems = [
            terminal_problems("no spaces allowed", &[]),
            terminal_problems("submit", &listed),
        ];
        for problem in problems.iter().flatten() {
            // Each sentence reads as written, without the source's indentation in it.
            assert!(!problem.contains("  "), "{problem:?}");
        }
        assert!(problems[0][0].contains("letters, digits, _ or -"));
        assert!(problems[1][0].contains("listed among the tools"));
    }
}
