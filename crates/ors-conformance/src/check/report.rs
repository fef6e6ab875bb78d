//! The results of `ors check`: one item per check, printed as `ok <id>` or
//! `problem <id>: <what, where, how to fix>` as it is recorded, the summary `N passed, M
//! failed`, and the JSON report; and how ids and counts are written in them.

use serde::Serialize;
use serde_json::{json, Value};

/// The longest input shown in a problem line; longer ones are abbreviated (the JSON report
/// holds them whole, and the seed regenerates them).
const SHOWN_INPUT_CHARS: usize = 300;

/// One check's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckItem {
    /// A stable id, such as `split.test.num-tasks` or `tool.submit.no-crash`.
    pub id: String,
    /// What is wrong, where, and how to fix it; `None` when the check passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// A remark on a passed check (`created in 3 ms`, `12 inputs, 8 invalid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The tool input that showed the problem, in full.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
}

impl CheckItem {
    /// A passed check.
    pub fn ok(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            problem: None,
            note: None,
            input: None,
        }
    }

    /// A passed check with a remark.
    pub fn ok_with(id: impl Into<String>, note: impl Into<String>) -> Self {
        Self {
            note: Some(note.into()),
            ..Self::ok(id)
        }
    }

    /// A failed check.
    pub fn problem(id: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            problem: Some(problem.into()),
            ..Self::ok(id)
        }
    }

    /// Passed, or the problem `result` holds.
    pub(super) fn of(id: impl Into<String>, result: Result<(), String>) -> Self {
        Self {
            problem: result.err(),
            ..Self::ok(id)
        }
    }

    /// Whether the check passed.
    pub fn passed(&self) -> bool {
        self.problem.is_none()
    }

    /// The printed line: `ok <id>`, `ok <id> (<note>)` or `problem <id>: <problem>`.
    pub fn line(&self) -> String {
        match (&self.problem, &self.note) {
            (Some(p), _) => format!("problem {}: {}", self.id, one_line(p)),
            (None, Some(n)) => format!("ok {} ({})", self.id, one_line(n)),
            (None, None) => format!("ok {}", self.id),
        }
    }

    fn to_json(&self) -> Value {
        let mut v = json!(self);
        v["ok"] = json!(self.passed());
        v
    }
}

/// How long one episode took to become usable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpisodeTiming {
    /// The split.
    pub split: String,
    /// The task's index.
    pub index: u64,
    /// Milliseconds from `create_session` until the prompt arrived (setup may run in the
    /// background after `create` answers, so the prompt is when the episode is usable).
    pub ready_ms: f64,
}

/// A finished `ors check` run.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// The server.
    pub url: String,
    /// The environment checked.
    pub env: String,
    /// The seed of the generated tool inputs.
    pub seed: u64,
    /// Inputs generated per tool.
    pub fuzz: usize,
    /// Every check, in the order run.
    #[serde(skip)]
    pub items: Vec<CheckItem>,
    /// The episodes opened by the episode checks.
    pub episodes: Vec<EpisodeTiming>,
}

impl CheckReport {
    /// How many checks passed.
    pub fn passed(&self) -> usize {
        self.items.iter().filter(|i| i.passed()).count()
    }

    /// How many checks found a problem.
    pub fn failed(&self) -> usize {
        self.items.len() - self.passed()
    }

    /// The last line: exactly `N passed, M failed`.
    pub fn summary(&self) -> String {
        format!("{} passed, {} failed", self.passed(), self.failed())
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        // The fields as they are; the checks with their `ok`, and the counts.
        let mut v = json!(self);
        v["checks"] = self.items.iter().map(CheckItem::to_json).collect();
        v["passed"] = json!(self.passed());
        v["failed"] = json!(self.failed());
        v
    }
}

/// `s` on one line: line breaks and other control characters become spaces.
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

