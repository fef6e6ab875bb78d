//! Compile-time behaviour of the macros: what must fail, with a message on the offending
//! token (the committed `.stderr` files). What must compile is `forms.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

/// The `.stderr` snapshots are rustc's wording, which changes between releases: they are
/// compared on the toolchain they were written on and skipped elsewhere. On a new toolchain,
/// regenerate them with `TRYBUILD=overwrite cargo test -p ors-macros --test ui`, read every
/// diff, and move this gate.
#[rustversion::attr(
    not(stable(1.95)),
    ignore = "the .stderr snapshots are rustc 1.95's wording"
)]
#[test]
fn fail() {
    trybuild::TestCases::new().compile_fail("tests/ui/fail/*.rs");
}
