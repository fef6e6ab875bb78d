//! The HTML report: one file holding its CSS, its script and its data, so it opens from disk or
//! a CI artifact with no network.
//!
//! What the page shows first (the figures, one small row per task and per episode) is plain
//! JSON, read at once. The trajectories themselves, nearly all of the bytes, are gzip-compressed
//! in chunks of neighbouring episodes (one task's samples together) and base64-encoded, each
//! chunk in a script element of its own: the browser decompresses a chunk
//! (`DecompressionStream`) only when an episode in it is opened, so a report of 10,000
//! episodes is interactive as soon as its first table page is drawn.

use std::collections::BTreeMap;
use std::io::Write;

use base64::Engine;
use flate2::write::GzEncoder;
use flate2::Compression;
use ors_client::Episode;
use serde_json::{json, Value};

use super::runs::{comparisons, Run};

const TEMPLATE: &str = include_str!("page.html");
const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");

/// A chunk is closed once its trajectories reach this many bytes of JSON: large enough to
/// compress well, small enough to open in a few milliseconds.
const CHUNK_BYTES: usize = 256 * 1024;

/// Characters of a task's text shown in the table.
const LABEL_CHARS: usize = 120;

/// The page for `runs`.
pub fn page(title: &str, runs: &[Run]) -> Result<String, String> {
    let mut chunks = String::new();
    let mut data_runs = Vec::with_capacity(runs.len());
    for (r, run) in runs.iter().enumerate() {
        let (data, run_chunks) = run_data(run)?;
        for (c, chunk) in run_chunks.iter().enumerate() {
            chunks.push_str(&format!(
                "<script type=\"application/gzip\" id=\"t{r}-{c}\">{chunk}</script>\n"
            ));
        }
        data_runs.push(data);
    }
    let mut compared = Vec::new();
    for (b, c) in comparisons(runs) {
        // Run `b` against run 0, the baseline.
        let mut one = json!(c);
        one["a"] = json!(0);
        one["b"] = json!(b);
        compared.push(one);
    }
    let data = json!({
        "title": title,
        "ors_rs_version": env!("CARGO_PKG_VERSION"),
        "runs": data_runs,
        "comparisons": compared,
    });
    Ok(fill(
        TEMPLATE,
        &[
            ("{{TITLE}}", &escape_html(title)),
            ("/*{{STYLE}}*/", STYLE),
            ("{{DATA}}", &script_json(&data)),
            ("{{CHUNKS}}", &chunks),
            ("/*{{SCRIPT}}*/", SCRIPT),
        ],
    ))
}

/// `template` with each marker replaced by its value; only the template's own markers are
/// replaced, never text that looks like one inside a value (a trajectory may hold anything).
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out =
        String::with_capacity(template.len() + values.iter().map(|v| v.1.len()).sum::<usize>());
    let mut rest = template;
    while let Some((at, marker, value)) = values
        .iter()
        .filter_map(|(m, v)| rest.find(m).map(|at| (at, *m, *v)))
        .min_by_key(|(at, _, _)| *at)
    {
        out.push_str(&rest[..at]);
        out.push_str(value);
        rest = &rest[at + marker.len()..];
    }
    out.push_str(rest);
    out
}

/// A code table: each distinct string once, rows refer to it by position. Its strings are
/// stop reasons and error kinds, a handful, so a search finds them.
#[derive(Default)]
struct Codes(Vec<String>);

impl Codes {
    fn code(&mut self, s: &str) -> usize {
        self.0.iter().position(|c| c == s).unwrap_or_else(|| {
            self.0.push(s.to_owned());
            self.0.len() - 1
        })
    }
}

