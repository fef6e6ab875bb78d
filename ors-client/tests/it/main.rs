//! Integration tests of the client and the `ors` tool against the in-process server, a
//! sabotaging proxy, and scripted fake servers. One test binary, to keep link time down.

mod blocking;
mod cli;
mod discovery;
mod evaluate;
mod liveness;
mod progress_env;
mod reconnect;
mod retry;
mod sessions;
mod support;
