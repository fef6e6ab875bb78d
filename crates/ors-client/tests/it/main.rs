//! Integration tests of the client against the in-process server, a
//! sabotaging proxy, and scripted fake servers. One test binary, to keep link time down.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

mod agent;
mod blocking;
mod discovery;
mod evaluate;
mod fake;
mod hostile;
mod liveness;
mod progress_env;
mod reconnect;
mod retry;
mod score_group;
mod sessions;
mod support;
mod tls;
