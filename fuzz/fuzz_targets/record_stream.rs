//! Bytes as the records of one stream: a minimal valid file (header, a string table with
//! callsites of every field type, a STREAM frame) around two DATA frames, one with the bytes as
//! a single chunk's body and one with the bytes as the frame's chunk list, each after a TAIL
//! frame with the bytes as its chunk (the first superseded by the DATA chunk with the same head,
//! the second decoded at END), then END. Decoding never panics, and damage in the data costs
//! only that data: the END frame is still read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::{path::Path, sync::OnceLock};
use waffle::{
    callsite::Kind,
    wire::{
        frame, Calibration, CallsiteDesc, Callsites, DataHead, End, FieldDesc, FieldType, FramePayload, Header,
        Stream, TailHead,
    },
};
use waffle_std::frames::FrameWriter;

/// Callsites 0..: a span without fields, a span and an event with one field of each type, and
/// an event with dynamically typed fields.
fn callsites() -> Callsites<'static> {
    let all_types = [
        ("u", FieldType::U64),
        ("i", FieldType::I64),
        ("f", FieldType::F64),
        ("b", FieldType::Bool),
        ("s", FieldType::Str),
    ];
    let sites: [(Kind, &str, &[(&str, FieldType)], &str); 4] = [
        (Kind::Span, "plain", &[], ""),
        (Kind::Span, "typed", &all_types, "key"),
        (Kind::Event, "mark", &all_types, ""),
        (Kind::Event, "dyn", &[("x", FieldType::Dynamic), ("y", FieldType::Dynamic)], "corr"),
    ];
    let callsites = sites
        .into_iter()
        .map(|(kind, name, fields, corr)| CallsiteDesc {
            kind,
            name: name.to_owned().into(),
            module: "fuzz".into(),
            file: "record_stream.rs".into(),
            line: 1,
            fields: fields.iter().map(|&(f, ty)| FieldDesc { name: f.to_owned().into(), ty }).collect(),
            correlate: corr.to_owned().into(),
        })
        .collect();
    Callsites { module: 0, first: 0, callsites }
}

/// The file up to its first frame of data: the header, the callsites and the stream. The same
/// for every input, so made once.
fn prefix() -> &'static [u8] {
    static PREFIX: OnceLock<Vec<u8>> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let mut out = FrameWriter::new(Vec::new()).unwrap();
        out.write(&Header {
            pid: 1,
            name: "fuzz".into(),
            host: "host".into(),
            clock_source: "tsc".into(),
            calibration: Calibration {
                anchor_ticks: 1000,
                anchor_unix_ns: 1_700_000_000_000_000_000,
                ticks: 3,
                ns: 1,
            },
            trace_id: 1,
            ..Header::default()
        })
        .unwrap();
        out.write(&callsites()).unwrap();
        out.write(&Stream { stream: 0, generation: 1, module: 0, tid: 7, name: "t".into() }).unwrap();
        std::mem::take(out.get_mut())
    })
}

fn file(body: &[u8]) -> Vec<u8> {
    let mut out = FrameWriter::new(prefix().to_vec()).unwrap();
    // `new` wrote a second file head after the prefix: frames follow from where it began.
    out.get_mut().truncate(prefix().len());
    // The bytes as one chunk's body (generation, base ts, first id, depth, dropped, records...):
    // a body length, then the bytes.
    let mut len = [0u8; waffle::wire::MAX_VARINT_LEN];
    let n = waffle::wire::write_varint(&mut len, body.len() as u64);
    let tail = TailHead { stream: 0 }.encode();
    out.frame(frame::TAIL, &[&tail, &len[..n], body]).unwrap();
    out.data(DataHead { stream: 0 }, &[&len[..n], body].concat()).unwrap();
    // The bytes as a frame's chunk list (body length, body, body length, ...).
    out.frame(frame::TAIL, &[&tail, &len[..n], body]).unwrap();
    out.data(DataHead { stream: 0 }, body).unwrap();
    out.write(&End::default()).unwrap();
    std::mem::take(out.get_mut())
}

waffle_fuzz::limit_allocations!();

fuzz_target!(|body: &[u8]| {
    if body.len() > waffle::wire::MAX_FRAME_PAYLOAD as usize - 16 {
        return;
    }
    let bytes = file(body);
    let (process, _warnings) = waffle_read::decode::decode_reader(&bytes[..], Path::new("fuzz.bin"))
        .expect("the frame around is valid");
    assert!(process.complete, "the END frame after the damaged data is still read");
});
