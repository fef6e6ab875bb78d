//! The fuzzed tool calls: inputs from [`super::fuzz`], run in episodes as the module doc of
//! [`super`] describes, and their answers turned into six checks per tool.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use ors_client::{
    Block, Environment, Error, RunToolOutput, Session, TaskRef, ToolOutput, ToolSpec,
};
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::episodes::{within, FuzzTask};
use super::fuzz::{self, Strategy};
use super::report::{count, id_part, shell_quote, show_input, shown_exactly, Recorder};
use super::rng::{hash_str, Rng};
use super::schema::{Schema, Verdict};
use super::{CheckItem, CheckOptions};

/// Episodes open at once while fuzzing.
const CONCURRENCY: usize = 8;

/// A tool to call, with its input schema read.
pub(super) struct ToolUnderTest {
    spec: ToolSpec,
    /// `None` when the schema is unusable: validity is then unknown.
    schema: Option<Schema>,
}

impl ToolUnderTest {
    pub(super) fn new(spec: ToolSpec) -> Self {
        // Built once: `schema_problem` would build it again only to report what is wrong.
        let schema = spec.input_schema.as_ref().and_then(|s| {
            let schema = Schema::new(Value::Object(s.clone())).ok()?;
            super::discovery::root_type_problem(s)
                .is_none()
                .then_some(schema)
        });
        Self { spec, schema }
    }

    /// What the schema says of `input`: valid for a tool without a schema, unknown for an
    /// unusable schema.
    fn verdict(&self, input: &Value) -> Verdict {
        match (&self.spec.input_schema, &self.schema) {
            (None, _) => Verdict::Valid,
            (Some(_), Some(schema)) => schema.verdict(input),
            (Some(_), None) => Verdict::Unknown,
        }
    }

    /// Whether inputs can be told valid or invalid (not with an unusable schema).
    fn validity_known(&self) -> bool {
        self.spec.input_schema.is_none() || self.schema.is_some()
    }
}

/// One generated input of one tool.
#[derive(Debug, Clone)]
struct Probe {
    input: Value,
    strategy: Strategy,
    /// What the schema says of it.
    verdict: Verdict,
}

/// What a call came back with.
#[derive(Debug)]
enum Answer {
    Ok(ToolOutput),
    Refused(String),
    Crashed(String),
    TimedOut,
    Http(u16, String),
    /// The result did not decode as ORS JSON.
    Broken(String),
    /// The result held NaN, Infinity or a number out of range.
    NonFinite(String),
    /// The connection broke, or the session died, mid-call.
    Lost(String),
    /// No episode could be opened for the call.
    NoEpisode(String),
}

/// Generate the inputs of every tool, call them, and push six checks per tool (and
/// `fuzz.episodes` if episodes for the calls could not be opened).
pub(super) async fn fuzz(
    rec: &mut Recorder<'_>,
    env: &Environment,
    task: Option<&FuzzTask>,
    tools: &[ToolUnderTest],
    opts: &CheckOptions,
) {
    let Some(task) = task else {
        if !tools.is_empty() {
            rec.push(CheckItem::problem(
                "fuzz.episodes",
                "no episode could be opened on any task (see the episode problems), so no tool \
                 was called",
            ));
        }
        return;
    };
    let probes: Vec<Vec<Probe>> = tools
        .iter()
        .map(|tool| {
            let mut rng = Rng::new(opts.seed ^ hash_str(&tool.spec.name));
            fuzz::inputs(tool.spec.input_schema.as_ref(), opts.fuzz, &mut rng)
                .into_iter()
                .map(|g| Probe {
                    verdict: tool.verdict(&g.input),
                    input: g.input,
                    strategy: g.strategy,
                })
                .collect()
        })
        .collect();
    let answers = call_all(env, &task.task, tools, &probes, opts.timeout).await;
    let mut no_episode: Vec<String> = Vec::new();
    for (t, tool) in tools.iter().enumerate() {
        let results: Vec<(&Probe, &Answer)> = probes[t]
            .iter()
            .zip(&answers[t])
            .filter_map(|(p, a)| match a.as_ref()? {
                Answer::NoEpisode(e) => {
                    no_episode.push(e.clone());
                    None
                }
                a => Some((p, a)),
            })
            .collect();
        judge(rec, &Context { tool, task, opts }, &results);
    }
    if let Some(first) = no_episode.first() {
        rec.push(CheckItem::problem(
            "fuzz.episodes",
            format!(
                "opening an episode on {} for a tool call failed {} times (first: {first}); \
                 those inputs were not tried",
                task.label(),
                no_episode.len()
            ),
        ));
    }
}

