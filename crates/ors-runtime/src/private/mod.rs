//! Items the macros' generated code names by absolute path. Not a public API.

mod checks;
mod decl;
mod params;

pub use crate::env::{
    CallInput, EnvError, Environment, EnvironmentMeta, ToolContext, ToolEntry, ToolFuture,
    ToolTable, ToolTableError, Toolset,
};
pub use crate::schema::input_schema;
pub use checks::{
    implements_environment, is_environment_method, toolset_collision, CollisionMessage,
    ImplementsEnvironment,
};
pub use decl::{HasValidator, JsonOutputSchema, NoOutputSchema, OutputProbe, ToolDecl, Validation};
pub use ors_core::types::{IntoToolResult, JsonObject, RunToolOutput, ToolSpec};
pub use params::{
    arg_ops, no_input, raw_arg_ops, second_input, ArgKind, ArgOps, ContextRef, RawToolArg,
    SchemaFn, ToolArg,
};
pub use serde;
pub use serde_json;
pub use serde_json::Value;
pub use std::boxed::Box;
pub use std::option::Option;
pub use std::result::Result;
pub use std::string::String;
pub use std::vec::Vec;

pub use schemars;

/// Collects a table's tools in declaration order, then the tools of its toolset fields, its
/// dynamic tools and its selectable toolsets.
pub struct TableBuilder<E> {
    entries: Vec<ToolEntry<E>>,
    errors: Vec<ToolTableError>,
    reasoning: bool,
    calls_after_finished: bool,
    selectable: Vec<(&'static str, Vec<ToolEntry<E>>)>,
}

impl<E: 'static> Default for TableBuilder<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: 'static> TableBuilder<E> {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            entries: Vec::new(),
            errors: Vec::new(),
            reasoning: false,
            calls_after_finished: false,
            selectable: Vec::new(),
        }
    }

    fn add(&mut self, decl: ToolDecl<'_>, make: impl FnOnce(ToolSpec, bool) -> ToolEntry<E>) {
        let (shared, terminal) = (decl.is_shared(), decl.is_terminal());
        match decl.build() {
            Ok((spec, validator)) => self.entries.push(ToolEntry {
                validator,
                terminal,
                ..make(spec, shared)
            }),
            Err(e) => self.errors.push(e),
        }
    }

    /// Add a tool; a spec that could not be built is recorded as an error instead.
    pub fn tool<F>(mut self, decl: ToolDecl<'_>, call: F) -> Self
    where
        F: for<'a> Fn(&'a mut E, ToolContext, CallInput) -> ToolFuture<'a> + Send + Sync + 'static,
    {
        self.add(decl, |spec, shared| ToolEntry::new(spec, shared, call));
        self
    }

    /// Add a `#[tool(concurrent)]` tool (its adapter borrows the environment shared).
    pub fn concurrent_tool<F>(mut self, decl: ToolDecl<'_>, call: F) -> Self
    where
        F: for<'a> Fn(&'a E, ToolContext, CallInput) -> ToolFuture<'a> + Send + Sync + 'static,
    {
        self.add(decl, |spec, shared| {
            ToolEntry::concurrent(spec, shared, call)
        });
        self
    }

    /// Add a `#[tool(blocking)]` tool.
    pub fn blocking_tool<F>(mut self, decl: ToolDecl<'_>, call: F) -> Self
    where
        F: Fn(&mut E, ToolContext, CallInput) -> RunToolOutput + Send + Sync + 'static,
    {
        self.add(decl, |spec, shared| ToolEntry::blocking(spec, shared, call));
        self
    }

    /// Add the tools of a toolset field.
    pub fn toolset<T: 'static>(mut self, field: ToolsetField<E, T>) -> Self {
        self.entries.extend(field.entries(&mut self.errors));
        self
    }

    /// The toolset field a session selects by `name` (`#[environment(select_toolsets(...))]`).
    pub fn select_toolset<T: 'static>(
        mut self,
        name: &'static str,
        field: ToolsetField<E, T>,
    ) -> Self {
        let entries = field.entries(&mut self.errors);
        self.selectable.push((name, entries));
        self
    }

    /// Add tools known at start-up (`#[environment(dynamic_tools = ...)]`): `DynamicTool`s, or
    /// entries that reach into the episode.
    pub fn dynamic_tools<T: Into<ToolEntry<E>>>(
        mut self,
        tools: impl IntoIterator<Item = T>,
    ) -> Self {
        self.entries.extend(tools.into_iter().map(Into::into));
        self
    }

    /// `#[environment(reasoning)]`: every tool takes an optional `reasoning` string.
    pub fn reasoning(mut self) -> Self {
        self.reasoning = true;
        self
    }

    /// `#[environment(calls_after_finished)]`: calls go on after one returned `finished: true`.
    pub fn calls_after_finished(mut self) -> Self {
        self.calls_after_finished = true;
        self
    }

    /// The finished table (duplicate names become errors there).
    pub fn build(self) -> ToolTable<E> {
        let mut table = ToolTable::build(self.entries, self.reasoning);
        table.calls_after_finished = self.calls_after_finished;
        for (name, entries) in self.selectable {
            table = table.with_selectable(name, entries);
        }
        table.errors.extend(self.errors);
        table
    }
}

/// A tool description from the lines of its doc comment: common indentation removed,
/// lines joined with newlines, surrounding blank lines trimmed.
pub fn doc_description(lines: &[&str]) -> String {
    let split = lines.iter().flat_map(|l| l.split('\n')).map(str::trim_end);
    let lines: Vec<&str> = split.collect();
    let indent = lines
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let dedented = lines.iter().map(|l| l.get(indent..).unwrap_or(""));
    dedented.collect::<Vec<_>>().join("\n").trim().to_owned()
}

/// A toolset stored in a field of `E`: its names (for the compile-time collision check), its
/// table and how to reach it. Made by [`toolset_field`], the one place the generated code
/// requires `T: Toolset`; the macro emits the identical call for the check and for the table,
/// so a field that is not a toolset gives one error.
pub struct ToolsetField<E, T: 'static> {
    /// The toolset's tool names.
    pub names: &'static [&'static str],
    table: fn() -> ToolTable<T>,
    project: fn(&mut E) -> &mut T,
}

impl<E: 'static, T: 'static> ToolsetField<E, T> {
    /// The toolset's tools as tools of `E`; the toolset's own problems go to `errors`.
    fn entries(&self, errors: &mut Vec<ToolTableError>) -> Vec<ToolEntry<E>> {
        let (table, project) = ((self.table)(), self.project);
        errors.extend(table.errors().iter().cloned());
        table.entries().iter().map(|e| e.project(project)).collect()
    }
}

/// The [`ToolsetField`] that `project` reaches; the closure lets the macro name the field
/// without knowing its type.
pub const fn toolset_field<E, T: Toolset>(project: fn(&mut E) -> &mut T) -> ToolsetField<E, T> {
    ToolsetField {
        names: T::TOOL_NAMES,
        table: T::tool_table,
        project,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_description_dedents_keeps_paragraphs_and_trims() {
        assert_eq!(
            doc_description(&[" Add two numbers.", "", " Returns the sum.", ""]),
            "Add two numbers.\n\nReturns the sum."
        );
        // A `/** ... */` block arrives as one string with newlines and its own indentation.
        assert_eq!(
            doc_description(&["\n    Block doc.\n      indented more\n"]),
            "Block doc.\n  indented more"
        );
        assert_eq!(doc_description(&[]), "");
    }
}
