//! Runnable ORS environments built with the ors-rs SDK.
//!
//! - [`gsm8k`]: grade-school math word problems answered with a `submit` tool, the environment
//!   of the Quick Start. It embeds 210 problems of our own in GSM8K's format and can serve the
//!   real GSM8K files instead (`--data DIR`).
//! - [`code`]: small Python exercises solved in a sandbox of the episode's own
//!   (`ors_server::sandbox`) with `write_file`, `read_file` and `run`, graded by `submit` in a
//!   fresh sandbox on a copy of the agent's files, from the values its code returns.
//! - [`mcp_env`]: the tools of an MCP server and webhook tools served as the environment `mcp`
//!   (`ors_server::mcp`, `ors_server::webhook`), tasks from a JSONL file.
//! - [`conformance`]: the fixture the conformance and interop tests drive; every tool exercises
//!   one corner of the protocol (chunking, images, errors, panics, cancellation, secrets).
//! - [`scripted_model`]: not an environment but the other side of `ors eval`, a model server
//!   speaking the OpenAI and Anthropic APIs strictly and answering from a script, so agents
//!   can be run and tested without a GPU.
//!
//! Each module is one environment type, so tests and other crates can host them in-process:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use ors_examples::{conformance::Conformance, gsm8k::Gsm8k};
//! use ors_server::{Server, ServerConfig};
//!
//! Server::with_config(ServerConfig::from_env()?)
//!     .environment::<Gsm8k>()
//!     .environment::<Conformance>()
//!     .serve()
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! The binaries `gsm8k`, `code`, `mcp_env` and `conformance` serve one environment each; all take `--host` and
//! `--port` (which override `ORS_HOST` / `ORS_PORT`) and the other `ORS_*` variables.
//!
//! Cargo features, so the Quick start's `gsm8k` compiles only what it runs: `validate` (the
//! JSON Schema validator `code`'s `#[tool(validate)]` needs), `mcp` (`mcp_env`, with
//! `validate`), `parquet` (gsm8k's `--data` in Parquet) and `jemalloc` (the allocator the
//! benchmarks measure the servers with). A binary that needs one requires it:
//! `cargo run -p ors-examples --features mcp --bin mcp_env`.

pub mod cli;
#[cfg(all(unix, feature = "validate"))]
pub mod code;
pub mod conformance;
pub mod gsm8k;
#[cfg(feature = "mcp")]
pub mod mcp_env;
pub mod scripted_model;
