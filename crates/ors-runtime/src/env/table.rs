//! The tool table: every tool of one served environment (or toolset), built once when it is
//! served and shared by every session, with O(1) lookup by name. Before a tool runs, the table takes the
//! optional `reasoning` out of its input and validates the input against the tool's schema
//! when the tool asks for it ([`ToolTable::prepare`]).

use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{json, Value};

use ors_core::types::{JsonObject, RunToolOutput, TerminalToolSpec, ToolErrorReason, ToolSpec};

use super::{CallInput, ToolContext};
use crate::schema::InputValidator;

/// A boxed tool future borrowing the environment.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = RunToolOutput> + Send + 'a>>;

/// The adapter of one tool: deserializes the input, calls the method, wraps the result.
/// Shared (`Arc`) so a toolset's entries can be re-used, projected, by every environment
/// including it.
pub type ToolFn<E> =
    Arc<dyn for<'a> Fn(&'a mut E, ToolContext, CallInput) -> ToolFuture<'a> + Send + Sync>;

/// The adapter of a `#[tool(concurrent)]` tool: it borrows the environment shared, so the
/// server may run it beside other concurrent calls of the session (PROTOCOL_NOTES row
/// `tool-concurrency`).
pub type ConcurrentFn<E> =
    Arc<dyn for<'a> Fn(&'a E, ToolContext, CallInput) -> ToolFuture<'a> + Send + Sync>;

/// The adapter of a `#[tool(blocking)]` tool: synchronous, run on tokio's blocking pool.
pub type BlockingFn<E> = Arc<dyn Fn(&mut E, ToolContext, CallInput) -> RunToolOutput + Send + Sync>;

/// How a tool runs.
pub enum ToolRun<E> {
    /// A future on the session's task (the usual tool).
    Async(ToolFn<E>),
    /// A synchronous function on a thread of tokio's blocking pool, with the episode moved
    /// there for the call, so it never stalls the server's worker threads. When the call times
    /// out the answer goes at once; the thread finishes in the background, and the session's
    /// next call waits for it to hand the episode back.
    Blocking(BlockingFn<E>),
    /// A future borrowing the environment shared (`#[tool(concurrent)]`): a server runs it
    /// beside the session's other concurrent calls, never beside an exclusive one.
    Concurrent(ConcurrentFn<E>),
}

impl<E> Clone for ToolRun<E> {
    fn clone(&self) -> Self {
        match self {
            ToolRun::Async(f) => ToolRun::Async(Arc::clone(f)),
            ToolRun::Blocking(f) => ToolRun::Blocking(Arc::clone(f)),
            ToolRun::Concurrent(f) => ToolRun::Concurrent(Arc::clone(f)),
        }
    }
}

/// One tool of a table.
pub struct ToolEntry<E> {
    /// The spec shown to agents.
    pub spec: ToolSpec,
    /// Listed by `/tools` (true) or only by `/task_tools` (false).
    pub shared: bool,
    /// The adapter.
    pub run: ToolRun<E>,
    /// When set, every input is checked against the tool's schema before the tool runs.
    pub validator: Option<Arc<InputValidator>>,
    /// The environment's terminal tool (`#[tool(terminal)]`): not listed, named by the listing
    /// as `terminal_tool` (PROTOCOL_NOTES row `terminal-tool`).
    pub terminal: bool,
}

impl<E> Clone for ToolEntry<E> {
    fn clone(&self) -> Self {
        Self {
            spec: self.spec.clone(),
            shared: self.shared,
            run: self.run.clone(),
            validator: self.validator.clone(),
            terminal: self.terminal,
        }
    }
}

