//! # waffle-capi
//!
//! waffle's C ABI, as a Rust library that C libraries re-export: `waffle-ffi` builds it as
//! `libwaffle.so` and `libwaffle.a`, `waffle-mpi` carries it in `libwaffle_mpi.so`. C and C++
//! programs record spans, events, causal links and correlations into the same `trace.bin` files
//! as Rust programs, and `waffle-decode` reads them all together.
//!
//! When two images of one process carry the ABI (a program linked with `libwaffle.so`, run with
//! `LD_PRELOAD=libwaffle_mpi.so`), the dynamic linker binds every `waffle_*` call to one of
//! them, and only that one starts a session from `WAFFLE_OUTPUT` (module `interposed`): one
//! recorder, one file.
//!
//! The headers are in `ffi/include/`:
//!
//! - `waffle.h` — the plain functions and types, generated from this crate by cbindgen and
//!   committed (`cargo test -p waffle-ffi` fails if it drifts; `WAFFLE_BLESS=1` rewrites it);
//! - `waffle_macros.h` — `WAFFLE_SPAN`, `WAFFLE_EVENT` and the `WAFFLE_KV_*` key-values, with a
//!   `static` callsite per use, registered once and cached;
//! - `waffle.hpp` — C++17: `waffle::Span`, `waffle::Event`, `waffle::CausedBy`,
//!   `waffle::ExtractContext` and `waffle::InjectContext`.
//!
//! ```c
//! #include "waffle_macros.h"
//!
//! int main(void) {
//!     if (waffle_start("trace.bin") != WAFFLE_OK) return 1;
//!     {
//!         WAFFLE_SPAN("solve", WAFFLE_KV_U64("cells", 4096));
//!         waffle_event_id_t bad = WAFFLE_EVENT("residual diverged", WAFFLE_KV_F64("r", 1e9));
//!         WAFFLE_SPAN("restart", WAFFLE_KV_CAUSE_EVENT(bad));
//!     }
//!     return waffle_stop() == WAFFLE_OK ? 0 : 1;
//! }
//! ```
//!
//! Tensor fingerprints (`waffle_tensor_f32` and one function per element type, off unless
//! `WAFFLE_TENSORS=1` or `waffle_set_tensors`) and steps (`WAFFLE_STEP(n)`) are in the
//! `tensor` module and the headers; see `docs/tensors.md`.
//!
//! Build with `cc -std=c11 prog.c -Iffi/include -Ltarget/release -lwaffle`, or statically with
//! `target/release/libwaffle.a -lpthread -ldl -lm`.
//!
//! ## The boundary
//!
//! Every function checks its pointers (NULL, alignment), bounds every string scan and count,
//! replaces invalid UTF-8 in names and values, and never lets a panic unwind into C
//! ([`boundary`]). Failures return a status (or, for calls that return an id, a null id and
//! [`waffle_last_status`](report::waffle_last_status)). No function allocates memory that the
//! caller must free, and every type is plain data the caller owns.

#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![allow(non_camel_case_types)] // C type names: waffle_span_id_t

mod boundary;
mod callsite;
mod context;
mod cstr;
mod detached;
mod interposed;
mod kvs;
mod record;
mod report;
mod session;
mod status;
mod tensor;
mod track;
mod types;

pub use context::*;
pub use detached::*;
pub use record::*;
pub use report::*;
pub use session::*;
pub use status::*;
pub use tensor::*;
pub use track::*;
pub use types::*;

/// The version of this ABI: bumped whenever a type or function of `waffle.h` changes
/// incompatibly. `waffle_start` (through its header macro) and `waffle_start_with` refuse to
/// start when the program was compiled against another version.
pub const WAFFLE_ABI_VERSION: u32 = 1;

/// The ABI version of the linked library (`WAFFLE_ABI_VERSION` when it was built).
#[no_mangle]
pub extern "C" fn waffle_abi_version() -> u32 {
    WAFFLE_ABI_VERSION
}