/// Run every probe: each valid one in a fresh episode, the invalid ones of a tool in a shared
/// one (see the module doc of [`super`]), at most [`CONCURRENCY`] episodes at once. The
/// answers, by tool and probe.
async fn call_all(
    env: &Environment,
    task: &TaskRef,
    tools: &[ToolUnderTest],
    probes: &[Vec<Probe>],
    limit: Duration,
) -> Vec<Vec<Option<Answer>>> {
    let gate = Arc::new(Semaphore::new(CONCURRENCY));
    let mut jobs = JoinSet::new();
    for (t, tool) in tools.iter().enumerate() {
        let mut spawn = |inputs| {
            let lane = Lane {
                env: env.clone(),
                task: task.clone(),
                tool: tool.spec.name.clone(),
                inputs,
                limit,
            };
            jobs.spawn(lane.run(t, Arc::clone(&gate)));
        };
        let mut shared: Vec<(usize, Value)> = Vec::new();
        for (p, probe) in probes[t].iter().enumerate() {
            if matches!(probe.verdict, Verdict::Invalid(_)) {
                shared.push((p, probe.input.clone()));
            } else {
                spawn(vec![(p, probe.input.clone())]);
            }
        }
        if !shared.is_empty() {
            spawn(shared);
        }
    }
    let mut answers: Vec<Vec<Option<Answer>>> = probes
        .iter()
        .map(|ps| ps.iter().map(|_| None).collect())
        .collect();
    while let Some(done) = jobs.join_next().await {
        // A lane that panicked leaves its answers unset; those probes are reported as untried.
        let Ok((t, results)) = done else { continue };
        for (p, answer) in results {
            if let Some(slot) = answers.get_mut(t).and_then(|a| a.get_mut(p)) {
                *slot = Some(answer);
            }
        }
    }
    answers
}

/// A sequence of calls of one tool, sharing an episode while each is refused.
struct Lane {
    env: Environment,
    task: TaskRef,
    tool: String,
    inputs: Vec<(usize, Value)>,
    limit: Duration,
}

impl Lane {
    async fn run(self, tool_index: usize, gate: Arc<Semaphore>) -> (usize, Vec<(usize, Answer)>) {
        // The semaphore is never closed, so acquiring cannot fail; run ungated if it did.
        let _permit = gate.acquire_owned().await.ok();
        let mut out = Vec::with_capacity(self.inputs.len());
        let mut session: Option<Session> = None;
        for (p, input) in self.inputs {
            let open = match session.take() {
                Some(s) => Ok(s),
                None => within(self.limit, self.env.session(self.task.clone()).open()).await,
            };
            let answer = match open {
                Ok(open) => {
                    let answer = call(&open, &self.tool, input, self.limit).await;
                    if matches!(answer, Answer::Refused(_)) {
                        session = Some(open);
                    } else {
                        // Best effort: a hung call is cancelled by the delete on servers that can.
                        let _ = within(self.limit, open.close()).await;
                    }
                    answer
                }
                Err(e) => Answer::NoEpisode(e),
            };
            out.push((p, answer));
        }
        if let Some(s) = session {
            let _ = within(self.limit, s.close()).await;
        }
        (tool_index, out)
    }
}

