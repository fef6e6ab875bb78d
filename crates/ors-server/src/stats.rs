//! [`ServerStats`]: a snapshot of the gauges a running server keeps, for tests, health
//! checks and metrics.

/// What a running server holds at one moment; see [`crate::RunningServer::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerStats {
    /// Open client connections (at most [`crate::ServerConfig::max_connections`]).
    pub connections: usize,
    /// Bytes held for request bodies: buffers being read and call inputs not yet handed to
    /// their tool (at most [`crate::ServerConfig::max_body_bytes_in_flight`]).
    pub body_bytes: usize,
    /// Bytes of finished results kept for reconnects (at most
    /// [`crate::ServerConfig::max_lingering_bytes`]).
    pub lingering_result_bytes: usize,
    /// Live sessions.
    pub sessions: usize,
    /// Tool calls started and not finished, server-wide.
    pub running_calls: usize,
}
