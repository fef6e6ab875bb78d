//! End-to-end tests across the ors-rs crates live in `tests/tests/`. This library only makes
//! the examples of the README and of the guides in `docs/` doctests, so neither can drift from
//! the API: the README is the crate's documentation, each guide that of a hidden module.
#![doc = include_str!("../../README.md")]

#[doc = include_str!("../../docs/environments.md")]
mod environments_guide {}

#[doc = include_str!("../../docs/programs.md")]
mod programs_guide {}

#[doc = include_str!("../../docs/client-and-eval.md")]
mod client_and_eval_guide {}

#[doc = include_str!("../../docs/serving.md")]
mod serving_guide {}

#[doc = include_str!("../../docs/checking.md")]
mod checking_guide {}

#[doc = include_str!("../../docs/performance.md")]
mod performance_guide {}
