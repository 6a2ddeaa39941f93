//! Byte-level tests of the wire format: what the encoder writes for each field type, and the
//! exact bytes of data chunks produced by real `span!`/`event!` calls through a test runtime.
//!
//! Timestamps are real clock ticks, so the chunk comparisons treat them as "any varint" (they
//! are parsed, bounded by clock reads taken around the recording, and checked for continuity)
//! and compare every other byte exactly. A change here is a change of the format: update
//! `docs/wire-format.md` and `wire::FORMAT_VERSION` with it.
//!
//! Over 400 lines because it is a table: one byte-commented expectation per record kind and
//! field type, each a few lines, read side by side with the spec. The frame payloads, a
//! different table, are in `frames.rs`.

use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard};

use waffle::callsite::{self, Field, Kind};
use waffle::encode::{FieldValue, Writer};
use waffle::queue::StreamSlot;
use waffle::runtime::{self, Hooks};
use waffle::wire::{self, tag, FieldType};

// ---------------------------------------------------------------------------------------------
// Field values and the format's constants, without a runtime.
// ---------------------------------------------------------------------------------------------

/// Encodes with `f` into a fresh buffer and returns the bytes written.
fn written(f: impl FnOnce(&mut Writer<'_>)) -> Vec<u8> {
    let mut buf = [0u8; 64];
    let mut w = Writer::new(&mut buf, 0);
    f(&mut w);
    assert!(!w.overflowed());
    let n = w.pos();
    buf[..n].to_vec()
}

#[test]
fn format_constants() {
    assert_eq!(
        wire::MAGIC,
        [
            0x89, // high bit set: not ASCII text
            b'W', b'F', b'L', //
            0x0d, 0x0a, // CR LF: mangled by text-mode transfers
            0x1a, // ^Z: stops `type` on Windows
            0x0a, // LF
        ]
    );
    assert_eq!(wire::FORMAT_VERSION, 1);
    assert_eq!((tag::SPAN_BEGIN, tag::SPAN_END, tag::EVENT), (0x01, 0x02, 0x03));
    let codes = [
        (FieldType::Dynamic, 0),
        (FieldType::U64, 1),
        (FieldType::I64, 2),
        (FieldType::F64, 3),
        (FieldType::Bool, 4),
        (FieldType::Str, 5),
    ];
    for (ty, code) in codes {
        assert_eq!(ty as u8, code);
        assert_eq!(FieldType::from_code(code), Some(ty));
    }
    assert_eq!(FieldType::from_code(6), None);
}

#[test]
fn varints_are_leb128() {
    let cases: &[(u64, &[u8])] = &[
        (0, &[0x00]),
        (127, &[0x7f]),
        (128, &[0x80, 0x01]), // low 7 bits 0 + continuation, then 1
        (300, &[0xac, 0x02]), // 300 = 0b10_0101100: 0x2c | 0x80, then 0b10
        (16_384, &[0x80, 0x80, 0x01]),
        (
            u64::MAX,
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], // 9 × 7 bits + 1
        ),
    ];
    for &(v, bytes) in cases {
        assert_eq!(written(|w| w.varint(v)), bytes, "{v}");
        let mut buf = [0u8; wire::MAX_VARINT_LEN];
        let n = wire::write_varint(&mut buf, v);
        assert_eq!(&buf[..n], bytes, "{v}");
        assert_eq!(wire::read_varint(bytes), Ok((v, bytes.len())));
    }
    // Zigzag: 0, -1, 1, -2, 2 ... map to 0, 1, 2, 3, 4 ...
    for (v, z) in [(0i64, 0u64), (-1, 1), (1, 2), (-2, 3), (2, 4), (i64::MAX, u64::MAX - 1)] {
        assert_eq!(wire::zigzag(v), z);
        assert_eq!(wire::unzigzag(z), v);
    }
}

