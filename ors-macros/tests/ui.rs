//! Compile-time behaviour of the macros: what must compile, and what must fail with a
//! message on the offending token (the committed `.stderr` files).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
