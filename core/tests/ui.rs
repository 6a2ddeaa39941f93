//! Compile-time tests of `span!`, `event!` and `#[instrument]`: what they accept, and the
//! errors they give for what they reject.
//!
//! Regenerate the expected errors with `TRYBUILD=overwrite cargo test -p waffle --test ui` and
//! read every `.stderr` before committing it.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