impl<E: 'static> ToolEntry<E> {
    /// An entry calling `call` (a generated adapter `fn`, or any closure of that shape).
    pub fn new<F>(spec: ToolSpec, shared: bool, call: F) -> Self
    where
        F: for<'a> Fn(&'a mut E, ToolContext, CallInput) -> ToolFuture<'a> + Send + Sync + 'static,
    {
        Self::of(spec, shared, ToolRun::Async(Arc::new(call)))
    }

    fn of(spec: ToolSpec, shared: bool, run: ToolRun<E>) -> Self {
        Self {
            spec,
            shared,
            run,
            validator: None,
            terminal: false,
        }
    }

    /// An entry running the synchronous `call` on tokio's blocking pool.
    pub fn blocking<F>(spec: ToolSpec, shared: bool, call: F) -> Self
    where
        F: Fn(&mut E, ToolContext, CallInput) -> RunToolOutput + Send + Sync + 'static,
    {
        Self::of(spec, shared, ToolRun::Blocking(Arc::new(call)))
    }

    /// An entry calling `call` with the environment borrowed shared: a concurrent tool.
    pub fn concurrent<F>(spec: ToolSpec, shared: bool, call: F) -> Self
    where
        F: for<'a> Fn(&'a E, ToolContext, CallInput) -> ToolFuture<'a> + Send + Sync + 'static,
    {
        Self::of(spec, shared, ToolRun::Concurrent(Arc::new(call)))
    }

    /// Whether calls of this tool may run beside other calls of their session: a concurrent
    /// tool that is not the terminal one (a terminal tool is always exclusive).
    pub fn is_concurrent(&self) -> bool {
        matches!(self.run, ToolRun::Concurrent(_)) && !self.terminal
    }

    /// This entry with its inputs validated by `validator` before it runs.
    pub fn validated(mut self, validator: Arc<InputValidator>) -> Self {
        self.validator = Some(validator);
        self
    }

    /// This entry as the environment's terminal tool.
    pub fn terminal(mut self) -> Self {
        self.terminal = true;
        self
    }

    /// This entry as a tool of `O`, reaching the `E` stored inside an `O` through `project`
    /// (how an environment includes a toolset kept in one of its fields). A concurrent tool
    /// becomes an exclusive one there: `project` only reaches the toolset through `&mut`.
    pub fn project<O: 'static>(&self, project: fn(&mut O) -> &mut E) -> ToolEntry<O> {
        let run = match self.run.clone() {
            ToolRun::Async(inner) => ToolRun::Async(Arc::new(move |o: &mut O, ctx, input| {
                inner(project(o), ctx, input)
            })),
            ToolRun::Blocking(inner) => {
                ToolRun::Blocking(Arc::new(move |o: &mut O, ctx, input| {
                    inner(project(o), ctx, input)
                }))
            }
            ToolRun::Concurrent(inner) => ToolRun::Async(Arc::new(move |o: &mut O, ctx, input| {
                inner(project(o), ctx, input)
            })),
        };
        ToolEntry {
            validator: self.validator.clone(),
            terminal: self.terminal,
            ..ToolEntry::of(self.spec.clone(), self.shared, run)
        }
    }
}

/// Why a tool table could not be built (reported at server start, not at call time).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolTableError {
    /// Two tools share a name (for example an environment tool and a toolset tool).
    #[error("tool name collision: '{0}' is defined twice")]
    Duplicate(String),
    /// More than one tool is marked `#[tool(terminal)]`.
    #[error(
        "tools '{0}' and '{1}' are both terminal; an environment has at most one terminal tool"
    )]
    TwoTerminalTools(String, String),
    /// A tool's input schema is unusable.
    #[error("tool '{tool}': {reason}")]
    Schema {
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
}

impl ToolTableError {
    /// A [`ToolTableError::Schema`]: `tool`'s input schema is unusable for `reason`.
    pub(crate) fn schema(tool: &str, reason: impl std::fmt::Display) -> Self {
        ToolTableError::Schema {
            tool: tool.to_owned(),
            reason: reason.to_string(),
        }
    }
}

/// The name of the input field `#[environment(reasoning)]` adds to every tool.
pub const REASONING_FIELD: &str = "reasoning";

/// What [`ToolTable::prepare`] made of a call.
pub enum Prepared<'t, E> {
    /// A tool of the table, with the input to give it.
    Entry(&'t ToolEntry<E>, ToolContext, CallInput),
    /// No tool of the table has this name (the episode may compute it from its task).
    NotInTable(ToolContext, CallInput),
    /// Refused before any tool ran: the answer.
    Refused(RunToolOutput),
}

/// FNV-1a for maps keyed by tool names, fixed when the server starts (this table's lookups,
/// the server's metrics per tool): a few instructions per byte of a short name, where std's
/// SipHash costs about 150 per lookup (a call looks its tool up twice: whether it is
/// concurrent, then to run it). SipHash's keyed resistance to chosen collisions is not needed
/// here: such a map is filled once, from the environment's own tool names, and a client only
/// looks names up, which costs at most a probe through a table of a few dozen entries
/// whatever name it sends.
pub struct NameHasher(u64);

