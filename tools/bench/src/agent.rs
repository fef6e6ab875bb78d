//! The `agent` workload: whole agent episodes through `ors_client::evaluate` and the `Agent`
//! (the product path of `ors eval`: task, session, prompt, tools, a model call to the scripted
//! model server, the tool call, delete, the trajectory serialized) over the conformance
//! fixture's `train` split, `sessions` at once.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use ors_client::agent::ModelOptions;
use ors_client::{evaluate, Agent, Api, Client, EvalOptions};
use serde_json::{json, Value};

use crate::stats::{Errors, Recorder};
use crate::workloads::{LoadOpts, TRAIN_TASKS};

/// Episodes per second assumed when sizing the list of tasks; the run stops at the end of its
/// window long before the list would run out.
const MAX_RATE: f64 = 50_000.0;

/// Run agent episodes for the warm-up and the window; one report.
pub async fn agent(url: &str, model_base: &str, o: &LoadOpts) -> Value {
    let mut errors = Errors::default();
    let built = Client::builder(url)
        .no_api_key()
        .build()
        .and_then(|client| {
            let model = ModelOptions::new(Api::OpenAi, model_base, "scripted").connect(&client)?;
            Ok((client, model))
        });
    let (client, model) = match built {
        Ok(pair) => pair,
        Err(e) => {
            errors.add_other(format!("set-up: {e}"));
            return json!({"workload": "agent", "errors": errors.to_json()});
        }
    };
    let env = client.environment("conformance");
    let agent = Arc::new(Agent::new(model));
    let start = Instant::now();
    let (from, to) = (start + o.warmup, start + o.warmup + o.duration);
    let n = ((o.warmup + o.duration).as_secs_f64() * MAX_RATE) as u64;
    let indices = (0..n).map(|i| (i % TRAIN_TASKS) as i64);

    let options = EvalOptions::default()
        .concurrency(o.sessions)
        .max_steps(4)
        .keep_episodes(false);
    let stop = options.stop_handle();
    let seen = Arc::new(Mutex::new((Recorder::default(), Errors::default())));
    let s = Arc::clone(&seen);
    let options = options.on_progress(move |p| {
        let ended = Instant::now();
        if ended >= to {
            stop.stop();
        }
        let Ok(mut guard) = s.lock() else { return };
        let (rec, errs) = &mut *guard;
        let e = p.episode;
        if let Some(err) = &e.error {
            errs.add_other(format!("episode {}: {}", e.index, err.message));
        } else if e.total_reward != 1.0 {
            errs.add_other(format!("episode {}: reward {}", e.index, e.total_reward));
        } else if ended >= from && ended < to {
            // What `ors eval` does with each episode: one JSON line.
            match serde_json::to_vec(e) {
                Ok(line) => {
                    std::hint::black_box(line);
                    rec.record(std::time::Duration::from_secs_f64(e.timings.wall_ms / 1e3));
                }
                Err(err) => errs.add_other(format!("trajectory: {err}")),
            }
        }
    });
    evaluate(&env, "train", indices, agent, options).await;
    let (mut rec, errs) = match Arc::try_unwrap(seen).map(Mutex::into_inner) {
        Ok(Ok(pair)) => pair,
        _ => (Recorder::default(), Errors::default()),
    };
    errors.merge(errs);
    let mut v = rec.summary(o.duration);
    v["workload"] = json!("agent");
    v["sessions"] = json!(o.sessions);
    v["errors"] = errors.to_json();
    v
}