/// One call, bounded by `limit`.
async fn call(session: &Session, tool: &str, input: Value, limit: Duration) -> Answer {
    match tokio::time::timeout(limit, session.call_raw(tool, input)).await {
        Err(_) => Answer::TimedOut,
        Ok(Ok(RunToolOutput::Success(out))) => Answer::Ok(out),
        Ok(Ok(RunToolOutput::Error(message))) => Answer::Refused(message.error),
        Ok(Err(e)) => match e {
            Error::ToolCrashed { message } => Answer::Crashed(message),
            Error::Timeout(_) => Answer::TimedOut,
            Error::Protocol(m) if m.contains(ors_core::sse::NON_FINITE_NOTE) => {
                Answer::NonFinite(m)
            }
            Error::Protocol(m) => Answer::Broken(m),
            // Past the client's result limit (256 MiB by default): no trainer can take it.
            e @ Error::ResponseTooLarge { .. } => Answer::Broken(e.to_string()),
            Error::Http { status, detail, .. } => Answer::Http(status, detail),
            other => Answer::Lost(other.to_string()),
        },
    }
}

/// What the problem lines of one tool need.
struct Context<'a> {
    tool: &'a ToolUnderTest,
    task: &'a FuzzTask,
    opts: &'a CheckOptions,
}

impl Context<'_> {
    fn id(&self, check: &str) -> String {
        format!("tool.{}.{check}", id_part(&self.tool.spec.name))
    }

    /// Where a probe ran (`more`: how many others did the same) and how to run it again.
    fn at(&self, probe: &Probe, more: &str) -> String {
        let validity = match probe.verdict {
            Verdict::Valid => ", valid",
            Verdict::Invalid(_) => ", invalid",
            Verdict::Unknown => "",
        };
        let env = &self.opts.env;
        let again = format!("ors check {env} {}", self.opts.reproduce_args());
        let reproduce = if shown_exactly(&probe.input) {
            format!(
                "reproduce: ors call {} --split {} --index {} {} {} (or {again})",
                shell_quote(env),
                shell_quote(&self.task.split),
                self.task.index,
                shell_quote(&self.tool.spec.name),
                shell_quote(&show_input(&probe.input)),
            )
        } else {
            format!("reproduce: {again} (the --json report has the input whole)")
        };
        format!(
            "input {} ({}{validity}) in an episode of {}{more}; {reproduce}",
            show_input(&probe.input),
            probe.strategy.describe(),
            self.task.label(),
        )
    }

    /// The check `check`: ok, or a problem about the first failing probe.
    fn item(&self, check: &str, failing: &[(&Probe, String)], note: Option<String>) -> CheckItem {
        let Some((probe, what)) = failing.first() else {
            return CheckItem {
                note,
                ..CheckItem::ok(self.id(check))
            };
        };
        let more = match failing.len() - 1 {
            0 => String::new(),
            n => format!(" (and {})", count(n, "more input")),
        };
        let mut item =
            CheckItem::problem(self.id(check), format!("{what}; {}", self.at(probe, &more)));
        item.input = Some(probe.input.clone());
        item
    }
}

