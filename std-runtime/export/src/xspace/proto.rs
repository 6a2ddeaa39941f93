//! TensorBoard's profiler messages (`tensorflow.profiler.XSpace` and what it holds), with only
//! the fields waffle writes. Field numbers are those of `xplane.proto` (tsl/profiler/protobuf),
//! as xprof reads them. All are proto3: a field at its default value is not written.
//!
//! Lines and planes are written by hand around these (see `super`): an XLine's events are
//! kept encoded until the line is written. Decoding a file with [`XSpace`] reads it back.

use std::collections::BTreeMap;

/// `XSpace`: what one profiled host wrote, one `.xplane.pb` file. The writer writes it by
/// hand (see `super`); this reads it back.
#[derive(Clone, PartialEq, prost::Message)]
pub struct XSpace {
    /// Its planes: waffle writes one, the host's.
    #[prost(message, repeated, tag = "1")]
    pub planes: Vec<XPlane>,
    /// Errors the profiler met.
    #[prost(string, repeated, tag = "2")]
    pub errors: Vec<String>,
    /// Warnings the profiler met.
    #[prost(string, repeated, tag = "3")]
    pub warnings: Vec<String>,
    /// The hosts it was recorded on.
    #[prost(string, repeated, tag = "4")]
    pub hostnames: Vec<String>,
}

/// `XPlane`: one device or the host's threads (`/host:CPU`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct XPlane {
    /// Its id.
    #[prost(int64, tag = "1")]
    pub id: i64,
    /// Its name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Its lines (threads).
    #[prost(message, repeated, tag = "3")]
    pub lines: Vec<XLine>,
    /// Event names by metadata id.
    #[prost(btree_map = "int64, message", tag = "4")]
    pub event_metadata: BTreeMap<i64, XEventMetadata>,
    /// Stat names by metadata id.
    #[prost(btree_map = "int64, message", tag = "5")]
    pub stat_metadata: BTreeMap<i64, XStatMetadata>,
    /// Its stats.
    #[prost(message, repeated, tag = "6")]
    pub stats: Vec<XStat>,
}

/// `XLine`: one thread's timeline. Its events' offsets count from `timestamp_ns`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct XLine {
    /// Its id.
    #[prost(int64, tag = "1")]
    pub id: i64,
    /// Its name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Where its events' offsets count from, Unix ns.
    #[prost(int64, tag = "3")]
    pub timestamp_ns: i64,
    /// Its events.
    #[prost(message, repeated, tag = "4")]
    pub events: Vec<XEvent>,
    /// Its (or its events') duration, ps.
    #[prost(int64, tag = "9")]
    pub duration_ps: i64,
    /// The id shown.
    #[prost(int64, tag = "10")]
    pub display_id: i64,
    /// The name shown.
    #[prost(string, tag = "11")]
    pub display_name: String,
}

/// `XEvent`: a slice (or an instant, of duration 0) on a line. `offset_ps` is one arm of the
/// `data` oneof; waffle never writes the other (`num_occurrences`, 5).
#[derive(Clone, PartialEq, prost::Message)]
pub struct XEvent {
    /// The id of its metadata (its name).
    #[prost(int64, tag = "1")]
    pub metadata_id: i64,
    /// Its start, ps after its line's `timestamp_ns`.
    #[prost(int64, tag = "2")]
    pub offset_ps: i64,
    /// Its (or its events') duration, ps.
    #[prost(int64, tag = "3")]
    pub duration_ps: i64,
    /// Its stats.
    #[prost(message, repeated, tag = "4")]
    pub stats: Vec<XStat>,
}

/// `XEventMetadata`: what the events with its id are called.
#[derive(Clone, PartialEq, prost::Message)]
pub struct XEventMetadata {
    /// Its id.
    #[prost(int64, tag = "1")]
    pub id: i64,
    /// Its name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// The name shown.
    #[prost(string, tag = "4")]
    pub display_name: String,
}

/// `XStatMetadata`: the name of the stats with its id.
#[derive(Clone, PartialEq, prost::Message)]
pub struct XStatMetadata {
    /// Its id.
    #[prost(int64, tag = "1")]
    pub id: i64,
    /// Its name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// What it means.
    #[prost(string, tag = "3")]
    pub description: String,
}

/// `XStat`: one named value of an event (or a plane).
#[derive(Clone, PartialEq, prost::Message)]
pub struct XStat {
    /// The id of its metadata (its name).
    #[prost(int64, tag = "1")]
    pub metadata_id: i64,
    /// Its value.
    #[prost(oneof = "StatValue", tags = "2, 3, 4, 5, 6, 7")]
    pub value: Option<StatValue>,
}

/// `XStat.value`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum StatValue {
    /// A double.
    #[prost(double, tag = "2")]
    Double(f64),
    /// An unsigned integer.
    #[prost(uint64, tag = "3")]
    Uint64(u64),
    /// A signed integer.
    #[prost(int64, tag = "4")]
    Int64(i64),
    /// A string.
    #[prost(string, tag = "5")]
    Str(String),
    /// Bytes.
    #[prost(bytes = "vec", tag = "6")]
    Bytes(Vec<u8>),
    /// The id of a stat metadata whose name is the value (a string written once).
    #[prost(uint64, tag = "7")]
    Ref(u64),
}
