//! The environment runtime, one concern a module:
//!
//! - the [`Environment`] trait an author implements (through `#[environment]`), with
//!   [`EnvironmentMeta`], the name, state type and tool table the macro adds (`environment`);
//! - the [`ToolContext`] a tool may ask for (`context`);
//! - the [`ToolTable`] the macros build once per served environment, and [`Toolset`]
//!   (`table`);
//! - the object-safe [`DynEnvironment`] / [`DynSession`] layer that lets one server host many
//!   environments without being generic over them (`dynamic`);
//! - [`DynamicTool`] / [`DynamicTools`]: tools defined at run time by a spec and a handler
//!   (`dynamic_tools`);
//! - [`EnvHandle`], one served environment (a type with its start-up state, under a name)
//!   behind that layer, serving its splits (cached, or by index), and [`Episode`], which runs
//!   a call's tool, a blocking one on its own thread (`handle`).

mod context;
mod dynamic;
mod dynamic_tools;
mod environment;
mod handle;
mod input;
mod table;

pub use context::{CallLink, ProgressSink, ToolContext};
pub use dynamic::{DynEnvironment, DynSession, TaskError};
pub use dynamic_tools::{DynamicHandler, DynamicTool, DynamicTools};
pub use environment::{EnvError, Environment, EnvironmentMeta, WireTask};
pub use handle::{EnvHandle, Episode, MAX_TASKS_PER_REQUEST};
pub use input::{CallInput, InputError};
/// Whether `name` is a valid tool name: `[A-Za-z0-9_-]{1,64}` (the rule the macros apply).
pub use ors_core::is_valid_tool_name as valid_tool_name;

#[cfg(feature = "mcp")]
pub(crate) use dynamic_tools::checked_input;
pub(crate) use environment::ENVIRONMENT_METHODS;
pub(crate) use table::{as_value, invalid_input, not_an_object};
pub use table::{
    BlockingFn, NameHasher, Prepared, ToolEntry, ToolFn, ToolFuture, ToolRun, ToolTable,
    ToolTableError, Toolset, REASONING_FIELD,
};
