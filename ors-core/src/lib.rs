//! Core of ors-rs, the Rust implementation of the Open Reward Standard (ORS): the wire types,
//! the one SSE codec, tool input schemas, provider tool formats, and the environment runtime
//! the `#[environment]` macro targets. No I/O happens here.
//!
//! ```
//! use ors_core::{sse, RunToolOutput, ToolOutput};
//!
//! let result = RunToolOutput::from(ToolOutput::text("Correct!").reward(1.0).finished());
//! let bytes = sse::encode_result(&result);
//! let mut decoder = sse::CallStreamDecoder::new();
//! let events = decoder.push(&bytes);
//! assert_eq!(events, vec![Ok(sse::CallEvent::Result(result))]);
//! ```

#![warn(missing_docs)]

pub mod env;
pub mod provider;
pub mod schema;
pub mod sse;
pub mod types;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use env::{
    DynEnvironment, DynSession, EnvError, EnvHandle, Environment, IntoToolResult, TaskError,
    ToolContext, ToolTable, ToolTableError, Toolset,
};
pub use provider::Provider;
pub use schema::{input_schema, SchemaError};
pub use types::*;