impl Default for NameHasher {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The tools of one served environment (or of a toolset), built once when it is served and
/// shared by every session: specs in declaration order, O(1) lookup by name, and the toolsets
/// a session may select by name at `/create` (PROTOCOL_NOTES row `toolset-name`).
pub struct ToolTable<E> {
    entries: Vec<ToolEntry<E>>,
    by_name: HashMap<String, usize, BuildHasherDefault<NameHasher>>,
    shared_specs: Vec<ToolSpec>,
    pub(crate) errors: Vec<ToolTableError>,
    reasoning: bool,
    terminal: Option<TerminalToolSpec>,
    pub(crate) calls_after_finished: bool,
    /// The selectable toolsets: their tools belong only to the sessions that chose them, so
    /// `/task_tools` lists them after the environment's and calls reach them, while the
    /// shared `/tools` listing does not show them.
    selectable: Vec<(String, ToolTable<E>)>,
}

impl<E: 'static> ToolTable<E> {
    /// Build a table from entries; duplicate names are recorded as errors, first one wins.
    pub fn new(entries: Vec<ToolEntry<E>>) -> Self {
        Self::build(entries, false)
    }

    /// Build a table whose every tool accepts an optional `reasoning` string: added to each
    /// input schema (an error if a tool already has such a field), taken out of each input
    /// before the tool reads it, and handed to the tool in [`ToolContext::reasoning`].
    pub fn with_reasoning(entries: Vec<ToolEntry<E>>) -> Self {
        Self::build(entries, true)
    }

    pub(crate) fn build(entries: Vec<ToolEntry<E>>, reasoning: bool) -> Self {
        let mut table = Self {
            entries: Vec::with_capacity(entries.len()),
            by_name: HashMap::with_capacity_and_hasher(entries.len(), Default::default()),
            shared_specs: Vec::new(),
            errors: Vec::new(),
            reasoning,
            terminal: None,
            calls_after_finished: false,
            selectable: Vec::new(),
        };
        for mut e in entries {
            if reasoning {
                table.errors.extend(add_reasoning(&mut e.spec).err());
            }
            table.push(e);
        }
        table
    }

    fn push(&mut self, entry: ToolEntry<E>) {
        let admitted = if self.by_name.contains_key(&entry.spec.name) {
            Err(ToolTableError::Duplicate(entry.spec.name.clone()))
        } else if let (true, Some(first)) = (entry.terminal, &self.terminal) {
            let second = entry.spec.name.clone();
            Err(ToolTableError::TwoTerminalTools(first.name.clone(), second))
        } else if entry.terminal {
            self.terminal_spec(&entry.spec)
                .map(|spec| self.terminal = Some(spec))
        } else {
            Ok(())
        };
        if let Err(e) = admitted {
            self.errors.push(e);
            return;
        }
        self.by_name
            .insert(entry.spec.name.clone(), self.entries.len());
        if entry.shared && !entry.terminal {
            self.shared_specs.push(entry.spec.clone());
        }
        self.entries.push(entry);
    }

    /// How the listing names a terminal tool: its one input field (besides the added
    /// `reasoning`) receives the answer; a tool without input fields grades from state.
    fn terminal_spec(&self, spec: &ToolSpec) -> Result<TerminalToolSpec, ToolTableError> {
        let schema = spec.input_schema.as_ref();
        let props = schema.and_then(|s| s.get("properties")?.as_object());
        let fields: Vec<&str> = props
            .into_iter()
            .flat_map(|p| p.keys().map(String::as_str))
            .filter(|k| !(self.reasoning && *k == REASONING_FIELD))
            .collect();
        if fields.len() > 1 {
            let reason = format!(
                "a terminal tool takes at most one input field (the model's answer), this one has \
                 {}: {}",
                fields.len(),
                fields.join(", ")
            );
            return Err(ToolTableError::schema(&spec.name, reason));
        }
        Ok(TerminalToolSpec {
            name: spec.name.clone(),
            arg: fields.first().map(|f| (*f).to_owned()),
            description: spec.description.clone(),
        })
    }

