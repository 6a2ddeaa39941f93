//! The cold frames, the frame envelope and the chunk head, byte by byte: each payload of the
//! grammar (`waffle::wire`) encoded and compared to the bytes `docs/wire-format.md` gives,
//! with a comment per byte, then decoded back. Bytes of format version 1 written before the
//! grammar existed are the same (`waffle-decode`'s `tests/compat.rs` reads such a file).

use std::borrow::Cow;
use waffle::{
    callsite::Kind,
    wire::{
        chunk::{take_chunk, ChunkError, MAX_CHUNK_PREFIX_LEN},
        envelope::{check_file_head, encode_frame, file_head, FileHeadError, FrameHead},
        frame, Calibration, CallsiteDesc, Callsites, ChunkHead, Clock, DataHead, Drops, End, FieldDesc,
        FieldType, FrameError, FramePayload, Header, Problem, Stream, TailHead,
    },
};

const CAL: Calibration = Calibration { anchor_ticks: 1000, anchor_unix_ns: 2000, ticks: 3, ns: 1 };

/// Encodes `value`, compares it to `bytes`, decodes `bytes` back and compares to `value`.
fn round_trip<'a, F: FramePayload<'a> + PartialEq + std::fmt::Debug>(value: &F, bytes: &'a [u8]) {
    assert_eq!(value.encode(), bytes, "encoding of {value:?}");
    assert_eq!(&F::decode(bytes).unwrap(), value);
}

#[test]
fn header() {
    let h = Header {
        pid: 300,
        name: "sim".into(),
        host: "n1".into(),
        labels: vec![("rank".into(), "1".into())],
        clock_source: "tsc".into(),
        calibration: CAL,
        salt: 5,
        trace_id: 0x0011_2233_4455_6677_8899_aabb_ccdd_eeff,
        parent: 128,
    };
    #[rustfmt::skip]
    let bytes = [
        0xac, 0x02,                   // pid 300, varint
        0x03, b's', b'i', b'm',       // name "sim": length 3, bytes
        0x02, b'n', b'1',             // host "n1"
        0x01,                         // one label
        0x04, b'r', b'a', b'n', b'k', //   key "rank"
        0x01, b'1',                   //   value "1"
        0x03, b't', b's', b'c',       // clock source "tsc"
        0xe8, 0x07,                   // anchor_ticks 1000
        0xd0, 0x0f,                   // anchor_unix_ns 2000
        0x03,                         // ticks 3
        0x01,                         // ns 1
        0x05,                         // salt 5
        0xff, 0xee, 0xdd, 0xcc,       // trace id: 16 bytes, u128 little-endian
        0xbb, 0xaa, 0x99, 0x88,
        0x77, 0x66, 0x55, 0x44,
        0x33, 0x22, 0x11, 0x00,
        0x80, 0x01,                   // parent span 128 (0 would be none)
    ];
    round_trip(&h, &bytes);
    assert_eq!(h.parent_span(), Some(128));
    assert_eq!(Header { parent: 0, ..h.clone() }.parent_span(), None);
    assert_eq!(h.label("rank"), Some("1"));

    // Invalid UTF-8 is replaced, not refused (as version 1 readers did).
    let mut bad = bytes;
    bad[3] = 0xff;
    assert_eq!(Header::decode(&bad).unwrap().name, "\u{fffd}im");
    // A zero calibration interval is refused.
    let mut zero = bytes;
    zero[25] = 0x00;
    let e = Header::decode(&zero).unwrap_err();
    assert_eq!(e, FrameError { kind: frame::HEADER, at: None, problem: Problem::ZeroCalibration });
    assert_eq!(e.to_string(), "HEADER payload: clock calibration with a zero interval");
    // Cut anywhere, it does not decode, and says where it stopped.
    for n in 0..bytes.len() {
        let e = Header::decode(&bytes[..n]).unwrap_err();
        assert!(matches!(e.problem, Problem::Ends { .. }), "{n}: {e}");
    }
}

