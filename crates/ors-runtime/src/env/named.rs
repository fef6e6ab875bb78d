//! Named toolsets a session may select with `/create`'s `toolset_name` (PROTOCOL_NOTES row
//! `toolset-name`): `#[environment(select_toolsets(field = "name", ...))]`. Unlike the fields of
//! `toolsets(...)`, whose tools every episode has, a selectable toolset's tools belong only to
//! the sessions that chose it: `/task_tools` lists them after the environment's tools and calls
//! reach them; the shared `/tools` listing does not show them.

use super::{ToolEntry, ToolTable};

/// One selectable toolset of environment `E`: its name and its tools, reached through `E`.
pub struct NamedToolset<E> {
    name: &'static str,
    table: ToolTable<E>,
}

impl<E: 'static> NamedToolset<E> {
    /// A toolset called `name` with these tools (projected onto `E`); `reasoning` when every
    /// tool of the environment takes an optional `reasoning` string.
    pub fn new(name: &'static str, entries: Vec<ToolEntry<E>>, reasoning: bool) -> Self {
        let table = if reasoning {
            ToolTable::with_reasoning(entries)
        } else {
            ToolTable::new(entries)
        };
        Self { name, table }
    }

    /// The name `/create` selects it by.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Its tools.
    pub fn table(&self) -> &ToolTable<E> {
        &self.table
    }
}
