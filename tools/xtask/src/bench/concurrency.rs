//! The concurrency workload (OpenEnv's scaling method): N sessions, one connection each, each
//! calling `sleep {"ms": 1000}` in a loop; success rate, call latency, and the server's memory
//! and CPU over the window. A fresh server per N, so one size's memory does not hide in the
//! next and a server that fell over at one size does not fail the next.
//!
//! The file descriptor limit is raised here (RLIMIT_NOFILE, inherited by every server and the
//! load generator this process starts): 16k connections need 16k descriptors on each side.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::load::run_load;
use super::measured::Measured;
use super::plan::{Plan, TARGET_P99_MS, TARGET_SESSIONS};
use super::servers::{self, Kind, Launcher};

/// The sleep of every call, ms.
pub const SLEEP_MS: u64 = 1000;

/// Below this success rate the reference is not tried at the next size ("until it fails").
const GIVE_UP_BELOW: f64 = 0.5;

/// Descriptors per process beyond one per connection (listeners, logs, the runtime).
const SPARE_FDS: u64 = 1024;

/// Raise this process's RLIMIT_NOFILE so `connections` fit, for itself and the processes it
/// starts: the soft limit up to the hard one, and the hard one too when allowed. Says
/// what it did; an error only when the limit stays too low.
pub fn raise_fd_limit(connections: usize) -> Result<(), String> {
    use rlimit::Resource;
    let need = connections as u64 + SPARE_FDS;
    let (soft, hard) = Resource::NOFILE
        .get()
        .map_err(|e| format!("reading RLIMIT_NOFILE: {e}"))?;
    if soft >= need {
        return Ok(());
    }
    // The soft limit goes all the way up: our server keeps a tenth of its limit (at least
    // 128) for everything but connections, so it needs more than one descriptor each.
    let raised = if hard >= need {
        Resource::NOFILE.set(hard, hard)
    } else {
        // Only a privileged process may raise the hard limit; try, then settle for it.
        Resource::NOFILE
            .set(need, need)
            .or_else(|_| Resource::NOFILE.set(hard, hard))
    };
    raised.map_err(|e| format!("raising RLIMIT_NOFILE to {need}: {e}"))?;
    let (now, _) = Resource::NOFILE
        .get()
        .map_err(|e| format!("reading RLIMIT_NOFILE: {e}"))?;
    eprintln!("bench: concurrency: file descriptor limit raised from {soft} to {now}");
    if now < need {
        return Err(format!(
            "{connections} connections need {need} file descriptors per process and the hard \
             limit is {hard} (raise it, e.g. `ulimit -Hn {need}` as root)"
        ));
    }
    Ok(())
}

/// One sample of a process: when, its memory, its CPU time.
#[derive(Clone, Copy)]
struct Sample {
    unix_ms: u64,
    rss_kib: u64,
    cpu_s: f64,
}

/// Samples a process every 250 ms until dropped.
struct Sampler {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<Sample>>>,
}

impl Sampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let unix_ms = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                if let (Some(rss_kib), Some(cpu_s)) =
                    (servers::rss_kib(pid), servers::cpu_secs(pid))
                {
                    samples.push(Sample {
                        unix_ms,
                        rss_kib,
                        cpu_s,
                    });
                }
                std::thread::sleep(Duration::from_millis(250));
            }
            samples
        });
        Self {
            stop,
            handle: Some(handle),
        }
    }

    fn finish(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The server's peak memory and CPU over the report's window, added to the report.
fn add_server_figures(v: &mut Value, samples: &[Sample]) {
    let (Some(start), Some(end)) = (
        v["window_start_unix_ms"].as_u64(),
        v["window_end_unix_ms"].as_u64(),
    ) else {
        return;
    };
    let inside: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.unix_ms >= start && s.unix_ms <= end)
        .collect();
    let (Some(first), Some(last)) = (inside.first(), inside.last()) else {
        return;
    };
    let secs = (last.unix_ms - first.unix_ms) as f64 / 1000.0;
    v["server_rss_peak_kib"] = json!(inside.iter().map(|s| s.rss_kib).max());
    v["server_rss_end_kib"] = json!(last.rss_kib);
    if secs > 0.0 {
        v["server_cpu_pct"] = json!((last.cpu_s - first.cpu_s) / secs * 100.0);
    }
}

/// The sizes each server is measured at.
fn sizes(kind: Kind, plan: &Plan) -> &[usize] {
    match kind {
        Kind::Reference => &plan.concurrency_ref,
        _ => &plan.concurrency_ours,
    }
}

