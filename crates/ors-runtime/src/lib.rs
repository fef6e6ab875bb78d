//! The environment runtime of ors-rs: the [`Environment`] trait an author implements (through
//! `#[environment]`), the tool tables the macros build once per served environment, the
//! [`ToolContext`] a tool may ask for, tool input schemas from `schemars`, and the type-erased
//! [`DynEnvironment`] layer a server hosts.
//!
//! Where things live: the wire protocol (types, SSE codec, provider formats, constants) is
//! `ors-core`, which this crate builds on; this crate is everything an *environment* needs and a
//! *client* does not, so `ors-client` never compiles it. `ors-server` re-exports it (an author
//! writes `use ors_server::prelude::*;`), and the code `ors-macros` generates names it through
//! `::ors_server::__private`. The network is the server's; the I/O here is what environments
//! need: task files read on demand, and programs run for tools.
//!
//! Inside, one concern a module: [`env`](mod@env) holds the trait and what the macro adds to it
//! ([`EnvironmentMeta`], [`WireTask`]), the [`ToolContext`], the [`ToolTable`] and
//! [`Toolset`], tools defined at run time ([`DynamicTool`]), the [`DynEnvironment`] /
//! [`DynSession`] layer, the [`EnvHandle`] that puts one served environment (a type with its
//! start-up state) behind it, and the [`Episode`] that runs a call's tool;
//! [`schema`] makes tool input schemas and validates inputs against them; [`tasks`] reads task
//! sets of any size from JSONL and Parquet files; [`process`] runs programs for tools, and
//! [`sandbox`] gives each episode a sandbox of its own to run the agent's code in;
//! `external` (features `webhooks` and `mcp`) takes tools from webhooks and MCP servers.
//! `__private` (hidden) is what the generated code calls: the traits that give a tool's
//! parameters their role by type, and the checks it runs at compile time.
//!
//! ```
//! use ors_runtime::schema::input_schema;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Submit {
//!     /// Your final answer.
//!     answer: String,
//! }
//!
//! let schema = input_schema::<Submit>().expect("an object schema");
//! assert_eq!(schema["properties"]["answer"]["description"], "Your final answer.");
//! ```

#![warn(missing_docs)]

pub mod env;
#[cfg(feature = "webhooks")]
pub mod external;
#[cfg(unix)]
pub mod process;
#[cfg(unix)]
pub mod sandbox;
pub mod schema;
pub mod tasks;

#[doc(hidden)]
#[path = "private/mod.rs"]
pub mod __private;

#[cfg(feature = "mcp")]
pub use external::mcp;
#[cfg(feature = "webhooks")]
pub use external::webhook;

pub use env::{
    DynEnvironment, DynSession, DynamicTool, DynamicTools, EnvError, EnvHandle, Environment,
    EnvironmentMeta, Episode, TaskError, ToolContext, ToolTable, ToolTableError, Toolset, WireTask,
};
pub use ors_core::{IntoToolResult, Json};
pub use schema::{input_schema, InputValidator, SchemaError};
