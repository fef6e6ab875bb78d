//! The environment runtime, one concern a module:
//!
//! - the [`Environment`] trait an author implements (through `#[environment]`), with
//!   [`EnvironmentMeta`], the name and tool table the macro adds (`environment`);
//! - the [`ToolContext`] a tool may ask for (`context`);
//! - the [`ToolTable`] the macros build once per type, and [`Toolset`] (`table`);
//! - the object-safe [`DynEnvironment`] / [`DynSession`] layer that lets one server host many
//!   environment types without being generic over them (`dynamic`);
//! - [`DynamicTool`] / [`DynamicTools`]: tools defined at run time by a spec and a handler
//!   (`dynamic_tools`);
//! - [`EnvHandle`], which puts one environment type behind that layer, serves its splits
//!   (cached, or by index) and runs blocking tools on their own threads (`handle`).

mod context;
mod dynamic;
mod dynamic_tools;
mod environment;
mod handle;
mod input;
mod named;
mod table;

pub use context::{ProgressSink, ToolContext};
pub use dynamic::{DynEnvironment, DynSession, TaskError};
pub use dynamic_tools::{valid_tool_name, DynamicHandler, DynamicTool, DynamicTools};
pub use environment::{
    call_tool, episode_tools, shared_tools, EnvError, Environment, EnvironmentMeta, WireTask,
};
pub use handle::{EnvHandle, MAX_TASKS_PER_REQUEST};
pub use input::{CallInput, InputError};
pub use named::NamedToolset;

pub(crate) use environment::ENVIRONMENT_METHODS;
pub(crate) use table::as_value;
pub use table::{
    BlockingFn, Prepared, ToolEntry, ToolFn, ToolFuture, ToolRun, ToolTable, ToolTableError,
    Toolset, REASONING_FIELD,
};
