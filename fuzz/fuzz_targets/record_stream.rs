//! Bytes as the records of one stream: a minimal valid file (header, a string table with
//! callsites of every field type, a STREAM frame) around two DATA frames, one with the bytes as
//! a single chunk's body and one with the bytes as the frame's chunk list, then END. Decoding
//! never panics, and damage in the data costs only that data: the END frame is still read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use waffle::wire::{frame, FieldType};
use waffle_std::frames::{FrameWriter, Payload};

/// Kind, name, fields and correlation key of a callsite.
type Site<'a> = (u8, &'a str, &'a [(&'a str, FieldType)], &'a str);

/// Callsites 0..: a span without fields, a span and an event with one field of each type, and
/// an event with dynamically typed fields.
fn callsites(p: &mut Payload) {
    let all_types = [
        ("u", FieldType::U64),
        ("i", FieldType::I64),
        ("f", FieldType::F64),
        ("b", FieldType::Bool),
        ("s", FieldType::Str),
    ];
    let sites: [Site<'_>; 4] = [
        (1, "plain", &[], ""),
        (1, "typed", &all_types, "key"),
        (2, "mark", &all_types, ""),
        (2, "dyn", &[("x", FieldType::Dynamic), ("y", FieldType::Dynamic)], "corr"),
    ];
    p.varint(0).varint(0).varint(sites.len() as u64);
    for (kind, name, fields, corr) in sites {
        p.byte(kind).str(name).str("fuzz").str("record_stream.rs").varint(1);
        p.varint(fields.len() as u64);
        for (f, ty) in fields {
            p.str(f).byte(*ty as u8);
        }
        p.str(corr);
    }
}

fn file(body: &[u8]) -> Vec<u8> {
    let mut out = FrameWriter::new(Vec::new()).unwrap();
    let mut h = Payload::new();
    h.varint(1).str("fuzz").str("host").varint(0).str("tsc");
    h.varint(1000).varint(1_700_000_000_000_000_000).varint(3).varint(1).varint(0);
    h.bytes(&1u128.to_le_bytes()).varint(0);
    out.frame(frame::HEADER, &[&h.0]).unwrap();
    let mut c = Payload::new();
    callsites(&mut c);
    out.frame(frame::CALLSITES, &[&c.0]).unwrap();
    let mut s = Payload::new();
    s.varint(0).varint(1).varint(0).varint(7).str("t");
    out.frame(frame::STREAM, &[&s.0]).unwrap();
    // The bytes as one chunk's body (generation, base ts, first id, depth, dropped, records...).
    let mut d = Payload::new();
    d.varint(0).varint(body.len() as u64);
    out.frame(frame::DATA, &[&d.0, body]).unwrap();
    // The bytes as a frame's chunk list (body length, body, body length, ...).
    out.frame(frame::DATA, &[&[0u8], body]).unwrap();
    out.frame(frame::END, &[&[0u8]]).unwrap();
    out.get_mut().clone()
}

fuzz_target!(|body: &[u8]| {
    if body.len() > waffle::wire::MAX_FRAME_PAYLOAD as usize - 16 {
        return;
    }
    let bytes = file(body);
    let (process, _warnings) = waffle_decode::decode::decode_reader(&bytes[..], Path::new("fuzz.bin"))
        .expect("the frame around is valid");
    assert!(process.complete, "the END frame after the damaged data is still read");
});
