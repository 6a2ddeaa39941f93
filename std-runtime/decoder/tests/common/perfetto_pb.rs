//! Perfetto's trace messages (`perfetto/trace/trace_packet.proto` and the track event
//! protos), with the fields the integration tests read, to decode what the exporter wrote.

#[derive(Clone, PartialEq, prost::Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<Packet>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub struct Packet {
    #[prost(message, optional, tag = "6")]
    pub clocks: Option<ClockSnapshot>,
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "58")]
    pub clock: Option<u32>,
    #[prost(message, optional, tag = "59")]
    pub defaults: Option<Defaults>,
    #[prost(uint32, optional, tag = "10")]
    pub seq: Option<u32>,
    #[prost(message, optional, tag = "11")]
    pub event: Option<Event>,
    #[prost(message, optional, tag = "12")]
    pub interned: Option<Interned>,
    #[prost(message, optional, tag = "60")]
    pub track: Option<Track>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub struct Defaults {
    #[prost(message, optional, tag = "11")]
    pub event: Option<EventDefaults>,
    #[prost(uint32, optional, tag = "58")]
    pub clock: Option<u32>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub struct EventDefaults {
    #[prost(uint64, optional, tag = "11")]
    pub track: Option<u64>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub struct ClockSnapshot {
    #[prost(message, repeated, tag = "1")]
    pub clocks: Vec<Clock>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub struct Clock {
    #[prost(uint32, optional, tag = "1")]
    pub id: Option<u32>,
    #[prost(uint64, optional, tag = "2")]
    pub timestamp: Option<u64>,
    #[prost(bool, optional, tag = "3")]
    pub incremental: Option<bool>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub struct Track {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    #[prost(uint64, optional, tag = "5")]
    pub parent: Option<u64>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub name: Option<String>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    #[prost(int64, optional, tag = "2")]
    pub tid: Option<i64>,
    #[prost(string, optional, tag = "5")]
    pub name: Option<String>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    #[prost(message, repeated, tag = "4")]
    pub args: Vec<Arg>,
    #[prost(int32, optional, tag = "9")]
    pub kind: Option<i32>,
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    #[prost(uint64, optional, tag = "11")]
    pub track: Option<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating: Vec<u64>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub struct Interned {
    #[prost(message, repeated, tag = "2")]
    pub names: Vec<Name>,
    #[prost(message, repeated, tag = "3")]
    pub arg_names: Vec<Name>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub struct Name {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}
#[derive(Clone, PartialEq, prost::Message)]
pub struct Arg {
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    #[prost(bool, optional, tag = "2")]
    pub bool_value: Option<bool>,
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    #[prost(double, optional, tag = "5")]
    pub double_value: Option<f64>,
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
}
