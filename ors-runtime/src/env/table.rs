//! The tool table: every tool of one environment or toolset type, built once by the macros and
//! shared by every session, with O(1) dispatch by name.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use ors_core::types::{RunToolOutput, ToolSpec};

use super::ToolContext;

/// A boxed tool future borrowing the environment.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = RunToolOutput> + Send + 'a>>;

/// The adapter of one tool: parses the input, calls the method, wraps the result. Shared
/// (`Arc`) so a toolset's entries can be re-used, projected, by every environment including it.
pub type ToolFn<E> =
    Arc<dyn for<'a> Fn(&'a mut E, ToolContext, Value) -> ToolFuture<'a> + Send + Sync>;

/// One tool of a table.
pub struct ToolEntry<E> {
    /// The spec shown to agents.
    pub spec: ToolSpec,
    /// Listed by `/tools` (true) or only by `/task_tools` (false).
    pub shared: bool,
    /// The adapter.
    pub call: ToolFn<E>,
}

impl<E> Clone for ToolEntry<E> {
    fn clone(&self) -> Self {
        Self {
            spec: self.spec.clone(),
            shared: self.shared,
            call: Arc::clone(&self.call),
        }
    }
}

impl<E: 'static> ToolEntry<E> {
    /// An entry calling `call` (a generated adapter `fn`, or any closure of that shape).
    pub fn new<F>(spec: ToolSpec, shared: bool, call: F) -> Self
    where
        F: for<'a> Fn(&'a mut E, ToolContext, Value) -> ToolFuture<'a> + Send + Sync + 'static,
    {
        Self {
            spec,
            shared,
            call: Arc::new(call),
        }
    }

    /// This entry as a tool of `O`, reaching the `E` stored inside an `O` through `project`
    /// (how an environment includes a toolset kept in one of its fields).
    pub fn project<O: 'static>(&self, project: fn(&mut O) -> &mut E) -> ToolEntry<O> {
        let inner = Arc::clone(&self.call);
        ToolEntry::new(
            self.spec.clone(),
            self.shared,
            move |outer: &mut O, ctx, input| inner(project(outer), ctx, input),
        )
    }
}

/// Why a tool table could not be built (reported at server start, not at call time).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolTableError {
    /// Two tools share a name (for example an environment tool and a toolset tool).
    #[error("tool name collision: '{0}' is defined twice")]
    Duplicate(String),
    /// A tool's input schema is unusable.
    #[error("tool '{tool}': {reason}")]
    Schema {
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
}

/// The tools of one environment (or toolset) type, built once and shared by every session:
/// specs in declaration order and O(1) dispatch by name.
pub struct ToolTable<E> {
    entries: Vec<ToolEntry<E>>,
    by_name: HashMap<String, usize>,
    shared_specs: Vec<ToolSpec>,
    errors: Vec<ToolTableError>,
}

impl<E: 'static> ToolTable<E> {
    /// Build a table from entries; duplicate names are recorded as errors, first one wins.
    pub fn new(entries: Vec<ToolEntry<E>>) -> Self {
        let mut table = Self {
            entries: Vec::with_capacity(entries.len()),
            by_name: HashMap::with_capacity(entries.len()),
            shared_specs: Vec::new(),
            errors: Vec::new(),
        };
        for e in entries {
            table.push(e);
        }
        table
    }

    fn push(&mut self, entry: ToolEntry<E>) {
        if self.by_name.contains_key(&entry.spec.name) {
            self.errors
                .push(ToolTableError::Duplicate(entry.spec.name.clone()));
            return;
        }
        self.by_name
            .insert(entry.spec.name.clone(), self.entries.len());
        if entry.shared {
            self.shared_specs.push(entry.spec.clone());
        }
        self.entries.push(entry);
    }

    /// Record a schema error found while building (the table stays usable without that tool).
    pub fn with_error(mut self, err: ToolTableError) -> Self {
        self.errors.push(err);
        self
    }

    /// Problems found while building; a server refuses to start an environment with any.
    pub fn errors(&self) -> &[ToolTableError] {
        &self.errors
    }

    /// Specs of the shared tools (what `/tools` lists).
    pub fn shared_specs(&self) -> &[ToolSpec] {
        &self.shared_specs
    }

    /// Specs of every tool, shared and task-specific (what `/task_tools` lists, before any
    /// tools the environment computes from its task).
    pub fn all_specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.entries.iter().map(|e| &e.spec)
    }

    /// The entries in declaration order.
    pub fn entries(&self) -> &[ToolEntry<E>] {
        &self.entries
    }

    /// The entry of a tool by name.
    pub fn get(&self, name: &str) -> Option<&ToolEntry<E>> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }

    /// Call a tool by name; an unknown name is an `ok: false` result naming it.
    pub fn dispatch<'a>(
        &self,
        env: &'a mut E,
        name: &str,
        ctx: ToolContext,
        input: Value,
    ) -> ToolFuture<'a> {
        match self.get(name) {
            Some(entry) => (entry.call)(env, ctx, input),
            None => {
                let known: Vec<&str> = self.entries.iter().map(|e| e.spec.name.as_str()).collect();
                let msg = format!(
                    "unknown tool '{name}'; available tools: {}",
                    known.join(", ")
                );
                Box::pin(async move { RunToolOutput::Error(msg) })
            }
        }
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
    /// The tool table, built once.
    fn tool_table() -> &'static ToolTable<Self>
    where
        Self: Sized;
}
