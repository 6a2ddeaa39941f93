//! The cold frames of `trace.bin` as typed values: [`Header`], [`Callsites`], [`Stream`],
//! [`DataHead`], [`TailHead`], [`Clock`] and [`End`], each encoded and decoded by postcard from
//! its serde derive, with the checks the format asks for beside it.
//!
//! The types are chosen so that postcard writes exactly the bytes of format version 1
//! (`docs/wire-format.md`): `u32`/`u64` are LEB128 varints, a `u8` one raw byte, a string its
//! varint length and bytes, a `Vec` its varint count and items, `[u8; 16]` sixteen raw bytes,
//! struct fields follow in order. Where postcard's choice differs from the format (a `u128`
//! would be a varint, an enum a variant index, invalid UTF-8 an error) a `with` function of
//! `wire/text.rs` keeps the format's. So files written before the grammar existed decode, and
//! no version change was needed.
//!
//! Decoding never trusts a count with memory: postcard 1.2 hints a sequence's size only when
//! at least that many bytes remain (one per item), and serde caps any preallocation at 1 MiB,
//! so what a length prefix makes the decoder allocate is bounded by the input's size. Bytes
//! after the last field are ignored, so that a later version may append fields.

use super::{
    frame,
    frame_error::{take, FrameError, Problem},
    text, Calibration, FieldType,
};
use crate::Kind;
use alloc::{borrow::Cow, string::String, vec::Vec};
use serde::{Deserialize, Serialize};

/// A frame payload of the grammar: its kind, and its encoding by postcard.
pub trait FramePayload<'a>: Serialize + Deserialize<'a> {
    /// The frame kind ([`frame`]) this payload goes in.
    const KIND: u8;

    /// The payload's bytes.
    fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("postcard writes any frame into a Vec")
    }

    /// The value of `payload`, checked; bytes after it are ignored.
    fn decode(payload: &'a [u8]) -> Result<Self, FrameError> {
        let (value, _) = take::<Self>(Self::KIND, payload, 0)?;
        value.check().map_err(|problem| FrameError { kind: Self::KIND, at: None, problem })?;
        Ok(value)
    }

    /// What a decoded value must satisfy beyond its encoding.
    fn check(&self) -> Result<(), Problem> {
        Ok(())
    }
}

/// HEADER: what a file says about its process, first thing after the magic.
///
/// This is also the decoder's record of a process (`waffle_read::model::Process::header`):
/// one type owns these fields on both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// OS process id.
    pub pid: u32,
    /// Process name (the executable's file name unless one was given).
    #[serde(deserialize_with = "text::string")]
    pub name: String,
    /// Host name.
    #[serde(deserialize_with = "text::string")]
    pub host: String,
    /// Labels such as `rank`, in the order written.
    #[serde(deserialize_with = "text::pairs")]
    pub labels: Vec<(String, String)>,
    /// The clock that made the ticks: `tsc`, `cntvct`, `instant` or `user`.
    #[serde(deserialize_with = "text::string")]
    pub clock_source: String,
    /// Ticks to Unix ns, measured at start (a CLOCK frame may refine it).
    pub calibration: Calibration,
    /// The process salt in span and event ids.
    pub salt: u64,
    /// The trace id the process recorded under.
    #[serde(with = "text::le_u128")]
    pub trace_id: u128,
    /// A span of another process that this process's top-level spans belong to; 0 for none
    /// (as written; see [`parent_span`](Header::parent_span)).
    pub parent: u64,
}

impl Header {
    /// The span of another process that this process's top-level spans belong to.
    pub fn parent_span(&self) -> Option<u64> {
        Some(self.parent).filter(|&p| p != 0)
    }

    /// The value of a label.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

impl Default for Header {
    /// An empty header with a one-to-one calibration at tick 0 (for tests and fixtures).
    fn default() -> Header {
        Header {
            pid: 0,
            name: String::new(),
            host: String::new(),
            labels: Vec::new(),
            clock_source: String::new(),
            calibration: Calibration { anchor_ticks: 0, anchor_unix_ns: 0, ticks: 1, ns: 1 },
            salt: 0,
            trace_id: 0,
            parent: 0,
        }
    }
}

impl FramePayload<'_> for Header {
    const KIND: u8 = frame::HEADER;

