//! # waffle-ffi
//!
//! `libwaffle.so` and `libwaffle.a`: the C libraries that carry waffle's C ABI. The functions
//! themselves are in `waffle-capi` (`ffi/capi/`), a Rust library that `waffle-mpi`
//! (`libwaffle_mpi.so`, the MPI interposition library) carries too, so that a program preloading
//! that library and linking this one records through one recorder; this crate only re-exports
//! it. The headers are in `ffi/include/` (`waffle.h`, generated from `ffi/capi/src` by cbindgen
//! and committed; `waffle_macros.h`; `waffle.hpp`).
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
//! Build with `cc -std=c11 prog.c -Iffi/include -Ltarget/release -lwaffle`, or statically with
//! `target/release/libwaffle.a -lpthread -ldl -lm`.

#![warn(missing_docs)]

pub use waffle_capi::*;
