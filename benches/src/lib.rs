//! Overhead benches for waffle; the code is in `benches/overhead.rs` and the numbers and how to
//! read them are in `README.md`. Run with `cargo bench -p waffle-benches --bench overhead`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
