//! The link between the hot path and whatever drains it.
//!
//! The producer side knows nothing of files or threads: a runtime (`waffle-std`, or a
//! bare-metal user) installs [`Hooks`] that hand out [`StreamSlot`]s, and the hot path asks
//! for one the first time a thread records in a session. One global word, [`state`], says
//! whether recording is on and in which session ("epoch"); a thread whose slot belongs to an
//! older epoch trades it in on its next record.
//!
//! A process may load several copies of this crate (a program, a preloaded MPI library, a
//! Python extension module, each with its own statics). One of them runs the session; the
//! others *join* it ([`join`]): their records are handed, through the [`Forward`] their runtime
//! installs, to the copy that runs it, so that one file holds them all, nested in one another
//! on each thread. Only records that find their stream without a slot reach a forwarder:
//! the hot path of the copy that records is unchanged.

use crate::{encode::Writer, ids::TraceId, queue::StreamSlot};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};

/// What a runtime provides to the producer side.
pub struct Hooks {
    /// Gives the calling thread (or stream) a slot it owns exclusively, already claimed with
    /// [`StreamSlot::try_claim`] and empty of earlier owners' chunks, or `None` to record
    /// nothing for now.
    pub acquire: fn() -> Option<&'static StreamSlot>,
    /// Takes back a slot its owner no longer uses (thread exit, or a new session). The slot is
    /// already unclaimed and its last chunk pushed when this runs.
    pub release: fn(&'static StreamSlot),
}

/// 0 when recording is off; otherwise the current session's epoch.
static STATE: AtomicU32 = AtomicU32::new(0);
/// The epoch of the installed hooks, kept while recording is paused.
static EPOCH: AtomicU32 = AtomicU32::new(0);
/// Counts sessions, so that no epoch is reused while a thread may still hold an old one.
static GENERATION: AtomicU32 = AtomicU32::new(0);
static HOOKS: AtomicPtr<Hooks> = AtomicPtr::new(core::ptr::null_mut());
static FORWARD: AtomicPtr<Forward> = AtomicPtr::new(core::ptr::null_mut());

/// [`Forward::record`]: a span begin or an event, its callsite and the writer of its fields.
pub type ForwardRecord = fn(record_tag: u8, callsite: u32, fields: &dyn Fn(&mut Writer<'_>)) -> (u64, u64);

/// Where the records of a copy of waffle go while it records into a session that another copy
/// in the process runs (see the module docs). Each function acts on the calling thread's
/// stream in that other copy, as the method of [`Local`](crate::local::Local) of the same
/// name does here; callsite ids are this copy's (the forwarder translates them).
pub struct Forward {
    /// A span begin ([`tag::SPAN_BEGIN`](crate::wire::tag::SPAN_BEGIN)) or an event with its
    /// field values: the id it took (0: none) and, for a span, the id current before it.
    pub record: ForwardRecord,
    /// Ends the innermost open span, making `prev` current; `at_last`: at the last record's time.
    pub end: fn(prev: u64, at_last: bool),
    /// The latest span or event was caused by `target`.
    pub link: fn(target: u64),
    /// The latest span or event's correlation value.
    pub correlate: fn(value: u64),
    /// Enters a context (`span`), returning what to restore, if it was recorded.
    pub enter: fn(span: u64) -> Option<u64>,
    /// Exits the innermost entered context, making `prev` current.
    pub exit: fn(prev: u64),
    /// Detaches the open span `span`, making `prev` current.
    pub detach: fn(span: u64, prev: u64),
    /// Ends the detached span `span`.
    pub async_end: fn(span: u64),
    /// What the causes of the next record say about keeping it (head sampling).
    pub follow: fn(any: bool, kept: bool),
    /// The innermost open span or entered context (0: none).
    pub current: fn() -> u64,
    /// The latest span or event (0: none).
    pub latest: fn() -> u64,
    /// Pushes what is staged.
    pub flush: fn(),
}

/// The recording state read by every span and event: 0 when off, else the session epoch.
#[inline(always)]
pub fn state() -> u32 {
    STATE.load(Ordering::Relaxed)
}

/// Installs `hooks` and starts a new session; returns its epoch. Threads that recorded in an
/// earlier session give their slots back and acquire new ones on their next record.
pub fn install(hooks: &'static Hooks) -> u32 {
    FORWARD.store(core::ptr::null_mut(), Ordering::Release);
    HOOKS.store(hooks as *const Hooks as *mut Hooks, Ordering::Release);
    begin_epoch()
}

/// Starts recording into a session another copy of waffle runs: from now on every record is
/// handed to `forward` (threads give back the slots of an earlier session of this copy on their
/// next record and take none). Returns the epoch, which [`uninstall`] ends as it ends a session.
pub fn join(forward: &'static Forward) -> u32 {
    FORWARD.store(forward as *const Forward as *mut Forward, Ordering::Release);
    begin_epoch()
}

fn begin_epoch() -> u32 {
    let epoch = GENERATION.fetch_add(1, Ordering::AcqRel).wrapping_add(1).max(1);
    EPOCH.store(epoch, Ordering::Release);
    STATE.store(epoch, Ordering::Release);
    epoch
}

/// Ends recording for the session `epoch` (if it is still current), whether this copy runs
/// it or [`join`]ed it. Later spans and events cost one load and a branch.
pub fn uninstall(epoch: u32) {
    let _ = STATE.compare_exchange(epoch, 0, Ordering::AcqRel, Ordering::Relaxed);
    if EPOCH.compare_exchange(epoch, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
        FORWARD.store(core::ptr::null_mut(), Ordering::Release);
    }
}

/// The forwarder of a joined session (see [`join`]), if this copy records into one.
#[inline]
pub fn forward() -> Option<&'static Forward> {
    let p = FORWARD.load(Ordering::Acquire);
    // SAFETY: the only non-null value ever stored comes from a `&'static Forward` in `join`.
    unsafe { p.as_ref() }
}

/// Pauses (`false`) or resumes (`true`) recording in the current session. Spans already open
/// still record their end, so nesting stays whole.
pub fn set_enabled(on: bool) {
    let epoch = EPOCH.load(Ordering::Acquire);
    STATE.store(if on { epoch } else { 0 }, Ordering::Release);
}

/// The epoch of the current session, also while recording is paused (0: none).
pub fn last_epoch() -> u32 {
    EPOCH.load(Ordering::Acquire)
}

/// The latest session that has written its last records (0: none).
static CLOSED: AtomicU32 = AtomicU32::new(0);

/// Says that session `epoch` has written its last records: its runtime's last pass copied what
/// each thread still had staged into its file. A thread of that session pushes nothing
/// after this (see [`is_closed`]), or its records would reach the next session's file too.
pub fn closed(epoch: u32) {
    CLOSED.fetch_max(epoch, Ordering::AcqRel);
}

/// Whether session `epoch` has written its last records (see [`closed`]). Epochs count up,
/// so every session up to the latest closed one is.
pub fn is_closed(epoch: u32) -> bool {
    epoch != 0 && epoch <= CLOSED.load(Ordering::Acquire)
}

/// Whether `tensor!` (and the bindings' tensor calls) fingerprint tensors: off unless a runtime
/// turns it on (`WAFFLE_TENSORS=1`, `Config::tensors`), since hashing reads the whole tensor.
static TENSORS: AtomicBool = AtomicBool::new(false);

/// Turns tensor fingerprints on or off; read beside [`state`] by every `tensor!`.
pub fn set_tensors(on: bool) {
    TENSORS.store(on, Ordering::Relaxed);
}

/// Whether tensor fingerprints are on (see [`set_tensors`]); spans and events ignore it.
#[inline(always)]
pub fn tensors() -> bool {
    TENSORS.load(Ordering::Relaxed)
}

/// Whether spans and events record now.
#[inline(always)]
pub fn is_enabled() -> bool {
    state() != 0
}

pub(crate) fn hooks() -> Option<&'static Hooks> {
    let p = HOOKS.load(Ordering::Acquire);
    // SAFETY: the only non-null value ever stored comes from a `&'static Hooks` in `install`.
    unsafe { p.as_ref() }
}

/// The session's trace id, in four words (targets without 64-bit atomics have these).
static TRACE_ID: [AtomicU32; 4] =
    [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];

/// Sets the trace id that [`Context::current`](crate::Context::current) reports.
pub fn set_trace_id(id: TraceId) {
    let v = id.to_u128();
    for (i, word) in TRACE_ID.iter().enumerate() {
        word.store((v >> (32 * i)) as u32, Ordering::Relaxed);
    }
}

/// The session's trace id (null before a runtime sets one).
pub fn trace_id() -> TraceId {
    let v = TRACE_ID
        .iter()
        .enumerate()
        .fold(0u128, |acc, (i, w)| acc | u128::from(w.load(Ordering::Relaxed)) << (32 * i));
    TraceId::from_u128(v)
}
