//! The C types of the ABI. Every one is `#[repr(C)]` plain data that C owns; none holds a Rust
//! allocation, so nothing ever has to be freed.
//!
//! Fields a C program must not write are marked "owned by the library". Integers stand where C
//! could put any value (kinds, flags), so that no bit pattern from C is invalid on the Rust side.

use std::ffi::c_char;

/// A span's id: unique within a trace. All zero is the null id, which names no span.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct waffle_span_id_t {
    /// The id's value; 0 is null.
    pub id: u64,
}

/// An event's id: unique within a trace. All zero is the null id, which names no event.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct waffle_event_id_t {
    /// The id's value; 0 is null.
    pub id: u64,
}

/// An open span, as returned by `waffle_span_begin`; pass its address to `waffle_span_end` on
/// the same thread, innermost span first (`WAFFLE_SPAN` does both). A null guard (id 0) is a
/// span that was not recorded; ending it does nothing.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct waffle_span_t {
    /// The span's id, for causal links and contexts.
    pub id: waffle_span_id_t,
    /// Owned by the library: what becomes the current span again when this one ends.
    pub restore: u64,
}

impl waffle_span_t {
    /// The guard of a span that was not recorded.
    pub(crate) const NULL: waffle_span_t = waffle_span_t { id: waffle_span_id_t { id: 0 }, restore: 0 };
}

/// What work elsewhere belongs to: a 128-bit trace id and a span id. It can be copied between
/// threads, sent to another process as bytes or as a W3C traceparent, and entered there with
/// `waffle_context_enter`. All zero is the null context.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct waffle_context_t {
    /// Upper 64 bits of the trace id.
    pub trace_id_hi: u64,
    /// Lower 64 bits of the trace id.
    pub trace_id_lo: u64,
    /// The span; null outside any span.
    pub span_id: waffle_span_id_t,
}

impl waffle_context_t {
    pub(crate) fn from_context(c: waffle::Context) -> waffle_context_t {
        let t = c.trace_id().to_u128();
        waffle_context_t {
            trace_id_hi: (t >> 64) as u64,
            trace_id_lo: t as u64,
            span_id: waffle_span_id_t { id: c.span_id().to_u64() },
        }
    }

    pub(crate) fn to_context(self) -> waffle::Context {
        let t = u128::from(self.trace_id_hi) << 64 | u128::from(self.trace_id_lo);
        waffle::Context::new(waffle::TraceId::from_u128(t), waffle::SpanId::from_u64(self.span_id.id))
    }
}

/// Returned by `waffle_context_enter`; pass its address to `waffle_context_exit` on the same
/// thread to leave the context. All zero is a guard that entered nothing.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct waffle_context_guard_t {
    /// Owned by the library: the span that becomes current again on exit.
    pub restore: u64,
    /// Owned by the library: 1 if a context was entered and not yet exited.
    pub entered: u32,
    /// Zero.
    pub reserved: u32,
}

/// What a `waffle_kv_t` carries. The value kinds (1 to 5) are fields of the span or event; a
/// cause is a causal link to a span or event id; a correlation ties spans and events of any
/// process with the same key and value together.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum waffle_kv_kind_t {
    /// An unsigned integer field (`value.u64`).
    WAFFLE_KV_KIND_U64 = 1,
    /// A signed integer field (`value.i64`).
    WAFFLE_KV_KIND_I64 = 2,
    /// A floating-point field (`value.f64`).
    WAFFLE_KV_KIND_F64 = 3,
    /// A boolean field (`value.u64`, non-zero is true).
    WAFFLE_KV_KIND_BOOL = 4,
    /// A string field (`value.str` and `len`); cut to 1 024 bytes, invalid UTF-8 replaced.
    WAFFLE_KV_KIND_STR = 5,
    /// A cause: `value.u64` is a span or event id (of any thread or process); 0 is skipped.
    WAFFLE_KV_KIND_CAUSE = 16,
    /// A correlation: `key` names the group, `value.u64` is its value. One per call. A key
    /// ending in `>` marks a cause, one ending in `<` an effect (see `WAFFLE_KV_CORRELATE`).
    WAFFLE_KV_KIND_CORRELATE = 17,
}