fn step() -> CallsiteDesc<'static> {
    CallsiteDesc {
        kind: Kind::Span,
        name: "step".into(),
        module: "m".into(),
        file: "a.rs".into(),
        line: 200,
        fields: vec![
            FieldDesc { name: "i".into(), ty: FieldType::U64 },
            FieldDesc { name: "x".into(), ty: FieldType::Dynamic },
        ],
        correlate: "".into(),
    }
}

#[rustfmt::skip]
const CALLSITES: [u8; 26] = [
    0x00,                         // module 0
    0x04,                         // first id 4
    0x01,                         // one callsite
    0x01,                         //   kind: span
    0x04, b's', b't', b'e', b'p', //   name "step"
    0x01, b'm',                   //   module path "m"
    0x04, b'a', b'.', b'r', b's', //   file "a.rs"
    0xc8, 0x01,                   //   line 200
    0x02,                         //   two fields
    0x01, b'i', 0x01,             //     "i", type u64
    0x01, b'x', 0x00,             //     "x", type dynamic
    0x00,                         //   correlation key ""
];

#[test]
fn callsites() {
    let frame = Callsites { module: 0, first: 4, callsites: vec![step()] };
    round_trip(&frame, &CALLSITES);
    // Decoded strings borrow from the payload.
    let decoded = Callsites::decode(&CALLSITES).unwrap();
    assert!(matches!(decoded.callsites[0].name, Cow::Borrowed("step")));

    // A static callsite borrows its strings to be written.
    static FIELDS: [waffle::callsite::Field; 2] = [
        waffle::callsite::Field::new("i", FieldType::U64),
        waffle::callsite::Field::new("x", FieldType::Dynamic),
    ];
    static CS: waffle::callsite::Callsite =
        waffle::callsite::Callsite::new(Kind::Span, "step", "m", "a.rs", 200, &FIELDS, "");
    assert_eq!(CS.desc(), step());
}

#[test]
fn callsites_keep_what_came_before_a_bad_code() {
    // Two callsites, the second of kind 3.
    let mut bytes = CALLSITES.to_vec();
    bytes[2] = 0x02;
    bytes.extend_from_slice(&CALLSITES[3..]);
    bytes[26] = 0x03;
    let (frame, e) = Callsites::decode_prefix(&bytes);
    assert_eq!(frame.callsites, [step()]);
    let e = e.unwrap();
    assert_eq!((e.at, e.problem), (Some(26), Problem::UnknownKind { callsite: 5, code: 3 }));
    assert_eq!(e.to_string(), "CALLSITES payload at byte 26: callsite 5 has unknown kind 3");
    // A field type code of 6 in the first.
    let mut bytes = CALLSITES.to_vec();
    bytes[21] = 0x06;
    let (frame, e) = Callsites::decode_prefix(&bytes);
    assert!(frame.callsites.is_empty());
    let e = e.unwrap();
    assert_eq!((e.at, e.problem), (Some(21), Problem::UnknownFieldType { callsite: 4, code: 6 }));
}

#[test]
fn stream() {
    let s = Stream { stream: 3, generation: 1, module: 0, tid: 70_000, name: "w".into() };
    #[rustfmt::skip]
    let bytes = [
        0x03,             // stream slot 3
        0x01,             // generation 1
        0x00,             // module 0
        0xf0, 0xa2, 0x04, // tid 70 000 (0x1_1170: 0x70|0x80, 0x22|0x80, 0x04)
        0x01, b'w',       // name "w"
    ];
    round_trip(&s, &bytes);
    // A slot beyond u32 is refused.
    let e = Stream::decode(&[0x80, 0x80, 0x80, 0x80, 0x10, 0x01, 0x00, 0x00, 0x00]).unwrap_err();
    assert_eq!(e.problem, Problem::BadVarint);
}

