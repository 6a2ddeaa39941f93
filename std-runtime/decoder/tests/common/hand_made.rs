//! Trace files made frame by frame for the damage tests (`corruption.rs`): well-formed frames
//! from the grammar's types, and by hand what the grammar would not make (hostile lengths) or
//! has no types for (records, the hot stream).

use waffle::{
    callsite::Kind,
    wire::{
        write_varint, Calibration, CallsiteDesc, Callsites, ChunkHead, DataHead, FieldDesc, FieldType,
        FramePayload, Header, Stream,
    },
};
use waffle_std::frames::FrameWriter;

/// Bytes the grammar would not make (hostile lengths) and records (the hot stream, which has
/// no grammar types): varints, strings and raw bytes, by hand.
#[derive(Default)]
pub struct Bytes(pub Vec<u8>);

impl Bytes {
    pub fn varint(&mut self, v: u64) -> &mut Bytes {
        let mut buf = [0u8; 10];
        let n = write_varint(&mut buf, v);
        self.0.extend_from_slice(&buf[..n]);
        self
    }
    pub fn str(&mut self, s: &str) -> &mut Bytes {
        self.varint(s.len() as u64).bytes(s.as_bytes())
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Bytes {
        self.0.extend_from_slice(b);
        self
    }
}

pub fn header() -> Header {
    Header {
        pid: 1,
        name: "p".into(),
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
    }
}

/// A file made frame by frame: preamble, HEADER, one CALLSITES frame (span `s` with a `str`
/// field, callsite 0), a STREAM frame, then `rest`.
pub fn file(rest: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = FrameWriter::new(Vec::new()).unwrap();
    out.write(&header()).unwrap();
    let s = CallsiteDesc {
        kind: Kind::Span,
        name: "s".into(),
        module: "m".into(),
        file: "f.rs".into(),
        line: 1,
        fields: vec![FieldDesc { name: "text".into(), ty: FieldType::Str }],
        correlate: "".into(),
    };
    out.write(&Callsites { module: 0, first: 0, callsites: vec![s] }).unwrap();
    out.write(&Stream { stream: 0, generation: 1, module: 0, tid: 7, name: "t".into() }).unwrap();
    for (kind, payload) in rest {
        out.frame(*kind, &[payload]).unwrap();
    }
    out.get_mut().clone()
}

/// A chunk of stream 0 (with its length): header fields, then records.
pub fn chunk(first_id: u64, depth: u64, dropped: u64, records: u64, body: &[u8]) -> Vec<u8> {
    let head = ChunkHead { generation: 1, base_ts: 2000, first_id, depth, dropped, records };
    let mut prefix = [0u8; waffle::wire::chunk::MAX_CHUNK_PREFIX_LEN];
    [head.encode(body.len(), &mut prefix), body].concat()
}

/// A DATA payload of stream 0.
pub fn data(chunks: &[Vec<u8>]) -> Vec<u8> {
    [DataHead { stream: 0 }.encode(), chunks.concat()].concat()
}

/// A SPAN_BEGIN of callsite 0 with a string, and a SPAN_END.
#[allow(dead_code)] // not every test that includes this file uses it
pub fn span_records(text: &str) -> Vec<u8> {
    let mut r = Bytes::default();
    r.bytes(&[0x01]).varint(0).varint(2).str(text).bytes(&[0x02]).varint(2);
    r.0
}
