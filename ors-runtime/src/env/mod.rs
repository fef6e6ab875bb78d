//! The environment runtime, one concern a module:
//!
//! - the [`Environment`] trait an author implements (through `#[environment]`), with
//!   [`EnvironmentMeta`], the name and tool table the macro adds (`environment`);
//! - the [`ToolContext`] a tool may ask for (`context`);
//! - the [`ToolTable`] the macros build once per type, and [`Toolset`] (`table`);
//! - the object-safe [`DynEnvironment`] / [`DynSession`] layer that lets one server host many
//!   environment types without being generic over them (`dynamic`);
//! - [`EnvHandle`], which puts one environment type behind that layer and caches its tasks
//!   (`handle`).
//!
//! Nothing here does I/O; the server drives these futures.

mod context;
mod dynamic;
mod environment;
mod handle;
mod table;

pub use context::{ProgressSink, ToolContext};
pub use dynamic::{DynEnvironment, DynSession, TaskError};
pub use environment::{
    call_tool, episode_tools, shared_tools, EnvError, Environment, EnvironmentMeta, WireTask,
};
pub use handle::EnvHandle;

pub(crate) use environment::ENVIRONMENT_METHODS;
pub use table::{ToolEntry, ToolFn, ToolFuture, ToolTable, ToolTableError, Toolset};