#[test]
fn clock_end_and_data_head() {
    #[rustfmt::skip]
    let clock = [
        0xe8, 0x07, // anchor_ticks 1000
        0xd0, 0x0f, // anchor_unix_ns 2000
        0x03,       // ticks 3
        0x01,       // ns 1
    ];
    round_trip(&Clock { calibration: CAL }, &clock);
    let e = Clock::decode(&[0xe8, 0x07, 0xd0, 0x0f, 0x00, 0x01]).unwrap_err();
    assert_eq!(e.problem, Problem::ZeroCalibration);

    let end = End { drops: vec![Drops { stream: 0, dropped: 0 }, Drops { stream: 2, dropped: 300 }] };
    #[rustfmt::skip]
    let bytes = [
        0x02,       // two entries
        0x00, 0x00, //   slot 0 dropped 0
        0x02, 0xac, 0x02, //   slot 2 dropped 300
    ];
    round_trip(&end, &bytes);
    assert_eq!(end.total(), 300);
    // A count of 2^40 entries with none present: refused, where the first entry was to be.
    let e = End::decode(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x20]).unwrap_err();
    assert_eq!((e.at, e.problem), (Some(6), Problem::Ends { left: 0 }));

    round_trip(&DataHead { stream: 3 }, &[0x03]); // stream slot 3
    let (head, chunks) = DataHead::split(&[0x03, 0xaa, 0xbb]).unwrap();
    assert_eq!((head, chunks), (DataHead { stream: 3 }, &[0xaa, 0xbb][..]));
}

#[test]
fn chunk_head() {
    let head =
        ChunkHead { generation: 1, base_ts: 1000, first_id: 0x1_0000_0001, depth: 0, dropped: 0, records: 3 };
    let mut out = [0u8; MAX_CHUNK_PREFIX_LEN];
    #[rustfmt::skip]
    let bytes = [
        0x16,                         // body length 22: these 11 bytes of head, 11 of records
        0x01,                         // generation 1
        0xe8, 0x07,                   // base ts 1000
        0x81, 0x80, 0x80, 0x80, 0x10, // first id 0x1_0000_0001 (salt 0, stream 1, counter 1)
        0x00,                         // depth 0
        0x00,                         // dropped 0
        0x03,                         // 3 records
    ];
    assert_eq!(head.encode(11, &mut out), bytes);
    assert_eq!(ChunkHead::decode(&bytes[1..]), Ok((head, 11)));
    // The length prefix, with the records after it and the next chunk after those.
    let mut chunks = bytes.to_vec();
    chunks.extend_from_slice(&[0; 11]);
    chunks.push(0x05);
    let (body, rest) = take_chunk(&chunks).unwrap();
    assert_eq!((body.len(), rest), (22, &[0x05][..]));
    assert_eq!(take_chunk(&[0x05, 0x00]), Err(ChunkError::Body { claimed: 5, left: 1 }));
    assert!(ChunkHead::decode(&[0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0, 0, 0]).is_err(), "generation > u32");
}

