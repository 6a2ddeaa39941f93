//! Perfetto's messages, with only the fields waffle writes (numbers from perfetto's protos).

/// `Trace`: a `.pftrace` file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// `TracePacket`. The one-of `data` is flattened into optional fields: same bytes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    #[prost(message, optional, tag = "6")]
    pub clock_snapshot: Option<ClockSnapshot>,
    /// On the clock the sequence's defaults name: the time since the sequence's previous
    /// packet (waffle's sequences use an incremental clock).
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    #[prost(bool, optional, tag = "42")]
    pub previous_packet_dropped: Option<bool>,
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    #[prost(message, optional, tag = "59")]
    pub trace_packet_defaults: Option<TracePacketDefaults>,
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    #[prost(bool, optional, tag = "87")]
    pub first_packet_on_sequence: Option<bool>,
}

/// What the packets of a sequence leave out: their clock, and their track events' track.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacketDefaults {
    #[prost(message, optional, tag = "11")]
    pub track_event_defaults: Option<TrackEventDefaults>,
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEventDefaults {
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
}

/// Readings of clocks taken at one instant: how a sequence's clock maps to a global one.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ClockSnapshot {
    #[prost(message, repeated, tag = "1")]
    pub clocks: Vec<Clock>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Clock {
    /// A `BuiltinClock`, or 64 to 127 for a clock of the packet's sequence.
    #[prost(uint32, optional, tag = "1")]
    pub clock_id: Option<u32>,
    #[prost(uint64, optional, tag = "2")]
    pub timestamp: Option<u64>,
    /// Whether the clock's packets give the time since the sequence's previous packet.
    #[prost(bool, optional, tag = "3")]
    pub is_incremental: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
    #[prost(string, repeated, tag = "8")]
    pub process_labels: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int64, optional, tag = "2")]
    pub tid: Option<i64>,
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// `TrackEvent.Type`: 1 slice begin, 2 slice end, 3 instant.
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// The event's name spelt out (waffle's sequences intern names: `name_iid`).
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    /// Flows this event starts or continues. Perfetto's protos are proto2, where repeated
    /// scalars are not packed, and trace_processor's decoder reads only that form.
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    /// Flows this event ends (unpacked, as above).
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct InternedData {
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<InternedString>,
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<InternedString>,
}

/// `EventName` and `DebugAnnotationName`, which share their shape.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct InternedString {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct DebugAnnotation {
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    /// The name spelt out, where it is not interned.
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
    #[prost(oneof = "AnnotationValue", tags = "2, 3, 4, 5, 6")]
    pub value: Option<AnnotationValue>,
}

/// `DebugAnnotation`'s one-of `value`, the scalar cases (`bool_value`, `uint_value`, ...).
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum AnnotationValue {
    #[prost(bool, tag = "2")]
    Bool(bool),
    #[prost(uint64, tag = "3")]
    Uint(u64),
    #[prost(int64, tag = "4")]
    Int(i64),
    #[prost(double, tag = "5")]
    Double(f64),
    #[prost(string, tag = "6")]
    Str(String),
}