    /// Let calls go on after one returned `finished: true` (`#[environment(calls_after_finished)]`);
    /// by default they are refused (PROTOCOL_NOTES row `finished-latch`).
    pub fn with_calls_after_finished(mut self) -> Self {
        self.calls_after_finished = true;
        self
    }

    /// Add a toolset a session may select by `name` (`#[environment(select_toolsets(...))]`),
    /// made of `entries` reached through the environment; its tools take `reasoning` when the
    /// environment's do, and its problems are this table's.
    pub fn with_selectable(mut self, name: impl Into<String>, entries: Vec<ToolEntry<E>>) -> Self {
        let table = Self::build(entries, self.reasoning);
        self.errors.extend(table.errors.iter().cloned());
        self.selectable.push((name.into(), table));
        self
    }

    /// The names of the toolsets a session may select.
    pub fn selectable_names(&self) -> impl Iterator<Item = &str> {
        self.selectable.iter().map(|(name, _)| name.as_str())
    }

    /// The number of the selectable toolset called `name`.
    pub fn selectable_index(&self, name: &str) -> Option<usize> {
        self.selectable.iter().position(|(n, _)| n == name)
    }

    /// The tools of selectable toolset number `index` ([`ToolTable::selectable_index`]).
    pub fn selected(&self, index: usize) -> Option<&ToolTable<E>> {
        self.selectable.get(index).map(|(_, table)| table)
    }

    /// Whether calls go on after one returned `finished: true`.
    pub fn calls_after_finished(&self) -> bool {
        self.calls_after_finished
    }

    /// The terminal tool, as the tools listing names it.
    pub fn terminal_tool(&self) -> Option<&TerminalToolSpec> {
        self.terminal.as_ref()
    }

    /// Problems found while building; a server refuses to start an environment with any.
    pub fn errors(&self) -> &[ToolTableError] {
        &self.errors
    }

    /// Whether every tool takes the optional `reasoning` input.
    pub fn takes_reasoning(&self) -> bool {
        self.reasoning
    }

    /// Specs of the shared tools (what `/tools` lists).
    pub fn shared_specs(&self) -> &[ToolSpec] {
        &self.shared_specs
    }

    /// Specs of every listed tool, shared and task-specific (what `/task_tools` lists, before
    /// any tools the environment computes from its task); the terminal tool is not listed.
    pub fn all_specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.entries.iter().filter(|e| !e.terminal).map(|e| &e.spec)
    }

    /// The entries in declaration order.
    pub fn entries(&self) -> &[ToolEntry<E>] {
        &self.entries
    }

    /// Whether calls of tool `name` may run beside other calls of their session
    /// ([`ToolEntry::is_concurrent`]); an unknown name is not.
    pub fn is_concurrent(&self, name: &str) -> bool {
        self.get(name).is_some_and(ToolEntry::is_concurrent)
    }

    /// The entry of a tool by name.
    pub fn get(&self, name: &str) -> Option<&ToolEntry<E>> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }

    /// Everything that happens to a call before its tool runs: take out the `reasoning`
    /// (when the table has it), find the tool, and validate the input when the tool asks.
    ///
    /// The input stays JSON text through here unless one of those needs it as a value (a
    /// table with `reasoning`, a tool with a validator): then it is built once, here.
    pub fn prepare(&self, name: &str, ctx: ToolContext, input: CallInput) -> Prepared<'_, E> {
        let (ctx, input) = if self.reasoning {
            match as_value(name, input).and_then(|value| take_reasoning(name, ctx, value)) {
                Ok((ctx, value)) => (ctx, CallInput::from(value)),
                Err(out) => return Prepared::Refused(out),
            }
        } else {
            (ctx, input)
        };
        let Some(entry) = self.get(name) else {
            return Prepared::NotInTable(ctx, input);
        };
        let Some(validator) = &entry.validator else {
            return Prepared::Entry(entry, ctx, input);
        };
        let checked = as_value(name, input).and_then(|value| {
            validator.check(name, &value).map_err(refused_input)?;
            Ok(Prepared::Entry(entry, ctx, CallInput::from(value)))
        });
        checked.unwrap_or_else(Prepared::Refused)
    }

    /// The `ok: false` answer for a tool no one has: it names every tool the call could have
    /// meant, the terminal one too (callable, though listed apart), marked as such.
    pub fn unknown(&self, name: &str) -> RunToolOutput {
        let mut known: Vec<String> = self.all_specs().map(|s| s.name.clone()).collect();
        if let Some(t) = &self.terminal {
            known.push(format!("{} (terminal)", t.name));
        }
        RunToolOutput::refused(
            ToolErrorReason::NotFound,
            format!(
                "unknown tool '{}'; available tools: {}",
                ors_core::text::Echo(name),
                known.join(", ")
            ),
        )
    }
}