#[test]
fn field_values_are_byte_exact() {
    // Unsigned integers: varint.
    assert_eq!(written(|w| 7u8.encode(w)), [0x07]);
    assert_eq!(written(|w| 300u16.encode(w)), [0xac, 0x02]);
    assert_eq!(written(|w| 300usize.encode(w)), [0xac, 0x02]);
    assert_eq!(written(|w| (1u64 << 32).encode(w)), [0x80, 0x80, 0x80, 0x80, 0x10]);
    // Signed integers: zigzag varint.
    assert_eq!(written(|w| (-1i8).encode(w)), [0x01]);
    assert_eq!(written(|w| (-2i32).encode(w)), [0x03]);
    assert_eq!(written(|w| 64i64.encode(w)), [0x80, 0x01]); // zigzag(64) = 128
    assert_eq!(written(|w| i64::MIN.encode(w)), written(|w| w.varint(u64::MAX)));
    // Floats: f64, little-endian; f32 widened.
    assert_eq!(
        written(|w| 1.5f64.encode(w)),
        [
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // mantissa: .1 binary, rest zero
            0xf8, // low exponent bits, top 4 mantissa bits (1000)
            0x3f, // sign 0, exponent 0x3ff (bias: 2^0)
        ]
    );
    assert_eq!(written(|w| 1.5f32.encode(w)), written(|w| 1.5f64.encode(w)));
    assert_eq!(written(|w| (-0.0f64).encode(w)), [0, 0, 0, 0, 0, 0, 0, 0x80]); // sign bit only
                                                                               // Bool: one byte.
    assert_eq!(written(|w| true.encode(w)), [0x01]);
    assert_eq!(written(|w| false.encode(w)), [0x00]);
    // Strings: varint byte length, then UTF-8.
    assert_eq!(
        written(|w| "hé".encode(w)),
        [
            0x03, // 3 bytes
            b'h', //
            0xc3, 0xa9, // 'é'
        ]
    );
    assert_eq!(written(|w| String::from("ab").encode(w)), [0x02, b'a', b'b']);
    assert_eq!(written(|w| "".encode(w)), [0x00]);
    // References encode as what they point to.
    assert_eq!(written(|w| (&&300u64).encode(w)), [0xac, 0x02]);
    // Dynamic fields: the type code, then the value.
    assert_eq!(written(|w| 300u32.encode_dynamic(w)), [0x01, 0xac, 0x02]); // U64, 300
    assert_eq!(written(|w| (-2i16).encode_dynamic(w)), [0x02, 0x03]); // I64, zigzag(-2)
    assert_eq!(written(|w| 2.0f64.encode_dynamic(w)), [0x03, 0, 0, 0, 0, 0, 0, 0, 0x40]); // F64
    assert_eq!(written(|w| true.encode_dynamic(w)), [0x04, 0x01]); // Bool, true
    assert_eq!(written(|w| "ab".encode_dynamic(w)), [0x05, 0x02, b'a', b'b']); // Str, len 2
    assert_eq!(<&str as FieldValue>::TYPE, FieldType::Str);
}

#[test]
fn writer_counts_what_does_not_fit() {
    let mut buf = [0u8; 4];
    let mut w = Writer::new(&mut buf, 1);
    w.byte(0xaa);
    w.varint(300);
    assert!(!w.overflowed());
    assert_eq!(w.pos(), 4);
    w.bytes(b"xyz"); // does not fit: nothing written, position still advances
    assert!(w.overflowed());
    assert_eq!(w.pos(), 7);
    w.byte(0xbb);
    assert_eq!(w.pos(), 8);
    assert_eq!(buf, [0x00, 0xaa, 0xac, 0x02]);
}

// ---------------------------------------------------------------------------------------------
// A test runtime: one leaked slot per recording thread.
// ---------------------------------------------------------------------------------------------

/// The runtime state is global: tests that install hooks run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());
/// The slot the next thread to record is given.
static PENDING: Mutex<Option<&'static StreamSlot>> = Mutex::new(None);

fn acquire() -> Option<&'static StreamSlot> {
    let slot = PENDING.lock().unwrap().take()?;
    assert_eq!(slot.try_claim(), Some(1), "a fresh slot's first owner is generation 1");
    Some(slot)
}

fn release(slot: &'static StreamSlot) {
    assert!(!slot.is_owned(), "slots come back unclaimed");
}

static HOOKS: Hooks = Hooks { acquire, release };

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn leak(len: usize) -> NonNull<[u8]> {
    NonNull::from(Box::leak(vec![0u8; len].into_boxed_slice()))
}