/// Run the concurrency workload on `kind` at each of its sizes, into `m.concurrency`.
pub fn measure(kind: Kind, launcher: &Launcher, plan: &Plan, m: &mut Measured) {
    let name = kind.name();
    let (duration, warmup) = (plan.concurrency_duration, plan.concurrency_warmup);
    for &n in sizes(kind, plan) {
        eprintln!("bench: {name}: concurrency, {n} sessions for {duration} s ...");
        match run_once(kind, launcher, n, (duration, warmup), plan.client_threads) {
            Ok(mut v) => {
                eprintln!("bench: {name}: concurrency {n}: {}", brief(&v));
                let rate = v["success_rate"].as_f64().unwrap_or(0.0);
                if kind == Kind::Reference {
                    // The reference failing at a size is what is measured, not an error of
                    // the benchmark: its failures are kept under another name.
                    if let Some(e) = v.as_object_mut().and_then(|o| o.remove("errors")) {
                        v["call_errors"] = e;
                    }
                }
                m.concurrency.insert(n, v);
                if kind == Kind::Reference && rate < GIVE_UP_BELOW {
                    eprintln!(
                        "bench: {name}: concurrency: {:.1}% success at {n}; not trying more",
                        rate * 100.0
                    );
                    break;
                }
            }
            Err(e) => m.failures.push(format!("concurrency {n}: {e}")),
        }
    }
}

/// One run of the workload at `n` sessions on a fresh server of `kind`: the load generator's
/// report with the server's peak memory and CPU over the window, and whether it survived.
pub fn run_once(
    kind: Kind,
    launcher: &Launcher,
    n: usize,
    (duration, warmup): (f64, f64),
    client_threads: usize,
) -> Result<Value, String> {
    let (server, _) = launcher
        .start(kind, Some(n * 2))
        .map_err(|e| format!("launch: {e}"))?;
    let args: Vec<String> = [
        "--workload",
        "concurrency",
        "--sessions",
        &n.to_string(),
        "--duration",
        &duration.to_string(),
        "--warmup",
        &warmup.to_string(),
        "--sleep-ms",
        &SLEEP_MS.to_string(),
        "--threads",
        &client_threads.max(2).to_string(),
        "--time-limit",
        &(duration + 600.0).to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let sampler = Sampler::start(server.pid);
    let result = run_load(&launcher.bench, &server.url, kind == Kind::Limit, &args);
    let samples = sampler.finish();
    let alive = servers::alive(server.pid);
    drop(server);
    let mut v = result?;
    add_server_figures(&mut v, &samples);
    v["server_survived"] = json!(alive);
    Ok(v)
}

fn pct(v: &Value, key: &str) -> String {
    v[key]
        .as_f64()
        .map_or("-".into(), |r| format!("{:.2}%", r * 100.0))
}

/// A KiB figure of the report in MiB, or `-`.
fn mib(v: &Value, key: &str) -> String {
    v[key]
        .as_f64()
        .map_or("-".into(), |k| format!("{:.0}", k / 1024.0))
}

/// A figure of the report rounded, followed by `unit`, or `-`.
fn whole(v: &Value, key: &str, unit: &str) -> String {
    v[key]
        .as_f64()
        .map_or("-".into(), |x| format!("{x:.0}{unit}"))
}

fn ms(v: &Value, key: &str) -> String {
    whole(v, key, "")
}

/// One line about one run.
pub fn brief(v: &Value) -> String {
    format!(
        "{} success ({} calls ok, {} failed), p50 {} ms, p99 {} ms, max {} ms, server {} MiB / {} CPU",
        pct(v, "success_rate"),
        v["calls_ok"],
        v["calls_failed"],
        ms(v, "p50_ms"),
        ms(v, "p99_ms"),
        ms(v, "max_ms"),
        mib(v, "server_rss_peak_kib"),
        whole(v, "server_cpu_pct", "%"),
    )
}

/// The concurrency table, as printed after the main one.
pub fn render(results: &BTreeMap<&str, Measured>, plan: &Plan) -> String {
    let mut out = String::new();
    if results.values().all(|m| m.concurrency.is_empty()) {
        return out;
    }
    let _ = writeln!(
        out,
        "\nConcurrency: N sessions, one connection each, each calling sleep {SLEEP_MS} ms in a \
         loop for {} s (latency after a {} s warm-up; success over every call)",
        plan.concurrency_duration, plan.concurrency_warmup
    );
    let header = [
        "sessions", "server", "success", "calls", "p50 ms", "p99 ms", "max ms", "p99 all",
        "RSS MiB", "CPU %", "client s",
    ];
    let mut rows: Vec<[String; 11]> = Vec::new();
    let mut all: Vec<(usize, &str, &Value)> = results
        .iter()
        .flat_map(|(name, m)| m.concurrency.iter().map(move |(n, v)| (*n, *name, v)))
        .collect();
    all.sort_by_key(|(n, name, _)| (*n, *name));
    for (n, name, v) in all {
        rows.push([
            n.to_string(),
            name.to_owned(),
            pct(v, "success_rate"),
            v["calls_ok"].to_string(),
            ms(v, "p50_ms"),
            ms(v, "p99_ms"),
            ms(v, "max_ms"),
            ms(v, "p99_all_ms"),
            mib(v, "server_rss_peak_kib"),
            whole(v, "server_cpu_pct", ""),
            whole(v, "client_cpu_s", ""),
        ]);
    }
    let mut width = header.map(str::len);
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(width).enumerate() {
            if i == 1 {
                let _ = write!(s, "{c:<w$}  ");
            } else {
                let _ = write!(s, "{c:>w$}  ");
            }
        }
        s.trim_end().to_owned()
    };
    let _ = writeln!(out, "{}", line(header.map(str::to_owned).to_vec()));
    for r in rows {
        let _ = writeln!(out, "{}", line(r.to_vec()));
    }
    for (name, m) in results {
        let skipped: Vec<String> = sizes_of(name, plan)
            .iter()
            .filter(|n| !m.concurrency.contains_key(n))
            .map(usize::to_string)
            .collect();
        if !skipped.is_empty() && !m.concurrency.is_empty() {
            let _ = writeln!(
                out,
                "  {name}: not run at {} (below {:.0}% success at a smaller size, or failed)",
                skipped.join(", "),
                GIVE_UP_BELOW * 100.0
            );
        }
    }
    out
}