/// The page's data for one run, and its trajectory chunks (gzip, base64).
fn run_data(run: &Run) -> Result<(Value, Vec<String>), String> {
    // One task's samples side by side: the table's rows and the chunks follow this order.
    let mut order: Vec<&Episode> = run.episodes.iter().collect();
    order.sort_by_key(|&e| (&e.env, &e.split, e.index, e.sample));
    let (mut stops, mut errors) = (Codes::default(), Codes::default());
    let mut cols: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    let mut chunks = Vec::new();
    let mut chunk = Chunk::default();
    for e in &order {
        let (tin, tout) = e.tokens();
        let line = serde_json::to_string(e).map_err(|err| err.to_string())?;
        let (c, pos) = chunk.add(&line, chunks.len());
        let error = e.error.as_ref().map(|x| errors.code(&x.kind));
        let row = [
            ("sample", json!(e.sample)),
            ("reward", json!(e.total_reward)),
            ("success", json!(u8::from(e.success()))),
            ("stop", json!(stops.code(e.stop_reason.as_str()))),
            ("error", json!(error)),
            ("steps", json!(e.steps)),
            ("calls", json!(e.tool_calls.len())),
            ("tokens_in", json!(tin)),
            ("tokens_out", json!(tout)),
            ("wall_ms", json!(round(e.timings.wall_ms))),
            ("env_ms", json!(round(e.timings.env_ms))),
            ("model_ms", json!(round(e.timings.policy_ms))),
            ("chunk", json!(c)),
            ("pos", json!(pos)),
        ];
        for (k, v) in row {
            cols.entry(k).or_default().push(v);
        }
        if chunk.bytes >= CHUNK_BYTES {
            chunks.push(std::mem::take(&mut chunk).finish()?);
        }
    }
    if chunk.count > 0 {
        chunks.push(chunk.finish()?);
    }
    // Tasks in the statistics' order, which is the episodes' order above.
    let (mut tasks, mut first) = (Vec::new(), 0);
    for t in &run.stats.tasks {
        tasks.push(json!([
            t.task.to_string(),
            t.task.split,
            t.task.index,
            label(order.get(first).and_then(|e| e.task.as_ref())),
            t.samples,
            t.mean,
            t.std,
            t.successes,
            t.errors,
            first,
        ]));
        first += t.samples;
    }
    // The run's figures, the task rows above standing for its list of tasks.
    let mut stats = json!(run.stats);
    stats["tasks"] = json!(run.stats.tasks.len());
    stats["errors"] = json!(run.errors());
    let data = json!({
        "name": run.name,
        "path": run.path.display().to_string(),
        "envs": run.envs(),
        "models": run.models(),
        "stats": stats,
        "stops": stops.0,
        "errors": errors.0,
        "tasks": tasks,
        "episodes": cols,
        "chunks": chunks.len(),
    });
    Ok((data, chunks))
}

/// Milliseconds to a tenth: finer is noise, and it keeps the page small.
fn round(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}

/// A chunk of trajectories being built: a JSON array of them.
#[derive(Default)]
struct Chunk {
    json: String,
    bytes: usize,
    count: usize,
}

impl Chunk {
    /// Add one trajectory line; where it is: (chunk number, position in it).
    fn add(&mut self, line: &str, number: usize) -> (usize, usize) {
        self.json.push(if self.count == 0 { '[' } else { ',' });
        self.json.push_str(line);
        self.bytes += line.len();
        self.count += 1;
        (number, self.count - 1)
    }

    /// The chunk gzip-compressed and base64-encoded.
    fn finish(mut self) -> Result<String, String> {
        self.json.push(']');
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(self.json.as_bytes())
            .map_err(|e| format!("cannot compress: {e}"))?;
        let bytes = gz.finish().map_err(|e| format!("cannot compress: {e}"))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    }
}

/// A short text for a task in the table: its question (or prompt, problem, ...), else its
/// first string, else its JSON; at most [`LABEL_CHARS`] characters.
fn label(task: Option<&Value>) -> String {
    let text = match task {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(task @ Value::Object(m)) => [
            "question",
            "prompt",
            "problem",
            "instruction",
            "input",
            "text",
        ]
        .iter()
        .find_map(|k| m.get(*k).and_then(Value::as_str))
        .or_else(|| m.values().find_map(Value::as_str))
        .map_or_else(|| task.to_string(), str::to_owned),
        Some(other) => other.to_string(),
    };
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(LABEL_CHARS) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

/// `v` as JSON that can sit inside a `<script>` element: a `<` could close it (`</script>`)
/// or open a comment, and only occurs inside JSON strings, where `\u003c` means the same.
fn script_json(v: &Value) -> String {
    v.to_string().replace('<', "\\u003c")
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_cannot_close_its_script_element() {
        let v = json!({"text": "</script><script>alert(1)</script><!--"});
        let s = script_json(&v);
        assert!(!s.contains('<'), "{s}");
        let back: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back, v);
        assert_eq!(
            escape_html("<a href=\"x\">&"),
            "&lt;a href=&quot;x&quot;&gt;&amp;"
        );
    }

    #[test]
    fn only_the_templates_own_markers_are_filled() {
        let page = fill(
            "<t>{{A}}</t>{{B}}{{A}}",
            &[("{{A}}", "x{{B}}"), ("{{B}}", "y")],
        );
        assert_eq!(page, "<t>x{{B}}</t>yx{{B}}");
    }

    #[test]
    fn labels_are_the_task_text_on_one_short_line() {
        assert_eq!(
            label(Some(&json!({"id": 3, "question": "What is\n 3+3?"}))),
            "What is 3+3?"
        );
        assert_eq!(label(Some(&json!({"id": "7", "q": "x"}))), "7");
        assert_eq!(label(Some(&json!([1, 2]))), "[1,2]");
        assert_eq!(label(None), "");
        let long = label(Some(&json!({"prompt": "é".repeat(500)})));
        assert_eq!(long.chars().count(), LABEL_CHARS + 1);
    }

    #[test]
    fn chunks_are_gzip_of_a_json_array() {
        use std::io::Read;
        let mut c = Chunk::default();
        assert_eq!(c.add(r#"{"a":1}"#, 4), (4, 0));
        assert_eq!(c.add(r#"{"a":2}"#, 4), (4, 1));
        let b64 = c.finish().unwrap();
        let gz = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let mut text = String::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, r#"[{"a":1},{"a":2}]"#);
    }
}