/// First id of the test stream: stream 1 of salt 0, `1 << 32 | 1`, a 5-byte varint.
const FIRST_ID: u64 = waffle::ids::stream_id_base(0, 1);
const FIRST_ID_VARINT: [u8; 5] = [
    0x81, // bits 0..7: 1, continuation
    0x80, // bits 7..14: 0
    0x80, // bits 14..21: 0
    0x80, // bits 21..28: 0
    0x10, // bits 28..35: 0b1_0000 (bit 32)
];

fn new_slot(queue: usize, staging: usize) -> &'static StreamSlot {
    // SAFETY: two distinct leaked allocations, used by nothing but this slot, forever.
    let slot = unsafe { StreamSlot::new(leak(queue), leak(staging), 1, FIRST_ID) };
    Box::leak(Box::new(slot))
}

/// Runs `f` on a new thread in a new session whose only slot is `slot`, and waits for the
/// thread to exit (which gives the slot back).
fn record_on_thread<R: Send + 'static>(
    slot: &'static StreamSlot,
    f: impl FnOnce() -> R + Send + 'static,
) -> R {
    // Chunks are pushed only when full or flushed, never because time passed, so that their
    // boundaries do not depend on scheduling.
    waffle::local::set_flush_ticks(u64::MAX);
    *PENDING.lock().unwrap() = Some(slot);
    let epoch = runtime::install(&HOOKS);
    let r = std::thread::spawn(f).join();
    runtime::uninstall(epoch);
    let r = r.unwrap_or_else(|e| std::panic::resume_unwind(e));
    assert!(PENDING.lock().unwrap().is_none(), "the thread never asked for its slot");
    assert!(!slot.is_owned(), "the thread gave its slot back when it exited");
    r
}

/// Everything in the queue, split into chunks (each with its length prefix).
fn drain_chunks(slot: &StreamSlot) -> Vec<Vec<u8>> {
    let mut bytes = Vec::new();
    while slot.drain_with(|b| bytes.extend_from_slice(b)) > 0 {}
    let mut chunks = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let (len, n) = wire::read_varint(rest).expect("chunk length");
        let end = n + len as usize;
        assert!(end <= rest.len(), "chunk of {len} bytes runs past the queue's contents");
        chunks.push(rest[..end].to_vec());
        rest = &rest[end..];
    }
    chunks
}

/// The id of the callsite named `name` (its index in `callsite::all()`).
fn callsite_id(name: &str) -> u64 {
    let mut ids = callsite::all().iter().enumerate().filter(|(_, c)| c.name == name);
    let (id, _) = ids.next().unwrap_or_else(|| panic!("no callsite `{name}`"));
    assert!(ids.next().is_none(), "two callsites named `{name}`");
    id as u64
}

/// One element of an expected chunk.
#[derive(Clone, Copy, Debug)]
enum Tok<'a> {
    /// These bytes exactly.
    B(&'a [u8]),
    /// This value as a varint.
    V(u64),
    /// A varint equal to the number of bytes that follow it (the chunk length).
    Len,
    /// Any varint: a timestamp (base or zigzag delta), returned by `check`.
    Ts,
}
use Tok::{Len, Ts, B, V};

