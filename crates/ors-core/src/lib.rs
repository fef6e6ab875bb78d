//! Core of ors-rs, the Rust implementation of the Open Reward Standard (ORS): the wire
//! protocol only. The wire types, the one SSE codec, provider tool formats, the protocol's
//! constants (header names, routes, event names, limits both sides know), and the bounds on
//! an HTTP body ([`body`]). No I/O and no
//! runtime happen here; the environment runtime is `ors-runtime`, the transport `ors-server`
//! and `ors-client`.
//!
//! ```
//! use ors_core::{sse, RunToolOutput, ToolOutput};
//!
//! let result = RunToolOutput::from(ToolOutput::text("Correct!").with_reward(1.0).finish());
//! let mut bytes = sse::encode_task_id("t1");
//! bytes.extend(sse::encode_result(&result));
//! let mut decoder = sse::CallStreamDecoder::new();
//! let events = decoder.push(&bytes);
//! assert_eq!(
//!     events,
//!     vec![Ok(sse::CallEvent::TaskId("t1".into())), Ok(sse::CallEvent::Result(result))]
//! );
//! ```

#![warn(missing_docs)]

#[macro_use]
mod wire_enum;

pub mod body;
pub mod protocol;
pub mod provider;
pub mod settings;
pub mod sse;
pub mod text;
pub mod types;

pub use protocol::ErrorCode;
pub use provider::Provider;
pub use types::*;
