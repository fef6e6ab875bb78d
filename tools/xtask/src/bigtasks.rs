//! `cargo xtask bigtasks`: the gsm8k example serving ten million tasks from one file, in JSONL
//! and in Parquet. Generates the files (deleted afterwards), starts the release binary on each,
//! and reports the start-up time (launch to ready line, which comes after the file is indexed),
//! the resident memory, and the latency of `num_tasks`, `task` and `create` at indices across
//! the split; `/tasks` on it must answer 400 pointing at `/task_range`.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use ors_client::{Client, Error};
use serde_json::json;

use crate::bench::servers::rss_kib;
use crate::procs::ServerProcess;

/// Arguments of `cargo xtask bigtasks`.
#[derive(clap::Args)]
pub struct BigTasksArgs {
    /// Rows in the generated split.
    #[arg(long, default_value_t = 10_000_000)]
    pub rows: usize,
    /// Rows per Parquet row group.
    #[arg(long, default_value_t = 65_536)]
    pub row_group: usize,
    /// Where to write the files (default: a new directory under the system temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Problem `i`: small and distinct, in GSM8K's shape.
fn row(i: usize) -> (String, String) {
    let (a, b) = (i % 100_003, i / 7 + 1);
    (
        format!("Problem {i}: what is {a} plus {b}?"),
        format!("{a} + {b} = <<{a}+{b}={s}>>{s}\n#### {s}", s = a + b),
    )
}

fn write_jsonl(path: &Path, rows: usize) -> Result<(), String> {
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    for i in 0..rows {
        let (q, a) = row(i);
        serde_json::to_writer(&mut out, &json!({"question": q, "answer": a}))
            .map_err(|e| e.to_string())?;
        out.write_all(b"\n").map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}

fn write_parquet(path: &Path, rows: usize, group: usize) -> Result<(), String> {
    let rows = (0..rows).map(|i| {
        let (q, a) = row(i);
        vec![q, a]
    });
    ors_server::tasks::write_parquet(path, &["question", "answer"], rows, group)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// What one run measured.
struct Figures {
    file_mib: f64,
    startup: Duration,
    rss_ready_mib: f64,
    rss_after_mib: f64,
    num_tasks: u64,
    task_ms: Vec<(usize, f64)>,
    create_ms: f64,
    tasks_reply: String,
}

async fn probe(url: &str, rows: usize) -> Result<(u64, Vec<(usize, f64)>, f64, String), String> {
    let client = Client::new(url).map_err(|e| e.to_string())?;
    let env = client.environment("gsm8k");
    let num_tasks = env.num_tasks("train").await.map_err(|e| e.to_string())?;
    let mut task_ms = Vec::new();
    for i in [0, rows / 2, rows / 3 * 2 + 1, rows - 1] {
        let t0 = Instant::now();
        let task = env
            .task("train", i as i64)
            .await
            .map_err(|e| e.to_string())?;
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        let want = row(i).0;
        if task["question"] != want.as_str() || task["id"] != i.to_string().as_str() {
            return Err(format!("task {i} is {task}, not problem {i}"));
        }
        task_ms.push((i, ms));
    }
    let t0 = Instant::now();
    let session = env
        .session_at("train", (rows - 1) as i64)
        .await
        .map_err(|e| e.to_string())?;
    let prompt = session.prompt().await.map_err(|e| e.to_string())?;
    let create_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let text = prompt[0].as_text().unwrap_or_default().to_owned();
    if !text.starts_with(&format!("Problem {}:", rows - 1)) {
        return Err(format!(
            "the episode at the last index has the prompt {text:?}"
        ));
    }
    let answer = (rows - 1) % 100_003 + (rows - 1) / 7 + 1;
    let out = session
        .call("submit", json!({"answer": answer.to_string()}))
        .await
        .map_err(|e| e.to_string())?;
    if out.reward != Some(1.0) {
        return Err(format!("the right answer scored {:?}", out.reward));
    }
    session.close().await.map_err(|e| e.to_string())?;
    let tasks_reply = match env.tasks("train").await {
        Err(Error::Http { status, detail, .. }) => format!("{status}: {detail}"),
        Err(e) => return Err(format!("/tasks failed unexpectedly: {e}")),
        Ok(t) => return Err(format!("/tasks listed {} tasks", t.len())),
    };
    if !tasks_reply.starts_with("400") || !tasks_reply.contains("/task_range") {
        return Err(format!("/tasks answered {tasks_reply}"));
    }
    Ok((num_tasks, task_ms, create_ms, tasks_reply))
}

fn measure(bin: &Path, file: &Path, rows: usize) -> Result<Figures, String> {
    let file_mib = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0) as f64 / 1048576.0;
    let mut cmd = Command::new(bin);
    cmd.args(["--host", "127.0.0.1", "--port", "0", "--data"])
        .arg(file)
        .env_remove("RUST_LOG")
        .stderr(Stdio::null());
    let t0 = Instant::now();
    let server = ServerProcess::start(cmd, Duration::from_secs(120))?;
    let startup = t0.elapsed();
    let rss = |pid| rss_kib(pid).map_or(0.0, |k| k as f64 / 1024.0);
    let rss_ready_mib = rss(server.pid);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (num_tasks, task_ms, create_ms, tasks_reply) = rt.block_on(probe(&server.url, rows))?;
    if num_tasks != rows as u64 {
        return Err(format!(
            "num_tasks is {num_tasks}, the file has {rows} rows"
        ));
    }
    Ok(Figures {
        file_mib,
        startup,
        rss_ready_mib,
        rss_after_mib: rss(server.pid),
        num_tasks,
        task_ms,
        create_ms,
        tasks_reply,
    })
}

/// Run the measurement.
pub fn run(args: BigTasksArgs) -> Result<ExitCode, String> {
    let target = crate::procs::build_examples(&["gsm8k"], true)?;
    let bin = target.join("gsm8k");
    let own_dir = args.dir.is_none();
    let dir = args.dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("ors-bigtasks-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = (|| {
        let mut report = Vec::new();
        for (name, write) in [("train.parquet", true), ("train.jsonl", false)] {
            let path = dir.join(name);
            eprintln!(
                "xtask: bigtasks: writing {} rows to {}",
                args.rows,
                path.display()
            );
            let t0 = Instant::now();
            if write {
                write_parquet(&path, args.rows, args.row_group)?;
            } else {
                write_jsonl(&path, args.rows)?;
            }
            eprintln!(
                "xtask: bigtasks: written in {:.1} s",
                t0.elapsed().as_secs_f64()
            );
            let figures = measure(&bin, &path, args.rows);
            let _ = std::fs::remove_file(&path);
            report.push((name, figures?));
        }
        Ok::<_, String>(report)
    })();
    if own_dir {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let report = result?;
    println!(
        "gsm8k --data FILE, {} rows (release build; start-up = launch to ready line, index built)",
        args.rows
    );
    println!("| file | size MiB | start-up ms | RSS ready MiB | RSS after MiB | task ms (index: ms) | create+prompt ms |");
    println!("|---|---|---|---|---|---|---|");
    for (name, f) in &report {
        let tasks: Vec<String> = f
            .task_ms
            .iter()
            .map(|(i, ms)| format!("{i}: {ms:.1}"))
            .collect();
        println!(
            "| {name} | {:.0} | {:.0} | {:.1} | {:.1} | {} | {:.1} |",
            f.file_mib,
            f.startup.as_secs_f64() * 1000.0,
            f.rss_ready_mib,
            f.rss_after_mib,
            tasks.join(", "),
            f.create_ms
        );
        debug_assert_eq!(f.num_tasks, args.rows as u64);
    }
    if let Some((_, f)) = report.first() {
        println!("/tasks on the split: {}", f.tasks_reply);
    }
    Ok(ExitCode::SUCCESS)
}