    fn check(&self) -> Result<(), Problem> {
        check_calibration(&self.calibration)
    }
}

/// CALLSITES: a run of the string table, callsites `first`, `first + 1`, ... of `module`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Callsites<'a> {
    /// The image whose callsites these are; waffle's writers use 0.
    pub module: u32,
    /// The id of the first callsite.
    pub first: u32,
    /// The callsites, by id from `first`.
    #[serde(borrow)]
    pub callsites: Vec<CallsiteDesc<'a>>,
}

/// One callsite of a CALLSITES frame, and the one description of a callsite everywhere: the
/// recorder's run-time callsites and the reader's model hold it owned (`CallsiteDesc<'static>`),
/// the frames borrow it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallsiteDesc<'a> {
    /// Span or event.
    #[serde(with = "text::kind")]
    pub kind: Kind,
    /// Span or event name.
    #[serde(borrow, deserialize_with = "text::cow")]
    pub name: Cow<'a, str>,
    /// `module_path!()`, or the foreign language's module.
    #[serde(borrow, deserialize_with = "text::cow")]
    pub module: Cow<'a, str>,
    /// Source file.
    #[serde(borrow, deserialize_with = "text::cow")]
    pub file: Cow<'a, str>,
    /// Source line.
    pub line: u32,
    /// The schema: field names and types, in record order.
    #[serde(borrow)]
    pub fields: Vec<FieldDesc<'a>>,
    /// The correlation key, "" if none.
    #[serde(borrow, deserialize_with = "text::cow")]
    pub correlate: Cow<'a, str>,
}

/// One field of a callsite's schema.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FieldDesc<'a> {
    /// The key.
    #[serde(borrow, deserialize_with = "text::cow")]
    pub name: Cow<'a, str>,
    /// Its type, one byte.
    #[serde(with = "text::field_type")]
    pub ty: FieldType,
}

impl CallsiteDesc<'_> {
    /// The same description, owning its strings.
    pub fn into_owned(self) -> CallsiteDesc<'static> {
        CallsiteDesc {
            kind: self.kind,
            name: Cow::Owned(self.name.into_owned()),
            module: Cow::Owned(self.module.into_owned()),
            file: Cow::Owned(self.file.into_owned()),
            line: self.line,
            fields: self.fields.into_iter().map(FieldDesc::into_owned).collect(),
            correlate: Cow::Owned(self.correlate.into_owned()),
        }
    }

    /// The field names, in record order.
    pub fn field_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.fields.iter().map(|f| &*f.name)
    }

    /// Where field `name` is in the schema.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }
}

impl FieldDesc<'_> {
    /// A field of this name and type.
    pub fn new(name: impl Into<String>, ty: FieldType) -> FieldDesc<'static> {
        FieldDesc { name: Cow::Owned(name.into()), ty }
    }

    /// The same field, owning its name.
    pub fn into_owned(self) -> FieldDesc<'static> {
        FieldDesc { name: Cow::Owned(self.name.into_owned()), ty: self.ty }
    }
}

impl<'a> Callsites<'a> {
    /// The callsites of `payload` up to the first that does not decode, and why that one did
    /// not (a reader keeps what came before the damage).
    pub fn decode_prefix(payload: &'a [u8]) -> (Callsites<'a>, Option<FrameError>) {
        #[derive(Deserialize)]
        struct Head {
            module: u32,
            first: u32,
            count: u32,
        }
        let mut out = Callsites { module: 0, first: 0, callsites: Vec::new() };
        let (head, mut rest) = match take::<Head>(frame::CALLSITES, payload, 0) {
            Ok(h) => h,
            Err(e) => return (out, Some(e)),
        };
        (out.module, out.first) = (head.module, head.first);
        for i in 0..head.count {
            let at = payload.len() - rest.len();
            match take::<CallsiteDesc<'a>>(frame::CALLSITES, rest, at) {
                Ok((cs, r)) => {
                    out.callsites.push(cs);
                    rest = r;
                }
                Err(mut e) => {
                    // The only serde errors of a callsite are its codes: the kind is its
                    // first byte, anything later a field type.
                    if let (Problem::BadCode(code), Some(bad)) = (e.problem, e.at) {
                        let callsite = head.first.saturating_add(i);
                        e.problem = if bad == at {
                            Problem::UnknownKind { callsite, code }
                        } else {
                            Problem::UnknownFieldType { callsite, code }
                        };
                    }
                    return (out, Some(e));
                }
            }
        }
        (out, None)
    }
}