#[test]
fn envelope() {
    // The DATA frame of docs/wire-format.md's example: stream 1, one chunk of three records.
    let head =
        ChunkHead { generation: 1, base_ts: 1000, first_id: 0x1_0000_0001, depth: 0, dropped: 0, records: 3 };
    #[rustfmt::skip]
    let records = [
        0x01, 0x04, 0x14, 0xac, 0x02, // SPAN_BEGIN callsite 4, delta +10, n = 300
        0x03, 0x05, 0x1e,             // EVENT callsite 5, delta +15
        0x02, 0x96, 0x01,             // SPAN_END, delta +75
    ];
    let mut prefix = [0u8; MAX_CHUNK_PREFIX_LEN];
    let payload =
        [DataHead { stream: 1 }.encode().as_slice(), head.encode(records.len(), &mut prefix), &records]
            .concat();
    #[rustfmt::skip]
    let frame_bytes = [
        0x04,                   // kind DATA
        0x18, 0x00, 0x00, 0x00, // payload length 24, u32 LE
        0x01,                   // stream 1
        0x16, 0x01, 0xe8, 0x07, 0x81, 0x80, 0x80, 0x80, 0x10, 0x00, 0x00, 0x03, // chunk head
        0x01, 0x04, 0x14, 0xac, 0x02, 0x03, 0x05, 0x1e, 0x02, 0x96, 0x01,       // records
        0x60, 0x7f, 0x58, 0x6d, // CRC-32 0x6d587f60 of the bytes before, u32 LE
    ];
    assert_eq!(encode_frame(frame::DATA, &payload).unwrap(), frame_bytes);
    let head_bytes: [u8; 5] = frame_bytes[..5].try_into().unwrap();
    assert_eq!(FrameHead::decode(head_bytes), Ok(FrameHead { kind: frame::DATA, len: 24 }));
    assert_eq!(FrameHead::decode([0x04, 0x01, 0x00, 0x00, 0x01]), Err(16 << 20 | 1), "over 16 MiB");
    assert_eq!(FrameHead::new(frame::DATA, (16 << 20) + 1), None);

    // The file head: magic, then version 1, u16 LE.
    let file = [0x89, b'W', b'F', b'L', 0x0d, 0x0a, 0x1a, 0x0a, 0x01, 0x00];
    assert_eq!(file_head(), file);
    assert_eq!(check_file_head(&file), Ok(1));
    assert_eq!(check_file_head(&file[..9]), Err(FileHeadError::Truncated(9)));
    assert_eq!(check_file_head(b"\x89WFL\r\n\x1a\n\x02\x00"), Err(FileHeadError::UnknownVersion(2)));
    assert_eq!(check_file_head(b"\x89WFL\r\n\x1a\n\x00\x00"), Err(FileHeadError::UnknownVersion(0)));
    assert_eq!(check_file_head(b"PK\x03\x04"), Err(FileHeadError::NotATrace));
}

#[test]
fn tail() {
    // A TAIL of the example's stream: the thread began the span (n = 300) and blocked before
    // its event, so one record is staged; the head is the one its chunk will have.
    let head =
        ChunkHead { generation: 1, base_ts: 1000, first_id: 0x1_0000_0001, depth: 0, dropped: 0, records: 1 };
    let records = [0x01, 0x04, 0x14, 0xac, 0x02]; // SPAN_BEGIN callsite 4, delta +10, n = 300
    let mut prefix = [0u8; MAX_CHUNK_PREFIX_LEN];
    let payload =
        [TailHead { stream: 1 }.encode().as_slice(), head.encode(records.len(), &mut prefix), &records]
            .concat();
    #[rustfmt::skip]
    let frame_bytes = [
        0x07,                         // kind TAIL
        0x12, 0x00, 0x00, 0x00,       // payload length 18, u32 LE
        0x01,                         // stream 1
        0x10,                         // chunk body length 16
        0x01,                         // generation 1
        0xe8, 0x07,                   // base ts 1 000
        0x81, 0x80, 0x80, 0x80, 0x10, // first id 0x0000_0001_0000_0001
        0x00,                         // depth 0
        0x00,                         // dropped 0
        0x01,                         // 1 record
        0x01, 0x04, 0x14, 0xac, 0x02, // SPAN_BEGIN callsite 4, delta +10, n = 300
        0x83, 0x4b, 0xfa, 0xdd,       // CRC-32 0xddfa4b83 of the bytes before, u32 LE
    ];
    assert_eq!(encode_frame(frame::TAIL, &payload).unwrap(), frame_bytes);
    assert_eq!(frame::name(frame::TAIL), "TAIL");
    // Decoded back: the head, then exactly one chunk.
    let (tail, chunks) = TailHead::split(&frame_bytes[5..5 + 18]).unwrap();
    assert_eq!(tail, TailHead { stream: 1 });
    let (body, rest) = take_chunk(chunks).unwrap();
    assert!(rest.is_empty());
    assert_eq!(ChunkHead::decode(body), Ok((head, 11)));
    assert_eq!(&body[11..], &records);
}
