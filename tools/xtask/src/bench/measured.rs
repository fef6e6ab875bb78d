//! What was measured on one server: start-up times, the workloads' reports, idle memory, the
//! concurrency sizes, the metrics cost, and the failures outside the load generator.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::load::error_count;
use super::metrics::MetricsCost;

/// What was measured on one server.
#[derive(Default)]
pub struct Measured {
    pub(super) startup_ms: Vec<f64>,
    pub(super) workloads: BTreeMap<String, Value>,
    pub(super) idle: Option<Value>,
    /// The concurrency workload's report at each session count.
    pub(super) concurrency: BTreeMap<usize, Value>,
    /// The metrics-off and metrics-on rounds (ours only).
    pub(super) metrics: Option<MetricsCost>,
    /// The sandbox cost and capacity (ours only).
    pub(super) sandbox: Option<Value>,
    /// Failures outside the load generator (launch, crash, build).
    pub(super) failures: Vec<String>,
}

impl Measured {
    /// Every error: in the load generator's reports and outside it.
    pub fn errors(&self) -> u64 {
        let in_workloads: u64 = self.workloads.values().map(error_count).sum();
        let in_idle = self.idle.as_ref().map_or(0, error_count);
        let in_concurrency: u64 = self.concurrency.values().map(error_count).sum();
        let in_metrics = self.metrics.as_ref().map_or(0, MetricsCost::errors);
        in_workloads + in_idle + in_concurrency + in_metrics + self.failures.len() as u64
    }

    /// The JSON form of the results.
    pub fn to_json(&self) -> Value {
        let mut sorted = self.startup_ms.clone();
        sorted.sort_by(f64::total_cmp);
        json!({
            "startup_ms": self.startup_ms,
            "startup_ms_median": sorted.get(sorted.len() / 2),
            "workloads": self.workloads,
            "idle": self.idle,
            "concurrency": concurrency_json(&self.concurrency),
            "metrics_cost": self.metrics.as_ref().map(MetricsCost::to_json),
            "sandbox": self.sandbox,
            "failures": self.failures,
            "errors": self.errors(),
        })
    }
}

/// The concurrency reports keyed by their session count as text (JSON keys are strings).
pub fn concurrency_json(c: &BTreeMap<usize, Value>) -> Value {
    c.iter()
        .map(|(n, v)| (n.to_string(), v.clone()))
        .collect::<serde_json::Map<String, Value>>()
        .into()
}
