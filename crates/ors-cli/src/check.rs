//! `ors check ENV`: the command line of [`ors_conformance::check`].

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use ors_client::ClientBuilder;
use ors_conformance::check::{self, CheckError, CheckOptions};

/// Exit status when the server could not be reached.
const UNREACHABLE: u8 = 2;

/// The options of `ors check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Environment name.
    env: String,
    /// Write the report (every check, the inputs that showed problems) as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Open episodes on N tasks of every split, spread from the first to the last
    /// [default: the first, a middle and the last].
    #[arg(long, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    tasks: Option<usize>,
    /// Inputs generated per tool from its input schema (0 calls no tool).
    #[arg(long, value_name = "N", default_value_t = check::DEFAULT_FUZZ)]
    fuzz: usize,
    /// Seed of the generated inputs; a problem line prints the seed that reproduces it
    /// [default: from the clock].
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Limit on one tool call or request, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = check::DEFAULT_TIMEOUT.as_secs_f64(),
          value_parser = parse_secs)]
    timeout: f64,
}

fn parse_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a number of seconds between 0 and 86400"
        )),
    }
}

/// Run the checks, printing a line per check and the summary; exit 0 (all ok), 1 (a problem)
/// or 2 (the server could not be reached).
pub async fn run(args: CheckArgs, client: ClientBuilder) -> ExitCode {
    let opts = CheckOptions {
        env: args.env,
        tasks: args.tasks,
        fuzz: args.fuzz,
        seed: args.seed.unwrap_or_else(check::clock_seed),
        timeout: Duration::from_secs_f64(args.timeout),
    };
    let mut print = |item: &check::CheckItem| {
        // A closed pipe (`ors check x | head`) must not panic; the exit status still tells.
        // Stdout is line-buffered, so each line goes out as it is written.
        let _ = writeln!(std::io::stdout().lock(), "{}", item.line());
    };
    let report = match check::run(client, &opts, &mut print).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ors: error: {}", check::one_line(&e.to_string()));
            let unreachable = matches!(e, CheckError::Unreachable(_));
            return ExitCode::from(if unreachable { UNREACHABLE } else { 1 });
        }
    };
    let _ = writeln!(std::io::stdout().lock(), "{}", report.summary());
    if let Some(path) = &args.json {
        // `{:#}`: pretty JSON.
        if let Err(e) = std::fs::write(path, format!("{:#}\n", report.to_json())) {
            return crate::render::fail("ors", &format!("writing {}: {e}", path.display()));
        }
    }
    ExitCode::from(u8::from(report.failed() > 0))
}
