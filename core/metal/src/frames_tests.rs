//! Every hand-written frame against the grammar's encoding of the same values
//! (`waffle::wire`, postcard), envelope and CRC included.

use super::*;
use std::{borrow::Cow, vec, vec::Vec};
use waffle::{
    callsite::{Callsite, Field, Kind},
    wire::{
        envelope::{encode_frame, file_head as their_file_head},
        Callsites, DataHead, Drops, End, FieldType, FramePayload, Header, Stream,
    },
};

extern crate std;

/// One frame written by hand, as bytes.
fn ours(kind: u8, payload: impl Fn(&mut dyn Out)) -> Vec<u8> {
    let mut bytes = Vec::new();
    frame(&mut |b: &[u8]| bytes.extend_from_slice(b), kind, payload).unwrap();
    bytes
}

fn theirs<'a, P: FramePayload<'a>>(payload: &P) -> Vec<u8> {
    encode_frame(P::KIND, &payload.encode()).unwrap()
}

#[test]
fn file_head_is_the_grammars() {
    let mut bytes = Vec::new();
    file_head(&mut |b: &[u8]| bytes.extend_from_slice(b)).unwrap();
    assert_eq!(bytes, their_file_head());
}

#[test]
fn header_is_the_grammars() {
    let calibration = Calibration {
        anchor_ticks: 0,
        anchor_unix_ns: 1_700_000_000_000_000_000,
        ticks: 25_000_000,
        ns: 1_000_000_000,
    };
    let fields = HeaderFields {
        name: "qemu-filter",
        host: "mps2-an386",
        calibration,
        salt: 0x12345,
        trace_id: 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10,
    };
    let header = Header {
        pid: 0,
        name: "qemu-filter".into(),
        host: "mps2-an386".into(),
        labels: vec![],
        clock_source: waffle::clock::SOURCE.into(),
        calibration,
        salt: 0x12345,
        trace_id: fields.trace_id,
        parent: 0,
    };
    assert_eq!(ours(frame::HEADER, |out| header_payload(&fields, out)), theirs(&header));
}

fn header_payload(h: &HeaderFields<'_>, out: &mut dyn Out) {
    header(h, out)
}

static FIELDS: [Field; 3] = [
    Field::new("gain", FieldType::I64),
    Field::new("name", FieldType::Str),
    Field::new("any", FieldType::Dynamic),
];
static SITES: [Callsite; 2] = [
    Callsite::new(Kind::Span, "filter", "firmware::dsp", "src/main.rs", 40, &FIELDS, ""),
    Callsite::new(Kind::Event, "sample", "firmware", "src/main.rs", 300, &[], "tick>"),
];

#[test]
fn callsites_are_the_grammars() {
    let desc = Callsites { module: 0, first: 7, callsites: SITES.iter().map(Callsite::desc).collect() };
    assert_eq!(ours(frame::CALLSITES, |out| callsites(7, &SITES, out)), theirs(&desc));
    let empty = Callsites { module: 0, first: 0, callsites: vec![] };
    assert_eq!(ours(frame::CALLSITES, |out| callsites(0, &[], out)), theirs(&empty));
}

#[test]
fn stream_is_the_grammars() {
    let s = Stream { stream: 300, generation: 2, module: 0, tid: 300, name: Cow::Borrowed("SysTick") };
    assert_eq!(ours(frame::STREAM, |out| stream(300, 2, "SysTick", out)), theirs(&s));
}

#[test]
fn data_head_is_the_grammars() {
    let chunks = [0x16u8, 1, 2, 3, 4, 5];
    let mut payload = DataHead { stream: 129 }.encode();
    payload.extend_from_slice(&chunks);
    assert_eq!(
        ours(frame::DATA, |out| data(129, &chunks, out)),
        encode_frame(frame::DATA, &payload).unwrap()
    );
}

#[test]
fn end_is_the_grammars() {
    let drops = [(0, 0), (1, 1 << 40), (200, 5)];
    let e = End { drops: drops.iter().map(|&(stream, dropped)| Drops { stream, dropped }).collect() };
    assert_eq!(ours(frame::END, |out| end(&drops, out)), theirs(&e));
}

#[test]
fn a_failing_sink_stops_the_frame_with_its_error() {
    struct Full(usize);
    impl Output for Full {
        type Error = usize;
        fn write(&mut self, bytes: &[u8]) -> Result<(), usize> {
            self.0 += bytes.len();
            if self.0 > 8 {
                Err(self.0)
            } else {
                Ok(())
            }
        }
    }
    let mut output = Full(0);
    assert_eq!(frame(&mut output, frame::STREAM, |out| stream(1, 1, "main-loop", out)), Err(9));
}
