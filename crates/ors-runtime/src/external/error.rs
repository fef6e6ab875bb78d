//! Why tools from elsewhere could not be set up, below the MCP and webhook modules that
//! fail with it.

use crate::env::ToolTableError;

/// Why tools from elsewhere could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ExternalError {
    /// A configuration (file, command line, URL) is unusable.
    #[error("{0}")]
    Config(String),
    /// An MCP server could not be started, reached or listed.
    #[error("MCP server '{server}': {reason}")]
    Mcp {
        /// The server (its program or URL).
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// A tool's name or schema is unusable, or two tools share a name.
    #[error(transparent)]
    Tool(#[from] ToolTableError),
}
