//! The types copies of waffle in one process share, laid out for C (`#[repr(C)]`) so that
//! copies built by other compilers or other versions of this crate read them alike.
//!
//! [`Hub`] begins with a part no later protocol changes (magic, protocol, pid, token, whether a
//! session records and into which file): a copy that finds a hub of another protocol can still
//! tell whether someone records, say so, and keep from writing a second file. Everything
//! after it, [`Module`] and [`SessionApi`], belongs to one [`PROTOCOL`]; a record crosses as
//! its field values in the file format's encoding, whose version [`Module::wire_version`]
//! carries.

use std::{
    ffi::c_char,
    sync::atomic::{AtomicPtr, AtomicU32, AtomicU64},
};

/// What a hub and a module begin with: "waffle-h" in ASCII, little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"waffle-h");

/// The protocol this copy speaks. A copy joins only a hub of the same protocol.
pub const PROTOCOL: u32 = 1;

/// How many copies of waffle one hub lists.
pub const MAX_MODULES: usize = 32;

/// The part of a hub that every protocol keeps as it is.
#[repr(C)]
pub struct Head {
    /// [`MAGIC`].
    pub magic: u64,
    /// The [`PROTOCOL`] of the copy that made it.
    pub protocol: u32,
    /// The process that made it (a forked child makes the hub its own again).
    pub pid: AtomicU32,
    /// A random number also written in the environment, so that a stale address (after an
    /// `exec` that kept the pid) is never taken for a hub.
    pub token: AtomicU64,
    /// 1 while a session records (set by compare-and-swap from 0 by the copy that starts it,
    /// whatever its protocol), else 0.
    pub recording: AtomicU32,
    /// The file that session writes, NUL-terminated (null if none): memory of its owner, kept
    /// for the life of the process.
    pub file: AtomicPtr<c_char>,
}

/// The process's meeting point, in the memory of the first copy of waffle that was loaded.
#[repr(C)]
pub struct Hub {
    /// What every protocol keeps.
    pub head: Head,
    /// The thread holding the lock (its OS id), 0 if none.
    pub lock_holder: AtomicU64,
    /// How many times the holder took the lock.
    pub lock_depth: AtomicU32,
    /// The copy whose session records, null if none.
    pub owner: AtomicPtr<Module>,
    /// Every copy of waffle loaded, in the order they were.
    pub modules: [AtomicPtr<Module>; MAX_MODULES],
}

/// One copy of waffle (an executable, a shared library, an extension module), as others see
/// it: a `static` of that copy, which never unloads (it pins its image).
#[repr(C)]
pub struct Module {
    /// [`MAGIC`].
    pub magic: u64,
    /// [`PROTOCOL`].
    pub protocol: u32,
    /// The version of the file format of the records it hands over.
    pub wire_version: u32,
    /// The image's file name, NUL-terminated (for messages).
    pub name: AtomicPtr<c_char>,
    /// The crate version of `waffle-std` in it, NUL-terminated.
    pub version: *const c_char,
    /// Called when the session of `owner` starts (this copy then records into it) or, with
    /// null, when it ends. Never called on the owner itself.
    pub joined: extern "C" fn(owner: *const Module),
    /// Called when the owner pauses (`false`) or resumes (`true`) recording.
    pub enabled: extern "C" fn(on: bool),
    /// This copy's session, for the others while it records.
    pub api: SessionApi,
}

// SAFETY: the one field that is not `Sync` by itself, `version`, points to an immutable static
// string; every other field is an atomic, a function pointer or plain data never written.
unsafe impl Sync for Module {}

/// A string lent across the boundary: `len` bytes at `ptr` (UTF-8 expected, not trusted).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Text {
    /// The first byte (may dangle when `len` is 0).
    pub ptr: *const u8,
    /// The number of bytes.
    pub len: usize,
}

/// One field of a callsite's schema.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FieldDesc {
    /// The key.
    pub name: Text,
    /// The type code of `waffle::wire::FieldType`.
    pub ty: u8,
}