/// Push the six checks of one tool from its answers.
fn judge(rec: &mut Recorder<'_>, ctx: &Context<'_>, results: &[(&Probe, &Answer)]) {
    let name = &ctx.tool.spec.name;
    let secs = ctx.opts.timeout.as_secs_f64();
    // The failing probes of each check, with what went wrong.
    let [mut crash, mut invalid, mut messages, mut slow, mut wire, mut finite] =
        <[Vec<_>; 6]>::default();
    for (probe, answer) in results {
        let rejection = match &probe.verdict {
            Verdict::Invalid(why) => Some(why),
            _ => None,
        };
        let invalid_input = rejection.is_some();
        match answer {
            Answer::Ok(_) if invalid_input => invalid.push((
                *probe,
                format!(
                    "'{name}' accepted an input its schema rejects ({}): it answered ok: true; \
                     validate the input (or make the input_schema say what the tool accepts) \
                     so the model learns what it got wrong",
                    rejection.map_or("", String::as_str)
                ),
            )),
            Answer::Ok(out) => {
                if let Some(p) = image_problem(out) {
                    wire.push((*probe, p));
                }
            }
            Answer::Refused(m) if m.trim().is_empty() && invalid_input => invalid.push((
                *probe,
                "an invalid input was answered ok: false with an empty error; say which field \
                 is wrong and why"
                    .to_owned(),
            )),
            Answer::Refused(m) if m.trim().is_empty() => messages.push((
                *probe,
                format!(
                    "'{name}' answered ok: false with an empty error; say what went wrong, so \
                     the model can act on it"
                ),
            )),
            Answer::Refused(_) | Answer::NoEpisode(_) => {}
            Answer::Http(status, detail) if invalid_input && *status < 500 => invalid.push((
                *probe,
                format!(
                    "an invalid input was answered HTTP {status} ({detail}) instead of an \
                     ok: false result; a bad tool input is {{\"ok\": false, \"error\": ...}} in \
                     the end event, which an agent can read and retry (PROTOCOL_NOTES row \
                     tool-error-ok-false)"
                ),
            )),
            Answer::Http(status, detail) => crash.push((
                *probe,
                format!(
                    "the call of '{name}' failed with HTTP {status} ({detail}); a tool's failure \
                     is an ok: false result, not an HTTP error"
                ),
            )),
            Answer::Crashed(m) => crash.push((
                *probe,
                format!(
                    "'{name}' crashed (SSE error event: {m:?}): the rollout gets no result to \
                     learn from; catch the failure and return ok: false with a message"
                ),
            )),
            Answer::Lost(m) => crash.push((
                *probe,
                format!(
                    "the call of '{name}' never completed ({m}): did the server or the session \
                     die? it must answer every call with a result"
                ),
            )),
            Answer::TimedOut => slow.push((
                *probe,
                format!(
                    "'{name}' gave no result within {secs} s: bound its work (a maximum in the \
                     input schema, a time limit inside the tool, or the server's tool timeout, \
                     ORS_TOOL_TIMEOUT_SECS on ors-server)"
                ),
            )),
            Answer::Broken(m) => wire.push((
                *probe,
                format!(
                    "the result breaks the ORS wire form ({m}); send {{\"ok\": true, \"output\": \
                     {{\"blocks\": [...], \"metadata\", \"reward\", \"finished\"}}}} as the Data \
                     Types page documents"
                ),
            )),
            Answer::NonFinite(m) => finite.push((
                *probe,
                format!(
                    "the result holds a non-finite number ({m}); a NaN or infinite reward \
                     poisons a trainer's averages: return a finite reward (guard divisions by \
                     zero) or none"
                ),
            )),
        }
    }
    // `results` holds only the inputs that were tried: [`fuzz`] took out those with no episode.
    let invalid_tried = results
        .iter()
        .filter(|(p, _)| matches!(p.verdict, Verdict::Invalid(_)))
        .count();
    rec.push(ctx.item("no-crash", &crash, Some(count(results.len(), "input"))));
    if ctx.tool.validity_known() {
        let note = if invalid_tried == 0 {
            "no input the schema rejects was generated".to_owned()
        } else {
            count(invalid_tried, "invalid input")
        };
        rec.push(ctx.item("rejects-invalid", &invalid, Some(note)));
    }
    rec.push(ctx.item("error-messages", &messages, None));
    rec.push(ctx.item("in-time", &slow, None));
    rec.push(ctx.item("wire-form", &wire, None));
    rec.push(ctx.item("finite-reward", &finite, None));
}

/// An image block whose data is not base64 or whose type is not an image type.
fn image_problem(out: &ToolOutput) -> Option<String> {
    for block in &out.blocks {
        let Block::Image(img) = block else { continue };
        if !img.mime_type.starts_with("image/") {
            return Some(format!(
                "an image block has mimeType {:?}; it must be an image type such as image/png",
                img.mime_type
            ));
        }
        if base64::engine::general_purpose::STANDARD
            .decode(img.data.as_bytes())
            .is_err()
        {
            return Some(format!(
                "an image block's data is not base64 (it starts {:?}); the wire form carries \
                 image bytes base64-encoded",
                img.data.chars().take(16).collect::<String>()
            ));
        }
    }
    None
}
