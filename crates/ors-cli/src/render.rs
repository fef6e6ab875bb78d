//! Human-readable output of the `ors` tool: tables, blocks, tool parameters, results.

use std::fmt::Write as _;

use ors_client::{Block, ToolOutput, ToolSpec};
use ors_core::ListToolsOutput;
use serde_json::Value;

/// A table with a header row; every column but the last is padded, cells are cut at `max`.
pub fn table(headers: &[impl AsRef<str>], rows: &[Vec<String>], max: usize) -> String {
    let header = headers.iter().map(|h| h.as_ref().to_owned()).collect();
    let cut = rows
        .iter()
        .map(|r| r.iter().map(|c| truncate(&one_line(c), max)).collect());
    let all: Vec<Vec<String>> = std::iter::once(header).chain(cut).collect();
    let mut widths = vec![0; headers.len()];
    for row in &all {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &all {
        let mut line = String::new();
        for (cell, &width) in row.iter().zip(&widths) {
            // Padded to the column's width (in characters), then two spaces; the last
            // column's padding goes with the trimming below.
            let _ = write!(line, "{cell:<width$}  ");
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// The properties an object schema lists as required.
pub use ors_conformance::check::fuzz::required;
/// `s` with control characters (line breaks) turned into spaces; `s` cut to `max` characters,
/// marking the cut with `...`.
pub use ors_conformance::check::{one_line, truncate};

/// A tool's parameters in one line: `answer: string, limit?: integer`, or `(none)`.
pub fn params(spec: &ToolSpec) -> String {
    let schema = spec.input_schema.as_ref();
    let props = schema.and_then(|s| s.get("properties")?.as_object());
    let (Some(schema), Some(props)) = (schema, props.filter(|p| !p.is_empty())) else {
        return "(none)".into();
    };
    let required = required(schema.get("required"));
    let root = Value::Object(schema.clone());
    let mut shown = Vec::new();
    for (name, s) in props {
        let optional = !required.contains(&name.as_str());
        let opt = if optional { "?" } else { "" };
        let t = resolve(&root, s);
        // The property's own default, else its type's.
        let default = s.get("default").or_else(|| t.get("default"));
        let default = default.map(|d| format!(" = {d}")).unwrap_or_default();
        shown.push(format!("{name}{opt}: {}{default}", type_name(&root, t)));
    }
    shown.join(", ")
}

/// A property schema with a local `$ref` (`#/$defs/Mode`, the form pydantic and schemars give
/// enums and nested types) followed, also when it is the one member of an `allOf`.
fn resolve<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
    match s.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
        Some([one]) if ref_target(root, s).is_none() => resolve_ref(root, one),
        _ => resolve_ref(root, s),
    }
}

/// What the local `$ref` of `s` points at, if it has one.
fn ref_target<'a>(root: &'a Value, s: &'a Value) -> Option<&'a Value> {
    let pointer = s.get("$ref").and_then(Value::as_str)?.strip_prefix('#')?;
    root.pointer(pointer)
}

/// `s`, or what its local `$ref` points at.
fn resolve_ref<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
    ref_target(root, s).unwrap_or(s)
}

/// The type of a property schema in a word or two; an enum as its values (`"a"|"b"`).
fn type_name(root: &Value, s: &Value) -> String {
    // The type of an item or a member schema.
    let inner = |m: &Value| type_name(root, resolve_ref(root, m));
    if let Some(Value::Array(values)) = s.get("enum") {
        return one_of(values.iter().map(Value::to_string));
    }
    if let Some(c) = s.get("const") {
        return c.to_string();
    }
    match s.get("type") {
        Some(Value::String(t)) if t == "array" => match s.get("items") {
            Some(items) => format!("{}[]", inner(items)),
            None => "array".into(),
        },
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => one_of(ts.iter().filter_map(Value::as_str).map(str::to_owned)),
        _ if s.get("$ref").is_some() => "object".into(),
        _ => match s.get("anyOf").or(s.get("oneOf")).and_then(Value::as_array) {
            // `Option<T>` / `T | None`: anyOf [T, null].
            Some(members) => one_of(members.iter().map(inner)),
            None => "any".into(),
        },
    }
}

/// Types that a value may have, as `a|b`.
fn one_of(types: impl Iterator<Item = String>) -> String {
    types.collect::<Vec<_>>().join("|")
}

/// The tools as a table: name, parameters, first line of the description. The terminal tool,
/// which listings name apart from their tools, is the last row, marked `(terminal)`: a harness
/// calls it with the model's plain answer, and it can be called by name like any other.
pub fn tools_table(listing: &ListToolsOutput) -> String {
    let (tools, terminal) = (&listing.tools, listing.terminal_tool.as_ref());
    let first_line = |d: &str| d.lines().next().unwrap_or("").to_owned();
    let row = |t: &ToolSpec| vec![t.name.clone(), params(t), first_line(&t.description)];
    let mut rows: Vec<_> = tools.iter().map(row).collect();
    if let Some(t) = terminal.filter(|t| !tools.iter().any(|s| s.name == t.name)) {
        let param = t.arg.as_ref().map(|a| format!("{a}: string"));
        let param = param.unwrap_or_else(|| "(none)".to_owned());
        let what = "(terminal) takes the model's answer given in prose";
        let description = match first_line(&t.description) {
            d if d.is_empty() => what.to_owned(),
            d => format!("{what}; {d}"),
        };
        rows.push(vec![t.name.clone(), param, description]);
    }
    table(&["NAME", "PARAMETERS", "DESCRIPTION"], &rows, 100)
}

/// Blocks as text: text as is, images as a one-line placeholder.
pub fn blocks(blocks: &[Block]) -> String {
    blocks
        .iter()
        .map(|b| match b {
            Block::Text(t) => format!("{}\n", t.text.strip_suffix('\n').unwrap_or(&t.text)),
            Block::Image(i) => {
                let (mime, len) = (&i.mime_type, i.data.len());
                format!("[image {mime}, {len} bytes of base64]\n")
            }
        })
        .collect()
}

/// A tool output: its blocks and a status line with reward and finished.
pub fn output(out: &ToolOutput) -> String {
    let reward = out.reward.map_or("none".into(), |r| r.to_string());
    let (text, finished) = (blocks(&out.blocks), out.finished);
    format!("{text}reward {reward}  finished {finished}\n")
}

/// Keys shown first in the tasks table, in this order, when a task has them: ids, then what
/// the task asks.
const LEAD_KEYS: [&str; 11] = [
    "id",
    "task_id",
    "index",
    "name",
    "question",
    "prompt",
    "problem",
    "instruction",
    "input",
    "task",
    "text",
];

/// The tasks as a table: `INDEX` and one column per key of the tasks, in an order fixed by the
/// keys alone ([`LEAD_KEYS`], then keys of numbers and booleans, then of strings, then of lists
/// and objects; alphabetical within each), so every row and every run lines up the same way.
/// Strings are shown unquoted; tasks that are not objects get one `TASK` column.
pub fn tasks_table(first: usize, tasks: &[Value]) -> String {
    let index = |i: usize| (first + i).to_string();
    if !tasks.iter().all(Value::is_object) || tasks.is_empty() {
        let row = |(i, t): (usize, &Value)| vec![index(i), t.to_string()];
        let rows: Vec<_> = tasks.iter().enumerate().map(row).collect();
        return table(&["INDEX", "TASK"], &rows, 100);
    }
    let mut keys: Vec<&String> = tasks
        .iter()
        .filter_map(Value::as_object)
        .flat_map(|m| m.keys())
        .collect();
    keys.sort_by_key(|k| (key_rank(k, tasks), k.to_string()));
    keys.dedup();
    let mut headers = vec!["INDEX".to_owned()];
    headers.extend(keys.iter().map(|k| k.to_uppercase()));
    let last = keys.len().saturating_sub(1);
    let mut rows = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let mut row = vec![index(i)];
        for (c, k) in keys.iter().enumerate() {
            let cell = match t.get(k.as_str()) {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => "-".to_owned(),
            };
            row.push(truncate(&one_line(&cell), if c == last { 70 } else { 50 }));
        }
        rows.push(row);
    }
    table(&headers, &rows, 100)
}

