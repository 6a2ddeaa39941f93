//! Benches for waffle; the code is in `benches/` (`overhead.rs`: what a span costs; `ffi.rs`: C
//! macros against Rust macros; `decode.rs`: decode and export throughput per format) and the
//! numbers and how to read them are in `README.md`. Run with
//! `cargo bench -p waffle-benches --bench overhead` (or `ffi`, `decode`).
//!
//! The library holds what benches share beyond a configuration: [`real_traces`], the traces of
//! real MPI programs that `real-traces.sh` records.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod real_traces;
