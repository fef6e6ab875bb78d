//! Human-readable output of the `ors` tool: tables, blocks, tool parameters, results.

use std::fmt::Write as _;

use ors_client::{Block, ToolOutput, ToolSpec};
use serde_json::Value;

/// A table with a header row; every column but the last is padded, cells are cut at `max`.
pub fn table(headers: &[&str], rows: &[Vec<String>], max: usize) -> String {
    let cut: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| truncate(&one_line(c), max)).collect())
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &cut {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(&cut) {
        let last = row.len().saturating_sub(1);
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i == last {
                line.push_str(cell);
            } else {
                let pad = widths[i].saturating_sub(cell.chars().count()) + 2;
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `s` with control characters (line breaks) turned into spaces.
pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `s` cut to `max` characters, marking the cut with `...`.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let keep: String = s.chars().take(max.saturating_sub(3)).collect();
    format!("{keep}...")
}

/// A tool's parameters in one line: `answer: string, limit?: integer`, or `(none)`.
pub fn params(spec: &ToolSpec) -> String {
    let Some(schema) = &spec.input_schema else {
        return "(none)".into();
    };
    let Some(Value::Object(props)) = schema.get("properties") else {
        return "(none)".into();
    };
    if props.is_empty() {
        return "(none)".into();
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    props
        .iter()
        .map(|(name, s)| {
            let opt = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            format!("{name}{opt}: {}", type_name(s))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The type of a property schema in a word or two.
fn type_name(s: &Value) -> String {
    match s.get("type") {
        Some(Value::String(t)) if t == "array" => match s.get("items") {
            Some(items) => format!("{}[]", type_name(items)),
            None => "array".into(),
        },
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ if s.get("enum").is_some() => "enum".into(),
        _ if s.get("$ref").is_some() => "object".into(),
        _ if s.get("anyOf").is_some() || s.get("oneOf").is_some() => "union".into(),
        _ => "any".into(),
    }
}

/// The tools as a table: name, parameters, first line of the description.
pub fn tools_table(tools: &[ToolSpec]) -> String {
    let rows: Vec<Vec<String>> = tools
        .iter()
        .map(|t| {
            let first = t.description.lines().next().unwrap_or("").to_owned();
            vec![t.name.clone(), params(t), first]
        })
        .collect();
    table(&["NAME", "PARAMETERS", "DESCRIPTION"], &rows, 70)
}

/// Blocks as text: text as is, images as a one-line placeholder.
pub fn blocks(blocks: &[Block]) -> String {
    let mut out = String::new();
    for b in blocks {
        match b {
            Block::Text(t) => {
                out.push_str(&t.text);
                if !t.text.ends_with('\n') {
                    out.push('\n');
                }
            }
            Block::Image(i) => {
                let _ = writeln!(
                    out,
                    "[image {}, {} bytes of base64]",
                    i.mime_type,
                    i.data.len()
                );
            }
        }
    }
    out
}

/// A tool output: its blocks and a status line with reward and finished.
pub fn output(out: &ToolOutput) -> String {
    let mut s = blocks(&out.blocks);
    let reward = out
        .reward
        .map_or_else(|| "none".to_owned(), |r| r.to_string());
    let _ = writeln!(s, "reward {reward}  finished {}", out.finished);
    s
}

/// A JSON value on one line.
pub fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// A task on one line, short fields first, so ids and questions stay visible when a long
/// field (a worked solution) is cut off at the edge of the table.
pub fn task_line(v: &Value) -> String {
    let Value::Object(map) = v else {
        return compact(v);
    };
    let mut fields: Vec<(String, String)> = map
        .iter()
        .map(|(k, v)| (compact(&Value::String(k.clone())), compact(v)))
        .collect();
    fields.sort_by_key(|(_, v)| v.len());
    let inner: Vec<String> = fields
        .into_iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// Pretty JSON text.
pub fn pretty(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(schema: Option<Value>) -> ToolSpec {
        ToolSpec {
            name: "t".into(),
            description: "d".into(),
            input_schema: schema.and_then(|v| v.as_object().cloned()),
        }
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
    fn tasks_show_short_fields_first() {
        let t = json!({"answer": "long worked solution", "id": 3, "question": "q?"});
        assert_eq!(
            task_line(&t),
            r#"{"id":3,"question":"q?","answer":"long worked solution"}"#
        );
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