/// The group of a key in the tasks table: lead keys, scalars, strings, then structures.
fn key_rank(key: &str, tasks: &[Value]) -> usize {
    if let Some(i) = LEAD_KEYS.iter().position(|k| *k == key) {
        return i;
    }
    let values = || tasks.iter().filter_map(|t| t.get(key));
    if values().all(|v| v.is_number() || v.is_boolean() || v.is_null()) {
        LEAD_KEYS.len()
    } else if values().all(|v| v.is_string() || v.is_null()) {
        LEAD_KEYS.len() + 1
    } else {
        LEAD_KEYS.len() + 2
    }
}

/// A progress event as printed by `call` and `play`.
pub fn progress(value: &Value) -> String {
    format!("progress {value}")
}

/// Pretty JSON text.
pub fn pretty(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// `command: error: msg`, on one line, and the exit status of a failure.
pub fn fail(command: &str, msg: &str) -> std::process::ExitCode {
    eprintln!("{command}: error: {}", one_line(msg));
    std::process::ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;
    use ors_client::TerminalToolSpec;
    use serde_json::json;

    fn spec(schema: Option<Value>) -> ToolSpec {
        ToolSpec::new("t", "d", schema.and_then(|v| v.as_object().cloned()))
    }

    #[test]
    fn the_terminal_tool_is_a_marked_row_of_the_tools_table() {
        let submit = ToolSpec::new("submit", "Submit an answer.\nMore.", None);
        let give_up = TerminalToolSpec {
            name: "give_up".into(),
            arg: Some("reason".into()),
            description: "Stop trying.".into(),
        };
        let table = |tools: &[ToolSpec], terminal: Option<&TerminalToolSpec>| {
            tools_table(&ListToolsOutput {
                tools: tools.to_vec(),
                terminal_tool: terminal.cloned(),
                supports_score_group: None,
            })
        };
        let text = table(std::slice::from_ref(&submit), Some(&give_up));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[1].starts_with("submit "), "{text}");
        assert!(lines[1].ends_with("Submit an answer."), "{text}");
        assert!(lines[2].starts_with("give_up "), "{text}");
        assert!(lines[2].contains("reason: string"), "{text}");
        assert!(
            lines[2].ends_with("(terminal) takes the model's answer given in prose; Stop trying."),
            "{text}"
        );
        // Listed by the server among the tools too: one row.
        let both = [submit, ToolSpec::new("give_up", "Stop trying.", None)];
        assert_eq!(table(&both, Some(&give_up)).lines().count(), 3);
        assert_eq!(table(&both[..1], None).lines().count(), 2);
    }

    #[test]
    fn params_show_types_and_optional_fields() {
        let s = spec(Some(json!({
            "type": "object",
            "properties": {"answer": {"type": "string"}, "n": {"type": "integer"},
                           "xs": {"type": "array", "items": {"type": "number"}}},
            "required": ["answer"]
        })));
        assert_eq!(params(&s), "answer: string, n?: integer, xs?: number[]");
        assert_eq!(params(&spec(None)), "(none)");
    }

    #[test]
    fn params_show_enum_values_and_defaults() {
        // The shape pydantic gives an enum field with a default, and an optional field.
        let s = spec(Some(json!({
            "type": "object",
            "$defs": {"Mode": {"enum": ["fast", "slow"], "type": "string"}},
            "properties": {
                "mode": {"$ref": "#/$defs/Mode", "default": "fast"},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null},
                "level": {"enum": [1, 2, 3]}
            },
            "required": ["level"]
        })));
        assert_eq!(
            params(&s),
            r#"level: 1|2|3, limit?: integer|null = null, mode?: "fast"|"slow" = "fast""#
        );
    }

    #[test]
    fn task_columns_have_one_order_for_every_row() {
        let tasks = vec![
            json!({"question": "What is 1+1?", "answer": "2", "id": "0", "level": 1}),
            json!({"answer": "a long worked solution", "question": "q?", "id": "1", "level": 2}),
        ];
        let t = tasks_table(5, &tasks);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["INDEX", "ID", "QUESTION", "LEVEL", "ANSWER"]
        );
        assert_eq!(lines[1], "5      0   What is 1+1?  1      2");
        assert_eq!(
            lines[2],
            "6      1   q?            2      a long worked solution"
        );
        // Tasks that are not objects get one column.
        assert_eq!(tasks_table(0, &[json!(7)]), "INDEX  TASK\n0      7\n");
    }

    #[test]
    fn tables_align_and_cut() {
        let t = table(
            &["A", "B"],
            &[
                vec!["xx".into(), "1".into()],
                vec!["y".into(), "long\ntext".into()],
            ],
            6,
        );
        assert_eq!(t, "A   B\nxx  1\ny   lon...\n");
    }
}