/// Add the optional `reasoning` field to a tool's input schema.
pub(crate) fn add_reasoning(spec: &mut ToolSpec) -> Result<(), ToolTableError> {
    let schema = spec
        .input_schema
        .get_or_insert_with(|| JsonObject::from_iter([("type".to_owned(), json!("object"))]));
    let props = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(JsonObject::new()));
    let bad = |reason| Err(ToolTableError::schema(&spec.name, reason));
    match props {
        Value::Object(props) if props.contains_key(REASONING_FIELD) => bad(
            "its input has a field 'reasoning', which #[environment(reasoning)] adds to every \
             tool; rename the field (#[serde(rename = \"...\")])",
        ),
        Value::Object(props) => {
            // Bedrock's automatic reasoning parameter.
            let schema =
                json!({"type": "string", "description": "The reasoning for the tool call."});
            props.insert(REASONING_FIELD.to_owned(), schema);
            Ok(())
        }
        _ => bad("its schema's `properties` is not an object"),
    }
}

/// The input as a value (`{}` when there is none), or the `ok: false` answer naming what is
/// wrong with its text.
pub(crate) fn as_value(tool: &str, input: CallInput) -> Result<Value, RunToolOutput> {
    input.into_value().map_err(|e| invalid_input(tool, e))
}

/// The `ok: false` answer to an input the tool cannot take, saying what is wrong with it.
pub(crate) fn invalid_input(tool: &str, what: impl std::fmt::Display) -> RunToolOutput {
    refused_input(format!("invalid input for tool '{tool}': {what}"))
}

/// The `ok: false` answer to an input that is not what its tool takes, with the message `msg`.
pub(crate) fn refused_input(msg: String) -> RunToolOutput {
    RunToolOutput::refused(ToolErrorReason::InputValidation, msg)
}

/// The input as the object a tool takes, or the `ok: false` answer saying what it is instead.
pub(crate) fn as_object(tool: &str, input: Value) -> Result<JsonObject, RunToolOutput> {
    match input {
        Value::Object(obj) => Ok(obj),
        other => Err(not_an_object(tool, ors_core::types::json_kind(&other))),
    }
}

/// The `ok: false` answer to an input of `kind` where the tool takes an object.
pub(crate) fn not_an_object(tool: &str, kind: &str) -> RunToolOutput {
    invalid_input(tool, format!("expected an object, got {kind}"))
}

/// Take the `reasoning` string out of an input into the context.
pub(crate) fn take_reasoning(
    tool: &str,
    ctx: ToolContext,
    mut input: Value,
) -> Result<(ToolContext, Value), RunToolOutput> {
    let Some(obj) = input.as_object_mut() else {
        return Ok((ctx, input));
    };
    match obj.remove(REASONING_FIELD) {
        None | Some(Value::Null) => Ok((ctx, input)),
        Some(Value::String(s)) => Ok((ctx.with_reasoning(s), input)),
        Some(other) => Err(invalid_input(
            tool,
            format!(
                "field 'reasoning': expected a string, got {}",
                ors_core::types::json_kind(&other)
            ),
        )),
    }
}