/// Compares `chunk` with `expected` and returns the timestamp varints in order.
fn check(chunk: &[u8], expected: &[Tok<'_>]) -> Vec<u64> {
    let mut pos = 0;
    let mut stamps = Vec::new();
    for (i, tok) in expected.iter().enumerate() {
        let rest = &chunk[pos..];
        let ctx = || format!("token {i} ({tok:?}) at byte {pos} of {chunk:02x?}");
        match *tok {
            B(bytes) => {
                assert!(rest.starts_with(bytes), "{}: expected {bytes:02x?}", ctx());
                pos += bytes.len();
            }
            V(v) => {
                let (got, n) = wire::read_varint(rest).unwrap_or_else(|e| panic!("{}: {e:?}", ctx()));
                assert_eq!(got, v, "{}", ctx());
                pos += n;
            }
            Len => {
                let (got, n) = wire::read_varint(rest).unwrap_or_else(|e| panic!("{}: {e:?}", ctx()));
                assert_eq!(got as usize, rest.len() - n, "{}: length prefix", ctx());
                pos += n;
            }
            Ts => {
                let (got, n) = wire::read_varint(rest).unwrap_or_else(|e| panic!("{}: {e:?}", ctx()));
                stamps.push(got);
                pos += n;
            }
        }
    }
    assert_eq!(pos, chunk.len(), "trailing bytes after the expected ones: {:02x?}", &chunk[pos..]);
    stamps
}

/// Turns a chunk's timestamp varints (base, then zigzag deltas) into absolute timestamps and
/// checks that they lie within `[t0, t1]`, in order. Returns the record timestamps.
fn absolute(stamps: &[u64], t0: u64, t1: u64) -> Vec<u64> {
    let mut ts = stamps[0];
    assert!(t0 <= ts && ts <= t1, "base {ts} outside [{t0}, {t1}]");
    let mut out = Vec::new();
    for &d in &stamps[1..] {
        let delta = wire::unzigzag(d);
        assert!(delta >= 0, "time went back by {delta} ticks");
        ts = ts.wrapping_add(delta as u64);
        assert!(ts <= t1, "timestamp {ts} after the last clock read {t1}");
        out.push(ts);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Data chunks from real records.
// ---------------------------------------------------------------------------------------------

#[test]
fn spans_and_events_make_byte_exact_chunks() {
    let _serial = serial();
    let slot = new_slot(4096, 1024);
    let (ids, t0, t1) = record_on_thread(slot, || {
        let t0 = waffle::clock::now();
        let count = 5u64; // untyped (a variable): dynamic fields
        let delta = -3i64;
        let scale = 0.25f64;
        let flag = false;
        let label = String::from("ab");
        let outer = waffle::span!("enc_outer", n = 300u64, neg = -2i32, ratio = 1.5, ok = true, name = "hé",);
        let ev: waffle::EventId = waffle::event!("enc_event");
        let inner = waffle::span!("enc_inner", count, delta, scale, flag, "q key" = label);
        let ids = [outer.id().to_u64(), ev.to_u64(), inner.id().to_u64()];
        drop(inner);
        drop(outer);
        waffle::flush();
        (ids, t0, waffle::clock::now())
    });

    // Ids count from the slot's first id, one per span begin or event.
    assert_eq!(ids, [FIRST_ID, FIRST_ID + 1, FIRST_ID + 2]);

    let outer = callsite_id("enc_outer");
    let event = callsite_id("enc_event");
    let inner = callsite_id("enc_inner");
    let chunks = drain_chunks(slot);
    assert_eq!(chunks.len(), 1, "{chunks:02x?}");
    #[rustfmt::skip]
    let stamps = check(&chunks[0], &[
        Len,                     // body length
        // Header.
        B(&[0x01]),              // owner generation 1
        Ts,                      // base timestamp
        B(&FIRST_ID_VARINT),     // first id
        B(&[0x00]),              // open-span depth
        B(&[0x00]),              // records dropped before this chunk
        B(&[0x05]),              // records in this chunk
        // span!("enc_outer", ...)
        B(&[0x01]),              // SPAN_BEGIN
        V(outer),                // callsite id
        Ts,                      // zigzag timestamp delta
        B(&[0xac, 0x02]),        // n = 300u64: U64 varint
        B(&[0x03]),              // neg = -2i32: I64, zigzag(-2)
        B(&[0, 0, 0, 0, 0, 0, 0xf8, 0x3f]), // ratio = 1.5: F64 LE
        B(&[0x01]),              // ok = true: Bool
        B(&[0x03, b'h', 0xc3, 0xa9]), // name = "hé": Str, 3 bytes of UTF-8
        // event!("enc_event")
        B(&[0x03]),              // EVENT
        V(event),                // callsite id
        Ts,                      // delta
        // span!("enc_inner", ...): fields whose type the macro cannot see lead with it
        B(&[0x01]),              // SPAN_BEGIN
        V(inner),                // callsite id
        Ts,                      // delta
        B(&[0x01, 0x05]),        // count: U64, 5
        B(&[0x02, 0x05]),        // delta: I64, zigzag(-3)
        B(&[0x03, 0, 0, 0, 0, 0, 0, 0xd0, 0x3f]), // scale: F64, 0.25 LE
        B(&[0x04, 0x00]),        // flag: Bool, false
        B(&[0x05, 0x02, b'a', b'b']), // "q key": Str, 2 bytes
        // drop(inner), drop(outer)
        B(&[0x02]),              // SPAN_END
        Ts,                      // delta
        B(&[0x02]),              // SPAN_END
        Ts,                      // delta
    ]);
    let times = absolute(&stamps, t0, t1);
    assert_eq!(times.len(), 5);

    // The callsites describe the same schema.
    let all = callsite::all();
    let o = &all[outer as usize];
    assert_eq!((o.kind, o.module), (Kind::Span, module_path!()));
    assert!(o.file.ends_with("encode.rs"), "{}", o.file);
    assert_eq!(
        o.fields,
        [
            Field::new("n", FieldType::U64),
            Field::new("neg", FieldType::I64),
            Field::new("ratio", FieldType::F64),
            Field::new("ok", FieldType::Bool),
            Field::new("name", FieldType::Str),
        ]
    );
    assert_eq!((all[event as usize].kind, all[event as usize].fields), (Kind::Event, &[][..]));
    let names: Vec<_> = all[inner as usize].fields.iter().map(|f| (f.name, f.ty)).collect();
    assert_eq!(
        names,
        [
            ("count", FieldType::Dynamic),
            ("delta", FieldType::Dynamic),
            ("scale", FieldType::Dynamic),
            ("flag", FieldType::Dynamic),
            ("q key", FieldType::Dynamic),
        ]
    );
}

#[test]
fn each_chunk_carries_the_ids_and_depth_it_starts_with() {
    let _serial = serial();
    let slot = new_slot(4096, 1024);
    let (ids, t0, t1) = record_on_thread(slot, || {
        let t0 = waffle::clock::now();
        let outer = waffle::span!("hdr_outer");
        waffle::flush();
        let ev = waffle::event!("hdr_event", k = 1u8);
        waffle::flush();
        waffle::flush(); // nothing staged: no chunk
        let id = outer.id().to_u64();
        drop(outer);
        waffle::flush();
        ([id, ev.to_u64()], t0, waffle::clock::now())
    });
    assert_eq!(ids, [FIRST_ID, FIRST_ID + 1]);
    let chunks = drain_chunks(slot);
    assert_eq!(chunks.len(), 3, "{chunks:02x?}");
    #[rustfmt::skip]
    let first = check(&chunks[0], &[
        Len,
        B(&[0x01]),              // generation
        Ts,                      // base
        B(&FIRST_ID_VARINT),     // first id
        B(&[0x00]),              // depth
        B(&[0x00]),              // dropped
        B(&[0x01]),              // one record
        B(&[0x01]), V(callsite_id("hdr_outer")), Ts, // SPAN_BEGIN, callsite, delta
    ]);
    #[rustfmt::skip]
    let second = check(&chunks[1], &[
        Len,
        B(&[0x01]),              // generation
        Ts,                      // base
        V(FIRST_ID + 1),         // first id: the span took one
        B(&[0x01]),              // depth: inside hdr_outer
        B(&[0x00]),              // dropped
        B(&[0x01]),              // one record
        B(&[0x03]), V(callsite_id("hdr_event")), Ts, // EVENT, callsite, delta
        B(&[0x01]),              // k = 1u8: U64
    ]);
    #[rustfmt::skip]
    let third = check(&chunks[2], &[
        Len,
        B(&[0x01]),              // generation
        Ts,                      // base
        V(FIRST_ID + 2),         // first id
        B(&[0x01]),              // depth: the end closes hdr_outer
        B(&[0x00]),              // dropped
        B(&[0x01]),              // one record
        B(&[0x02]), Ts,          // SPAN_END, delta
    ]);
    // Each chunk's base is the previous record's timestamp, so chunks decode on their own.
    let t_first = absolute(&first, t0, t1);
    let t_second = absolute(&second, t0, t1);
    let t_third = absolute(&third, t0, t1);
    assert_eq!(second[0], t_first[0]);
    assert_eq!(third[0], t_second[0]);
    assert!(t_third[0] >= t_second[0]);
}

#[test]
fn a_record_larger_than_the_staging_area_is_dropped_and_counted() {
    let _serial = serial();
    let slot = new_slot(4096, 64);
    let (ids, t0, t1) = record_on_thread(slot, || {
        let t0 = waffle::clock::now();
        let long = "x".repeat(1000);
        let outer = waffle::span!("big_outer");
        let big = waffle::event!("big_event", s = long.as_str());
        assert_eq!(slot.dropped(), 1);
        let after = waffle::event!("big_after", k = 1u8);
        let id = outer.id().to_u64();
        drop(outer);
        waffle::flush();
        ([id, big.to_u64(), after.to_u64()], t0, waffle::clock::now())
    });
    // The dropped event still took its id, so later ids match what the decoder counts.
    assert_eq!(ids, [FIRST_ID, FIRST_ID + 1, FIRST_ID + 2]);
    assert_eq!(slot.dropped(), 1);
    let chunks = drain_chunks(slot);
    assert_eq!(chunks.len(), 2, "{chunks:02x?}");
    // The staged span begin was pushed before the big record was tried in an empty area.
    #[rustfmt::skip]
    let first = check(&chunks[0], &[
        Len,
        B(&[0x01]),              // generation
        Ts,                      // base
        B(&FIRST_ID_VARINT),     // first id
        B(&[0x00]),              // depth
        B(&[0x00]),              // dropped
        B(&[0x01]),              // one record
        B(&[0x01]), V(callsite_id("big_outer")), Ts, // SPAN_BEGIN, callsite, delta
    ]);
    #[rustfmt::skip]
    let second = check(&chunks[1], &[
        Len,
        B(&[0x01]),              // generation
        Ts,                      // base: the dropped record's timestamp
        V(FIRST_ID + 2),         // first id: after the dropped event's
        B(&[0x01]),              // depth: inside big_outer
        B(&[0x01]),              // one record dropped before this chunk
        B(&[0x02]),              // two records
        B(&[0x03]), V(callsite_id("big_after")), Ts, // EVENT, callsite, delta
        B(&[0x01]),              // k = 1u8
        B(&[0x02]), Ts,          // SPAN_END of big_outer, delta
    ]);
    let t_first = absolute(&first, t0, t1);
    absolute(&second, t0, t1);
    assert!(second[0] >= t_first[0]);
}

#[test]
fn a_full_queue_drops_whole_chunks_without_blocking() {
    let _serial = serial();
    let slot = new_slot(64, 1024);
    assert_eq!(slot.capacity(), 64);
    let chunks = record_on_thread(slot, move || {
        let mut chunks = Vec::new();
        // A chunk larger than the whole queue: both records are dropped.
        let pad = "y".repeat(100);
        let s = waffle::span!("q_big", pad = pad.as_str());
        drop(s);
        waffle::flush();
        assert_eq!(slot.dropped(), 2);
        assert!(drain_chunks(slot).is_empty());

        // The next chunk that fits says how many records were lost before it.
        waffle::event!("q_small");
        waffle::flush();
        let got = drain_chunks(slot);
        assert_eq!(got.len(), 1);
        chunks.extend(got);

        // Fill the queue without draining: pushes fail, the producer carries on.
        for _ in 0..8 {
            waffle::event!("q_fill");
            waffle::flush();
        }
        let got = drain_chunks(slot);
        let lost = slot.dropped() - 2;
        assert!(lost >= 1, "eight chunks of 20+ bytes cannot all fit in 64");
        assert_eq!(got.len() as u64 + lost, 8);
        chunks.extend(got);

        // After draining, the first chunk pushed accounts for what was lost since the last one.
        waffle::event!("q_after");
        waffle::flush();
        chunks.extend(drain_chunks(slot));
        chunks
    });
    #[rustfmt::skip]
    check(&chunks[0], &[
        Len,
        B(&[0x01]),              // generation
        Ts,                      // base
        V(FIRST_ID + 1),         // first id: the dropped span took FIRST_ID
        B(&[0x00]),              // depth: the dropped span has ended
        B(&[0x02]),              // its begin and end were dropped
        B(&[0x01]),              // one record
        B(&[0x03]), V(callsite_id("q_small")), Ts, // EVENT, callsite, delta
    ]);
    // Every chunk is whole, and the dropped counts in the headers add up to the slot's total.
    let fill = callsite_id("q_fill");
    let mut dropped_in_headers = 0;
    let mut next_id = FIRST_ID + 2;
    for chunk in &chunks[1..] {
        let header = parse_chunk(chunk);
        dropped_in_headers += header.dropped;
        // Lost chunks each held one event: the first id skips exactly those.
        assert_eq!(header.first_id, next_id + header.dropped);
        next_id = header.first_id + 1;
        assert_eq!((header.depth, header.records.len()), (0, 1));
        let (tag, callsite, _) = header.records[0];
        assert_eq!(tag, tag::EVENT);
        assert!(callsite == fill || callsite == callsite_id("q_after"));
    }
    assert_eq!(2 + dropped_in_headers, slot.dropped());
    let last = parse_chunk(chunks.last().unwrap());
    assert_eq!(last.records[0].1, callsite_id("q_after"));
}

// ---------------------------------------------------------------------------------------------
// A small decoder, to check that chunk boundaries falling anywhere keep ids and depth exact.
// ---------------------------------------------------------------------------------------------

struct Chunk {
    generation: u64,
    base: u64,
    first_id: u64,
    depth: u64,
    dropped: u64,
    /// Tag, callsite (0 for an end), absolute timestamp.
    records: Vec<(u8, u64, u64)>,
}

fn parse_chunk(chunk: &[u8]) -> Chunk {
    let read = |pos: &mut usize| {
        let (v, n) = wire::read_varint(&chunk[*pos..]).expect("varint");
        *pos += n;
        v
    };
    let mut pos = 0;
    let len = read(&mut pos);
    assert_eq!(len as usize, chunk.len() - pos, "length prefix");
    let [generation, base, first_id, depth, dropped, count] = [(); 6].map(|()| read(&mut pos));
    let mut c = Chunk { generation, base, first_id, depth, dropped, records: Vec::new() };
    let mut ts = base;
    for _ in 0..count {
        let tag = chunk[pos];
        pos += 1;
        let callsite = if tag == tag::SPAN_END { 0 } else { read(&mut pos) };
        ts = ts.wrapping_add(wire::unzigzag(read(&mut pos)) as u64);
        if tag != tag::SPAN_END {
            for field in callsite::all()[callsite as usize].fields {
                let ty = match field.ty {
                    FieldType::Dynamic => {
                        pos += 1;
                        FieldType::from_code(chunk[pos - 1]).expect("type code")
                    }
                    ty => ty,
                };
                match ty {
                    FieldType::U64 | FieldType::I64 => {
                        read(&mut pos);
                    }
                    FieldType::F64 => pos += 8,
                    FieldType::Bool => pos += 1,
                    FieldType::Str => pos += read(&mut pos) as usize,
                    FieldType::Dynamic => unreachable!(),
                }
            }
        }
        c.records.push((tag, callsite, ts));
    }
    assert_eq!(pos, chunk.len(), "records end where the length prefix says");
    c
}

#[test]
fn small_staging_areas_split_chunks_anywhere_and_stay_decodable() {
    let _serial = serial();
    let slot = new_slot(1 << 20, 64);
    let (expected, t0, t1) = record_on_thread(slot, || {
        let t0 = waffle::clock::now();
        let pad = "z".repeat(40);
        // What a decoder must reconstruct: (tag, callsite, id, depth before the record).
        let mut expected = Vec::new();
        let (span_cs, event_cs) = (callsite_id("mix_span"), callsite_id("mix_event"));
        for i in 0..600u64 {
            let len = (i % 41) as usize;
            let s = waffle::span!("mix_span", i);
            expected.push((tag::SPAN_BEGIN, span_cs, s.id().to_u64(), 0));
            let e = waffle::event!("mix_event", pad = &pad[..len]);
            expected.push((tag::EVENT, event_cs, e.to_u64(), 1));
            drop(s);
            expected.push((tag::SPAN_END, 0, 0, 1));
        }
        waffle::flush();
        (expected, t0, waffle::clock::now())
    });
    assert_eq!(slot.dropped(), 0, "every record fits an empty 64-byte area");

    let chunks = drain_chunks(slot);
    let mut decoded = Vec::new();
    let mut first_tags = [0usize; 4];
    let mut last_ts = None;
    for chunk in &chunks {
        let c = parse_chunk(chunk);
        assert_eq!((c.generation, c.dropped), (1, 0));
        assert!(!c.records.is_empty());
        first_tags[c.records[0].0 as usize] += 1;
        // Continuity: the base is the timestamp of the previous chunk's last record.
        assert!(t0 <= c.base && c.base <= t1);
        if let Some(prev) = last_ts {
            assert_eq!(c.base, prev);
        }
        // The header's id and depth are those of the first record: counting along from them
        // gives every record its id and depth.
        let (mut id, mut depth) = (c.first_id, c.depth);
        for &(tag, callsite, ts) in &c.records {
            assert!(ts <= t1);
            match tag {
                tag::SPAN_END => {
                    decoded.push((tag, 0, 0, depth));
                    depth = depth.checked_sub(1).expect("an end with no open span");
                }
                _ => {
                    decoded.push((tag, callsite, id, depth));
                    id += 1;
                    depth += u64::from(tag == tag::SPAN_BEGIN);
                }
            }
            last_ts = Some(ts);
        }
    }
    assert_eq!(decoded.len(), expected.len());
    for (i, (d, e)) in decoded.iter().zip(&expected).enumerate() {
        assert_eq!(d, e, "record {i}");
    }
    // 600 iterations of 10 to 60 bytes in a 64-byte area: chunks start with each kind of
    // record, so the bookkeeping after an overflow is exercised for every tag.
    assert!(chunks.len() > 100);
    assert!(first_tags[1] > 0 && first_tags[2] > 0 && first_tags[3] > 0, "{first_tags:?}");
}

// ---------------------------------------------------------------------------------------------
// Causal records: links, correlation, contexts, detached spans.
// ---------------------------------------------------------------------------------------------

#[test]
fn causal_records_are_byte_exact() {
    let _serial = serial();
    let slot = new_slot(4096, 1024);
    const REMOTE: u64 = 0x0123_4567_89ab_cdef; // an id of another stream or process
    let (ids, ctx_span) = record_on_thread(slot, || {
        let cause = waffle::event!("enc_cause");
        let far = waffle::SpanId::from_u64(REMOTE);
        let s = waffle::span!("enc_linked", caused_by = [cause, far], correlate = ("enc_key", 9u64));
        let ctx = waffle::Context::new(waffle::TraceId::from_u128(1), waffle::SpanId::from_u64(REMOTE));
        {
            let _g = ctx.enter();
        }
        let job = waffle::Instrument::instrument(async {}, waffle::span!("enc_async"));
        let job_id = job.span_id();
        drop(job); // never polled: its span ends on drop
        let ids = [cause.to_u64(), s.id().to_u64(), job_id.to_u64()];
        drop(s);
        waffle::flush();
        (ids, ctx.span_id().to_u64())
    });
    assert_eq!(ids, [FIRST_ID, FIRST_ID + 1, FIRST_ID + 2]);
    assert_eq!(ctx_span, REMOTE);
    assert_eq!(callsite::all()[callsite_id("enc_linked") as usize].correlate, "enc_key");

    let chunks = drain_chunks(slot);
    assert_eq!(chunks.len(), 1, "{chunks:02x?}");
    let remote = REMOTE.to_le_bytes();
    let job = (FIRST_ID + 2).to_le_bytes();
    #[rustfmt::skip]
    check(&chunks[0], &[
        Len,
        B(&[0x01]), Ts, B(&FIRST_ID_VARINT), B(&[0x00]), B(&[0x00]),
        B(&[0x0b]),                          // 11 records
        B(&[0x03]), V(callsite_id("enc_cause")), Ts,   // EVENT, id FIRST_ID
        B(&[0x01]), V(callsite_id("enc_linked")), Ts,  // SPAN_BEGIN, id FIRST_ID + 1
        B(&[0x04, 0x01]),                    // LINK_LOCAL: source - target = 1 (same stream)
        B(&[0x05]), B(&remote),              // LINK_FULL: another stream's id, 8 bytes LE
        B(&[0x06, 0x09]),                    // CORRELATE: value 9 (key in the callsite)
        B(&[0x07]), B(&remote),              // ENTER: the context's span, 8 bytes LE
        B(&[0x08]),                          // EXIT
        B(&[0x01]), V(callsite_id("enc_async")), Ts,   // SPAN_BEGIN of the async span
        B(&[0x09]), B(&job),                 // DETACH it from this thread's stack
        B(&[0x0a]), Ts, B(&job),             // ASYNC_END (dropped future), ts delta, id
        B(&[0x02]), Ts,                      // SPAN_END of enc_linked
    ]);
}