/// An input as compact JSON for a problem line. Long strings made of one repeated character
/// (the generated huge strings) are written `"a"×1048576`; anything else that is still too
/// long is cut, and says so.
pub fn show_input(input: &Value) -> String {
    let text = render(input);
    if text.chars().count() <= SHOWN_INPUT_CHARS {
        return text;
    }
    let cut: String = text.chars().take(SHOWN_INPUT_CHARS).collect();
    format!("{cut}… (cut; the JSON report has it whole)")
}

/// Whether [`show_input`] shows `input` exactly as JSON (so it can be pasted into `ors call`).
pub fn shown_exactly(input: &Value) -> bool {
    let text = render(input);
    serde_json::to_string(input).is_ok_and(|exact| exact == text)
        && text.chars().count() <= SHOWN_INPUT_CHARS
}

/// Compact JSON, with a repeated-character string longer than 40 characters as `"c"×N`.
fn render(v: &Value) -> String {
    let json = |v: &Value| serde_json::to_string(v).unwrap_or_default();
    let joined = |parts: Vec<String>| parts.join(",");
    match v {
        Value::String(s) if s.len() > 40 => {
            let mut chars = s.chars();
            match chars.next() {
                Some(c) if chars.all(|d| d == c) => {
                    format!("{}×{}", json(&json!(c.to_string())), s.chars().count())
                }
                _ => json(v),
            }
        }
        Value::Array(items) => format!("[{}]", joined(items.iter().map(render).collect())),
        Value::Object(map) => {
            let members = map
                .iter()
                .map(|(k, v)| format!("{}:{}", json(&json!(k)), render(v)));
            format!("{{{}}}", joined(members.collect()))
        }
        other => json(other),
    }
}

/// Shell-quote `s` for a POSIX shell (single quotes).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@%+,".contains(&b))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Collects the items of a run and hands each to the caller as it is added.
pub(super) struct Recorder<'a> {
    items: Vec<CheckItem>,
    on_item: &'a mut (dyn FnMut(&CheckItem) + Send),
}

impl<'a> Recorder<'a> {
    pub(super) fn new(on_item: &'a mut (dyn FnMut(&CheckItem) + Send)) -> Self {
        Self {
            items: Vec::new(),
            on_item,
        }
    }

    pub(super) fn push(&mut self, item: CheckItem) {
        (self.on_item)(&item);
        self.items.push(item);
    }

    /// Every item, in the order they were added.
    pub(super) fn into_items(self) -> Vec<CheckItem> {
        self.items
    }
}

/// A name as part of a check id: as is when it is a plain name, else JSON-quoted (so a tool
/// called `look up` gives `tool."look up".name`, still one token per dot).
pub(super) fn id_part(name: &str) -> String {
    if ors_core::is_valid_tool_name(name) {
        name.to_owned()
    } else {
        serde_json::Value::String(name.to_owned()).to_string()
    }
}

/// `n thing` or `n things`.
pub(super) fn count(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_the_documented_shape() {
        assert_eq!(
            CheckItem::ok("discovery.tools").line(),
            "ok discovery.tools"
        );
        assert_eq!(
            CheckItem::ok_with("episode.test.0", "ready in 2 ms").line(),
            "ok episode.test.0 (ready in 2 ms)"
        );
        assert_eq!(
            CheckItem::problem("tool.x.no-crash", "it\ncrashed").line(),
            "problem tool.x.no-crash: it crashed"
        );
    }

    #[test]
    fn huge_strings_are_shown_short_and_exactly() {
        let input = json!({"q": "a".repeat(1 << 20), "n": 1});
        assert_eq!(show_input(&input), r#"{"n":1,"q":"a"×1048576}"#);
        assert!(!shown_exactly(&input));
        assert!(shown_exactly(&json!({"q": "short"})));
    }

    #[test]
    fn shell_quoting_survives_single_quotes() {
        assert_eq!(shell_quote("train"), "train");
        assert_eq!(shell_quote(r#"{"a":"it's"}"#), r#"'{"a":"it'\''s"}'"#);
    }

    #[test]
    fn ids_quote_names_that_are_not_plain() {
        assert_eq!(id_part("submit"), "submit");
        assert_eq!(id_part("look up"), "\"look up\"");
    }
}
