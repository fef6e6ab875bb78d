//! Serve the arithmetic scripted model (OpenAI and Anthropic APIs on one port), so `ors eval`
//! can run over the conformance fixture without a GPU:
//! `cargo run -p ors-examples --bin scripted-model -- --port 8000`.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use ors_examples::scripted_model::ScriptedModel;

/// A model server that reads "What is A+B?" and calls `submit` with the sum.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on; 0 picks a free port.
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Wait this many milliseconds before each answer (a slow model).
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
}

/// With the cargo feature `jemalloc`: jemalloc, like the example servers (the model answers
/// thousands of requests a second in the benchmark, and glibc's allocator costs it more CPU).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let model = ScriptedModel::arithmetic().delay(Duration::from_millis(args.delay_ms));
    let running = match model.bind(&format!("{}:{}", args.host, args.port)).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "scripted-model: cannot listen on {}:{}: {e}",
                args.host, args.port
            );
            return ExitCode::FAILURE;
        }
    };
    // The ready line scripts wait for; the OpenAI base URL is this plus /v1.
    println!("scripted-model listening on http://{}", running.addr());
    let _ = tokio::signal::ctrl_c().await;
    ExitCode::SUCCESS
}
