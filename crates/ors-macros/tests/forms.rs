//! The forms the macros accept, compiled with the crate's other tests and run: each file of
//! `tests/forms/` is a program whose `main` asserts what its forms generate. They are not
//! trybuild cases: trybuild builds every dependency again, with code, for programs that must
//! compile and run, while here they share the build of the other tests. What must fail to
//! compile stays with trybuild (`ui.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

// `env_basics!`, for the forms below: the items of an environment no test is about.
#[macro_use]
#[path = "ui/support/env.rs"]
mod support;

#[path = "forms/gsm8k.rs"]
mod gsm8k;
#[path = "forms/renamed_imports.rs"]
mod renamed_imports;
#[path = "forms/select_toolsets.rs"]
mod select_toolsets;
#[path = "forms/state.rs"]
mod state;
// Spellings a user may write and the macro must accept, whatever clippy thinks of them.
#[allow(clippy::needless_arbitrary_self_type, clippy::needless_lifetimes)]
#[path = "forms/tool_forms.rs"]
mod tool_forms;
#[path = "forms/toolkit.rs"]
mod toolkit;
#[path = "forms/wire.rs"]
mod wire;

#[test]
fn an_environment_like_the_gsm8k_example() {
    gsm8k::main();
}

#[test]
fn the_macros_work_under_renamed_imports() {
    renamed_imports::main();
}

#[test]
fn toolsets_are_selected_by_name() {
    select_toolsets::main();
}

#[test]
fn an_environment_holds_start_up_state() {
    state::main();
}

#[test]
fn every_tool_signature_and_return_type() {
    tool_forms::main();
}

#[test]
fn toolsets_and_dynamic_tools() {
    toolkit::main();
}

#[test]
fn wire_types_in_every_shape() {
    wire::main();
}