impl<'a> FramePayload<'a> for Callsites<'a> {
    const KIND: u8 = frame::CALLSITES;

    fn decode(payload: &'a [u8]) -> Result<Self, FrameError> {
        match Callsites::decode_prefix(payload) {
            (all, None) => Ok(all),
            (_, Some(e)) => Err(e),
        }
    }
}

/// STREAM: a new owner (thread) of a stream slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stream<'a> {
    /// The slot index.
    pub stream: u32,
    /// The owner generation of the slot (1 for its first owner).
    pub generation: u32,
    /// The image whose callsites the stream's records name; waffle's writers use 0.
    pub module: u32,
    /// OS thread id.
    pub tid: u64,
    /// Thread name, "" if unnamed.
    #[serde(borrow, deserialize_with = "text::cow")]
    pub name: Cow<'a, str>,
}

impl<'a> FramePayload<'a> for Stream<'a> {
    const KIND: u8 = frame::STREAM;
}

/// The head of a DATA frame: the slot its chunks come from. The chunks follow, to the end of
/// the payload ([`super::chunk`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataHead {
    /// The slot index.
    pub stream: u32,
}

impl DataHead {
    /// The head of a DATA payload and the chunks after it.
    pub fn split(payload: &[u8]) -> Result<(DataHead, &[u8]), FrameError> {
        take::<DataHead>(frame::DATA, payload, 0)
    }
}

impl FramePayload<'_> for DataHead {
    const KIND: u8 = frame::DATA;
}

/// The head of a TAIL frame: the slot whose staged records follow, as exactly one chunk
/// ([`super::chunk`]) to the end of the payload. A TAIL is a snapshot of records a thread
/// staged and had not pushed (it was blocked, or the session stopped), with the head their
/// chunk will have; a later DATA chunk of the slot with the same generation and first id holds
/// the same records and more, and supersedes it (`docs/wire-format.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TailHead {
    /// The slot index.
    pub stream: u32,
}

impl TailHead {
    /// The head of a TAIL payload and the chunk after it.
    pub fn split(payload: &[u8]) -> Result<(TailHead, &[u8]), FrameError> {
        take::<TailHead>(frame::TAIL, payload, 0)
    }
}

impl FramePayload<'_> for TailHead {
    const KIND: u8 = frame::TAIL;
}

/// CLOCK: the calibration measured over the whole session, written at a clean stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clock {
    /// Ticks to Unix ns; the last valid one of a file applies to all its ticks.
    pub calibration: Calibration,
}

impl FramePayload<'_> for Clock {
    const KIND: u8 = frame::CLOCK;

    fn check(&self) -> Result<(), Problem> {
        check_calibration(&self.calibration)
    }
}

/// END: per-slot drop totals; its presence marks the file complete.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct End {
    /// One entry per slot, sorted by slot.
    pub drops: Vec<Drops>,
}

/// One slot's drop total in [`End`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drops {
    /// The slot index.
    pub stream: u32,
    /// Records the slot dropped during the session.
    pub dropped: u64,
}

impl End {
    /// Records dropped over all slots (saturating).
    pub fn total(&self) -> u64 {
        self.drops.iter().fold(0u64, |sum, d| sum.saturating_add(d.dropped))
    }
}

impl FramePayload<'_> for End {
    const KIND: u8 = frame::END;
}

fn check_calibration(cal: &Calibration) -> Result<(), Problem> {
    if cal.ticks == 0 || cal.ns == 0 {
        return Err(Problem::ZeroCalibration);
    }
    Ok(())
}
