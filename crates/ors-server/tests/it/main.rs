//! The server's integration tests, one binary: discovery and request-level errors, sessions,
//! tool calls, shutdown and the API key, signals, and what the server prints. Every module
//! drives an in-process server over raw HTTP/1.1 with the fixtures of `support`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

mod calls;
mod concurrency;
mod defences;
mod discovery;
mod lifecycle;
mod openreward;
mod ops;
mod output;
mod score_group;
mod sessions;
mod signal;
mod support;
mod toolkit;
mod toolsets;