/// A reusable set of tools, made with `#[toolset]` on an inherent impl and included by an
/// environment with `#[environment(toolsets(field))]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a toolset",
    note = "put `#[toolset]` on an `impl {Self} {{ ... }}` block whose methods carry `#[tool]`"
)]
pub trait Toolset: Send + Sync + 'static {
    /// The tool names, for compile-time collision checks.
    const TOOL_NAMES: &'static [&'static str];
    /// The tool table, built for each environment that includes the toolset, when it is
    /// served.
    fn tool_table() -> ToolTable<Self>
    where
        Self: Sized;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, fields: &[&str]) -> ToolEntry<()> {
        let schema = (!fields.is_empty()).then(|| {
            let props: JsonObject = fields
                .iter()
                .map(|f| ((*f).to_owned(), json!({"type": "string"})))
                .collect();
            let mut s = JsonObject::new();
            s.insert("type".into(), json!("object"));
            s.insert("properties".into(), Value::Object(props));
            s
        });
        ToolEntry::new(ToolSpec::new(name, "d", schema), true, |_, _, _| {
            Box::pin(async { RunToolOutput::error("unused") })
        })
    }

    #[test]
    fn the_terminal_tool_is_named_with_its_field_and_not_listed() {
        let table = ToolTable::new(vec![
            entry("a", &["x"]),
            entry("end", &["message"]).terminal(),
        ]);
        assert!(table.errors().is_empty());
        let term = table.terminal_tool().expect("a terminal tool");
        assert_eq!(
            (term.name.as_str(), term.arg.as_deref()),
            ("end", Some("message"))
        );
        let listed: Vec<&str> = table.all_specs().map(|s| s.name.as_str()).collect();
        assert_eq!(listed, ["a"]);
        assert_eq!(table.shared_specs().len(), 1);
        assert!(table.get("end").is_some(), "still callable");
        // A wrong name is told the terminal tool too: it is one of the tools a call can name.
        assert_eq!(
            table.unknown("ned"),
            RunToolOutput::refused(
                ToolErrorReason::NotFound,
                "unknown tool 'ned'; available tools: a, end (terminal)"
            )
        );
        // `reasoning` added to every tool is not the answer's field.
        let t = ToolTable::with_reasoning(vec![entry("end", &["message"]).terminal()]);
        assert_eq!(
            t.terminal_tool().and_then(|s| s.arg.as_deref()),
            Some("message")
        );
        // No input: the answer is dropped and the tool grades from state.
        let t = ToolTable::new(vec![entry("end", &[]).terminal()]);
        assert_eq!(t.terminal_tool().map(|s| s.arg.is_none()), Some(true));
    }

    #[test]
    fn a_terminal_tool_takes_at_most_one_field_and_there_is_at_most_one() {
        let t = ToolTable::new(vec![entry("end", &["a", "b"]).terminal()]);
        assert!(matches!(t.errors(), [ToolTableError::Schema { tool, .. }] if tool == "end"));
        let t = ToolTable::new(vec![
            entry("one", &["a"]).terminal(),
            entry("two", &["a"]).terminal(),
        ]);
        assert_eq!(
            t.errors(),
            [ToolTableError::TwoTerminalTools("one".into(), "two".into())]
        );
    }

    #[test]
    fn concurrent_entries_are_concurrent_unless_terminal_or_projected() {
        let read = |spec| {
            ToolEntry::<u32>::concurrent(spec, true, |n: &u32, _, _| {
                let n = *n;
                Box::pin(async move { RunToolOutput::error(n.to_string()) })
            })
        };
        let table = ToolTable::new(vec![
            read(ToolSpec::new("read", "d", None)),
            read(ToolSpec::new("end", "d", None)).terminal(),
            ToolEntry::new(
                ToolSpec::new("write", "d", None),
                true,
                |n: &mut u32, _, _| {
                    *n += 1;
                    Box::pin(async { RunToolOutput::error("unused") })
                },
            ),
        ]);
        assert!(table.is_concurrent("read"));
        assert!(
            !table.is_concurrent("end"),
            "a terminal tool is always exclusive"
        );
        assert!(!table.is_concurrent("write"));
        assert!(!table.is_concurrent("missing"));
        // Included through a `&mut` projection, the tool runs exclusively (and still runs).
        let outer: ToolEntry<(u32,)> = table.entries()[0].project(|o: &mut (u32,)| &mut o.0);
        assert!(!outer.is_concurrent());
        let mut env = (7,);
        let ToolRun::Async(f) = &outer.run else {
            panic!("a projected concurrent tool is an exclusive async one");
        };
        let out = futures_util::FutureExt::now_or_never(f(
            &mut env,
            ToolContext::detached(),
            CallInput::empty(),
        ));
        assert_eq!(out, Some(RunToolOutput::error("7")));
    }

    #[test]
    fn the_finished_latch_is_on_unless_the_table_lets_calls_go_on() {
        let t = ToolTable::new(vec![entry("a", &[])]);
        assert!(!t.calls_after_finished());
        assert!(t.with_calls_after_finished().calls_after_finished());
    }
}
