//! End-to-end tests across the ors-rs crates live in `tests/tests/`. This library only makes
//! the README's examples doctests, so the README cannot drift from the API.
#![doc = include_str!("../../README.md")]
