//! ors-server: host Open Reward Standard environments over HTTP + SSE, on hyper.
//!
//! (Module docs and the doctest example are completed by the server issue.)

pub use ors_core as core;
pub use ors_core::{
    Block, Blocks, EnvError, Environment, RunToolOutput, Secrets, Split, SplitType, ToolContext,
    ToolOutput, ToolSpec, Toolset,
};
pub use ors_macros::{environment, tool, toolset, wire};

#[doc(hidden)]
pub use ors_core::__private;

/// Everything an environment author needs: `use ors_server::prelude::*;`.
pub mod prelude {
    pub use ors_core::__private::schemars::JsonSchema;
    pub use ors_core::__private::serde::{Deserialize, Serialize};
    pub use ors_core::{
        Block, Blocks, EnvError, Environment, ImageBlock, JsonObject, RunToolOutput, Secrets,
        Split, SplitType, TextBlock, ToolContext, ToolOutput, ToolSpec, Toolset,
    };
    pub use ors_macros::{environment, tool, toolset, wire};
}