/// The value of a `waffle_kv_t`; which member is read depends on its kind.
#[repr(C)]
#[derive(Clone, Copy)]
pub union waffle_kv_value_t {
    /// `WAFFLE_KV_KIND_I64`.
    pub i64: i64,
    /// `WAFFLE_KV_KIND_U64`, `_BOOL`, `_CAUSE` and `_CORRELATE`.
    pub u64: u64,
    /// `WAFFLE_KV_KIND_F64`.
    pub f64: f64,
    /// `WAFFLE_KV_KIND_STR`: the bytes; NULL is the empty string.
    pub str: *const c_char,
}

/// `len` of a string value that is NUL-terminated (read up to its NUL, at most 1 024 bytes).
pub const WAFFLE_STRLEN_NUL: u32 = u32::MAX;

/// One key-value of a span or event: a field, a cause or a correlation. The `WAFFLE_KV_*`
/// macros of `waffle_macros.h` build them; a call takes an array of them.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct waffle_kv_t {
    /// The field's name, or the correlation's key (NUL-terminated); unused for causes. Read
    /// only when the callsite is registered, so it should be a string literal.
    pub key: *const c_char,
    /// A `waffle_kv_kind_t`; other values make the call fail with
    /// `WAFFLE_ERR_INVALID_ARGUMENT`.
    pub kind: u32,
    /// For strings: the byte length, or `WAFFLE_STRLEN_NUL`. Otherwise 0.
    pub len: u32,
    /// The value.
    pub value: waffle_kv_value_t,
}

/// Most key-values one call takes; more make it fail with `WAFFLE_ERR_INVALID_ARGUMENT`.
pub const WAFFLE_MAX_KVS: usize = 64;

/// One instrumentation point: a `static` struct per `WAFFLE_SPAN` or `WAFFLE_EVENT` in the
/// source. The first call registers its name and key schema (from that call's key-values) and
/// caches the id in it; later calls only encode values. It must stay valid, at a fixed address,
/// for as long as it is used, and start zeroed in `cached_id`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct waffle_callsite_t {
    /// The span or event name (NUL-terminated; required).
    pub name: *const c_char,
    /// The enclosing function (`__func__`), or NULL.
    pub function: *const c_char,
    /// The source file (`__FILE__`), or NULL.
    pub file: *const c_char,
    /// The source line (`__LINE__`).
    pub line: u32,
    /// Owned by the library (accessed atomically): 0 until the callsite is registered, then
    /// its id plus one.
    pub cached_id: u32,
}

/// A label of the trace file's header, such as `{"rank", "3"}`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct waffle_label_t {
    /// The label's key (NUL-terminated).
    pub key: *const c_char,
    /// The label's value (NUL-terminated).
    pub value: *const c_char,
}

/// Most labels `waffle_start_with` takes.
pub const WAFFLE_MAX_LABELS: usize = 1024;

/// How `waffle_start_with` records. Initialise it with `WAFFLE_CONFIG_INIT(path)`, which sets
/// `abi_version` and the defaults, then change what you need.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct waffle_config_t {
    /// `WAFFLE_ABI_VERSION` of the header the program was compiled with.
    pub abi_version: u32,
    /// Zero.
    pub reserved: u32,
    /// The trace file to write (required).
    pub path: *const c_char,
    /// The process name in the trace, or NULL for the executable's name.
    pub process_name: *const c_char,
    /// Labels for the file header, or NULL.
    pub labels: *const waffle_label_t,
    /// Number of `labels` (at most `WAFFLE_MAX_LABELS`).
    pub label_count: usize,
    /// The `rank` label, or negative to take it from the MPI launcher's environment
    /// (`OMPI_COMM_WORLD_RANK`, `PMI_RANK`, `PMIX_RANK`, `SLURM_PROCID`) or `WAFFLE_RANK`.
    pub rank: i64,
    /// Upper 64 bits of the trace id to record under; with `trace_id_lo`, 0 takes
    /// `WAFFLE_TRACE_ID` from the environment, or else the id of the MPI or Slurm launch (the
    /// same in every rank it started), or else a new random trace id.
    pub trace_id_hi: u64,
    /// Lower 64 bits of the trace id.
    pub trace_id_lo: u64,
    /// A context of another process that this process's top-level spans belong to (its trace
    /// id wins), or NULL to take `WAFFLE_TRACEPARENT` from the environment, if set.
    pub parent: *const waffle_context_t,
}
