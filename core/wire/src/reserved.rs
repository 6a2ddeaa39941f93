//! Field names with a meaning of their own: what makes an event a tensor fingerprint and a span
//! a step.
//!
//! These change no byte of the format: a tensor is an ordinary EVENT and a step an ordinary
//! SPAN_BEGIN, recognised by the keys of their callsite's schema. The recorder's APIs
//! (`waffle::tensor!`, `waffle::step!`, the C and Python bindings) write them; the decoder's
//! exporters and `diff` read them. `docs/wire-format.md` ("Reserved fields") gives the rules.

/// The tensor fingerprint's fields, in the order they lead its event's schema. An event is a
/// tensor when its schema holds [`HASH`](tensor::HASH); fields a user adds come after these.
pub mod tensor {
    /// `str`: the tensor's name as the program gave it (`"blk0/attn_norm"`). The event's own
    /// callsite name is the same when it was known at compile time, else `"tensor"`.
    pub const NAME: &str = "tensor.name";
    /// `str`: the element type: `f16`, `bf16`, `f32`, `f64`, `i8`, `i16`, `i32`, `i64`, `u8`,
    /// `u16`, `u32`, `u64`.
    pub const DTYPE: &str = "tensor.dtype";
    /// `str`: the dimensions joined by `x` (`"1x2560"`); the element count alone when the
    /// program gave no shape, `""` for a scalar.
    pub const SHAPE: &str = "tensor.shape";
    /// `u64`: the number of elements.
    pub const COUNT: &str = "tensor.count";
    /// `u64`: XXH3-64 (seed 0) of the elements' bytes in little-endian order.
    pub const HASH: &str = "tensor.hash";
    /// `f64`: the root mean square of the finite elements (NaN when none is finite).
    pub const RMS: &str = "tensor.rms";
    /// `f64`: the smallest finite element (NaN when none is finite).
    pub const MIN: &str = "tensor.min";
    /// `f64`: the largest finite element (NaN when none is finite).
    pub const MAX: &str = "tensor.max";
    /// `u64`: how many elements are NaN.
    pub const NAN: &str = "tensor.nan";
    /// `u64`: how many elements are +Inf.
    pub const POS_INF: &str = "tensor.pinf";
    /// `u64`: how many elements are -Inf.
    pub const NEG_INF: &str = "tensor.ninf";

    /// Every reserved key, in schema order.
    pub const ALL: [&str; 11] = [NAME, DTYPE, SHAPE, COUNT, HASH, RMS, MIN, MAX, NAN, POS_INF, NEG_INF];
}

/// The field that makes a span a step marker and gives its number (`u64` or `i64`): the first
/// field of the spans `waffle::step!` records, whose callsite name is [`STEP_SPAN`].
pub const STEP: &str = "step";

/// The name of the spans `waffle::step!`, `waffle.step` and `WAFFLE_STEP` record.
pub const STEP_SPAN: &str = "step";

/// `str`, on a device queue's span (a kernel, a copy): the name of the host operation that
/// launched it, as a conversion of another tool's profile gives it (the PyTorch profiler's
/// `cpu_op` with the kernel's `External id`). `diff` pairs kernels of different names by it.
pub const LAUNCH_OP: &str = "launch.op";

/// Device tracks: a named timeline in a clock of its own (a GPU queue, an accelerator), whose
/// slices the host records after the fact in device ticks. Three kinds of event, each an
/// ordinary EVENT known by its callsite's name or schema; `docs/wire-format.md` ("Reserved
/// fields") gives the rules and `docs/device-tracks.md` the clock mapping.
pub mod track {
    /// The OS thread id a device's timeline is given as a thread of its own (a device track's
    /// slices, a GPU stream of another tool's trace): above any Linux tid (at most 2^22),
    /// below `i32::MAX` (formats that keep tids as 32-bit signed numbers), plus the
    /// timeline's number in its process. A reader knows a device queue by it.
    pub const DEVICE_TID_BASE: u64 = 2_000_000_000;

    /// A HEADER label: how many of the process's threads are device queues (tids from
    /// [`DEVICE_TID_BASE`] up), written by a conversion of another tool's trace whose host
    /// threads hold the CPU side of the work. `diff` then compares the queues' work (kernels,
    /// copies) and the host's only when asked.
    pub const DEVICE_QUEUES: &str = "device.queues";

    /// The name of the event that defines a track (`waffle::Track::new`); its schema is
    /// [`NAME`], [`RATE`]. The track's id is this event's id.
    pub const DEFINE: &str = "track";
    /// `str`: the track's name (`"GPU 0"`).
    pub const NAME: &str = "track.name";
    /// `u64`: the device clock's nominal ticks per second.
    pub const RATE: &str = "track.rate";
    /// The name of the event that pairs a device clock reading with the host's clock
    /// (`Track::sync`); its schema is [`ID`], [`TICKS`], and the host time is the event's own.
    pub const SYNC: &str = "track.sync";
    /// `u64`: the id of the track (its defining event's id). First field of a sync and of a
    /// slice.
    pub const ID: &str = "track.id";
    /// `u64`: the device clock's reading (a sync).
    pub const TICKS: &str = "track.ticks";
    /// `u64`: a slice's begin, in device ticks. A slice is an event whose schema starts with
    /// [`ID`], [`BEGIN`], [`END`]; the event's name is the slice's, fields a user adds follow,
    /// and its first cause (a link) is the span or event that launched it.
    pub const BEGIN: &str = "track.begin";
    /// `u64`: a slice's end, in device ticks.
    pub const END: &str = "track.end";
    /// The keys a slice's schema starts with, in order.
    pub const SLICE: [&str; 3] = [ID, BEGIN, END];
}