fn sizes_of<'a>(name: &str, plan: &'a Plan) -> &'a [usize] {
    if name == Kind::Reference.name() {
        &plan.concurrency_ref
    } else {
        &plan.concurrency_ours
    }
}

/// Whether ours met the target at [`TARGET_SESSIONS`], and the figures saying so.
pub fn target(results: &BTreeMap<&str, Measured>) -> (Option<bool>, String) {
    let Some(v) = results
        .get(Kind::Ours.name())
        .and_then(|m| m.concurrency.get(&TARGET_SESSIONS))
    else {
        return (None, "-".into());
    };
    let rate = v["success_rate"].as_f64().unwrap_or(0.0);
    let p99 = v["p99_ms"].as_f64();
    let met = rate >= 1.0 && p99.is_some_and(|p| p <= TARGET_P99_MS);
    (
        Some(met),
        format!(
            "{} success, p99 {} ms",
            pct(v, "success_rate"),
            ms(v, "p99_ms")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(unix_ms: u64, rss_kib: u64, cpu_s: f64) -> Sample {
        Sample {
            unix_ms,
            rss_kib,
            cpu_s,
        }
    }

    #[test]
    fn server_figures_cover_the_window_only() {
        let mut v = json!({"window_start_unix_ms": 1000, "window_end_unix_ms": 3000});
        let samples = [
            sample(500, 900, 0.0),
            sample(1000, 100, 1.0),
            sample(2000, 300, 1.5),
            sample(3000, 200, 2.0),
            sample(3500, 999, 9.0),
        ];
        add_server_figures(&mut v, &samples);
        assert_eq!(v["server_rss_peak_kib"], 300);
        assert_eq!(v["server_rss_end_kib"], 200);
        assert_eq!(v["server_cpu_pct"], 50.0);
    }

    #[test]
    fn the_target_needs_every_call_and_the_p99() {
        let mut results = BTreeMap::new();
        let mut m = Measured::default();
        m.concurrency.insert(
            TARGET_SESSIONS,
            json!({"success_rate": 1.0, "p99_ms": 1100.0}),
        );
        results.insert("ours", m);
        assert_eq!(target(&results).0, Some(true));
        let m = results.get_mut("ours").unwrap();
        m.concurrency.insert(
            TARGET_SESSIONS,
            json!({"success_rate": 0.9999, "p99_ms": 1100.0}),
        );
        assert_eq!(target(&results).0, Some(false));
        let m = results.get_mut("ours").unwrap();
        m.concurrency.insert(
            TARGET_SESSIONS,
            json!({"success_rate": 1.0, "p99_ms": 1300.0}),
        );
        assert_eq!(target(&results).0, Some(false));
        assert_eq!(target(&BTreeMap::new()).0, None);
    }
}