/// A callsite a joined copy registers with the owner.
#[repr(C)]
pub struct SiteDesc {
    /// 1: span, 2: event (`waffle::callsite::Kind`).
    pub kind: u8,
    /// Source line.
    pub line: u32,
    /// Span or event name.
    pub name: Text,
    /// Module path.
    pub module: Text,
    /// Source file.
    pub file: Text,
    /// Correlation key, empty if none.
    pub correlate: Text,
    /// The schema, `field_count` fields.
    pub fields: *const FieldDesc,
    /// The number of fields.
    pub field_count: usize,
}

/// What a session is, as its owner describes it.
#[repr(C)]
pub struct SessionInfo {
    /// The owner's epoch of the session.
    pub epoch: u32,
    /// Started by `WAFFLE_OUTPUT` (an explicit start replaces it).
    pub automatic: bool,
    /// Recording now (not paused).
    pub enabled: bool,
    /// Tensor fingerprints on.
    pub tensors: bool,
    /// Head sampling: roots are kept below this threshold; `u32::MAX` with `sampling` false.
    pub sample_threshold: u32,
    /// Head sampling is on.
    pub sampling: bool,
    /// The trace id, lower and upper halves.
    pub trace_id_lo: u64,
    /// See `trace_id_lo`.
    pub trace_id_hi: u64,
}

/// What stopping a session gave.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct StopResult {
    /// 0: stopped; 1: there was no such session; 2: it stopped with an error (reported by the
    /// owner on stderr).
    pub status: u32,
    /// `collector::Stats`'s counts.
    pub data_bytes: u64,
    /// DATA frames written.
    pub data_frames: u64,
    /// Records dropped.
    pub dropped: u64,
    /// Streams that had an owner.
    pub streams: u64,
    /// Stream slots made.
    pub slots: u64,
    /// Threads refused a slot.
    pub refused_threads: u64,
    /// TAIL frames written.
    pub tail_frames: u64,
}

/// The session of the copy that owns it, called by the others. Record functions act on the
/// calling thread's recording stream in the owner.
#[repr(C)]
pub struct SessionApi {
    /// Registers a callsite; its id in the owner's file, `u32::MAX` if refused.
    pub register: extern "C" fn(site: *const SiteDesc) -> u32,
    /// A span begin or an event (`tag`) with its encoded field values; the id it took (0:
    /// none) and, for a span, the id that was current before it in `*prev`.
    pub record: extern "C" fn(tag: u8, callsite: u32, fields: *const u8, len: usize, prev: *mut u64) -> u64,
    /// Ends the innermost open span.
    pub end: extern "C" fn(prev: u64, at_last: bool),
    /// The latest span or event was caused by `target`.
    pub link: extern "C" fn(target: u64),
    /// The latest span or event's correlation value.
    pub correlate: extern "C" fn(value: u64),
    /// Enters a context; whether it was recorded, and what to restore in `*prev`.
    pub enter: extern "C" fn(span: u64, prev: *mut u64) -> bool,
    /// Exits the innermost entered context.
    pub exit: extern "C" fn(prev: u64),
    /// Detaches the open span `span`.
    pub detach: extern "C" fn(span: u64, prev: u64),
    /// Ends the detached span `span`.
    pub async_end: extern "C" fn(span: u64),
    /// Head sampling: what the next record's causes say.
    pub follow: extern "C" fn(any: bool, kept: bool),
    /// The innermost open span or entered context.
    pub current: extern "C" fn() -> u64,
    /// The latest span or event.
    pub latest: extern "C" fn() -> u64,
    /// Pushes what the calling thread staged.
    pub flush: extern "C" fn(),
    /// Describes the session into `*info`; false if none runs.
    pub describe: extern "C" fn(info: *mut SessionInfo) -> bool,
    /// Copies the session's file name into `buf` (at most `cap` bytes); its length (which may
    /// exceed `cap`), 0 if no session runs.
    pub path: extern "C" fn(buf: *mut u8, cap: usize) -> usize,
    /// Stops the session whose epoch is `epoch` (0: whichever runs). `replacing`: for another
    /// copy's explicit start, only an automatic session, whose file is removed if it holds no
    /// record (what an explicit start does to one in its own copy).
    pub stop: extern "C" fn(epoch: u32, replacing: bool) -> StopResult,
    /// Makes the automatic session an ordinary one (`autostart::take`); whether there was one.
    pub take: extern "C" fn() -> bool,
    /// Pauses or resumes recording.
    pub set_enabled: extern "C" fn(on: bool),
}
