//! Damaged and hostile trace files: flipped bytes at random positions, and length fields
//! claiming 2^31 and 2^40 bytes. The decoder answers with a clear error or a warning naming the
//! offset, never panics, and its memory stays bounded: a counting allocator checks that no
//! single allocation exceeds 64 MiB and that decoding a small file never holds more than that.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    path::Path,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex,
    },
};
use waffle::wire::{frame, FieldType};
use waffle_decode::{
    decode::decode_reader,
    reader::{FrameReader, Warning},
    Error,
};
use waffle_std::frames::{FrameWriter, Payload};

const LIMIT: usize = 64 << 20;

struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(size: usize) {
    LARGEST.fetch_max(size, Ordering::Relaxed);
    let live = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting only touches
// atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        grew(new_size);
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Tests here measure the process's peak memory, so they run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Decodes `bytes`, checking memory: no allocation over 64 MiB, at most 64 MiB held at once
/// beyond what was live before.
fn decode(bytes: &[u8]) -> Result<(waffle_decode::model::Process, Vec<Warning>), Error> {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let result = decode_reader(bytes, Path::new("bad.bin"));
    let peak = PEAK.load(Ordering::Relaxed) - base;
    assert!(peak <= LIMIT, "decoding {} bytes held {peak} bytes at once", bytes.len());
    assert!(LARGEST.load(Ordering::Relaxed) <= LIMIT, "an allocation over 64 MiB");
    if let Ok((_, warnings)) = &result {
        for w in warnings {
            assert!(w.offset <= bytes.len() as u64, "{w} points past the end");
        }
    }
    result
}

/// A small real trace of two threads with nested spans, fields of every type and links.
fn real_trace() -> Vec<u8> {
    let path = std::env::temp_dir().join(format!("waffle-corruption-{}.bin", std::process::id()));
    let session = waffle_std::Config::new(&path).staging_bytes(512).start().unwrap();
    std::thread::scope(|s| {
        for t in 0..2u64 {
            s.spawn(move || {
                for i in 0..150u64 {
                    let cause = waffle::event!("cause", i, neg = -(i as i64), ok = true);
                    let _a = waffle::span!("outer", caused_by = [cause], t, name = "a string");
                    let _b = waffle::span!("inner", x = i as f64 / 3.0);
                }
            });
        }
    });
    session.stop().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).ok();
    bytes
}

/// Start offset of each frame, and the end of the last.
fn frame_starts(bytes: &[u8]) -> Vec<u64> {
    let mut r = FrameReader::new(bytes, Path::new("t.bin")).unwrap();
    let mut starts = vec![r.offset()];
    while r.next_frame(&mut Vec::new()).is_some() {
        starts.push(r.offset());
    }
    starts
}

/// xorshift64*: a seeded generator, so that a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn flipped_bytes_are_skipped_with_the_frame_offset() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let bytes = real_trace();
    let starts = frame_starts(&bytes);
    let header_end = starts[1] as usize;
    let (full, _) = decode(&bytes).unwrap();
    let original: std::collections::HashMap<u64, String> =
        full.threads.iter().flat_map(|t| &t.spans).map(|s| (s.id, s.name().to_owned())).collect();
    let mut rng = Rng(0x5eed_cafe_f00d_0001);
    let (mut errors, mut skipped) = (0, 0);
    // One byte flipped: the frame holding it fails its checksum (or its length no longer
    // fits), and the first warning names that frame's offset.
    for _ in 0..1500 {
        let at = rng.below(bytes.len());
        let mut bad = bytes.clone();
        bad[at] ^= 1 + rng.below(255) as u8;
        match decode(&bad) {
            Ok((p, warnings)) => {
                assert!(at >= header_end, "flip at {at} in the preamble decoded");
                let frame = starts[starts.iter().rposition(|&s| s as usize <= at).unwrap()];
                assert_eq!(warnings.first().map(|w| w.offset), Some(frame), "flip at {at}: {warnings:?}");
                // Damage loses spans; it never invents or renames one.
                for s in p.threads.iter().flat_map(|t| &t.spans).filter(|s| s.id != 0) {
                    assert_eq!(original.get(&s.id).map(String::as_str), Some(s.name()), "flip at {at}");
                }
                skipped += 1;
            }
            Err(e) => {
                assert!(at < header_end, "flip at {at} after the header: {e}");
                assert!(
                    matches!(
                        e,
                        Error::NotATrace { .. } | Error::UnknownVersion { .. } | Error::Corrupt { .. }
                    ),
                    "{e}"
                );
                errors += 1;
            }
        }
    }
    // Several bytes flipped anywhere: no panic, bounded memory, offsets inside the file.
    for _ in 0..1500 {
        let mut bad = bytes.clone();
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(bad.len());
            bad[at] ^= 1 + rng.below(255) as u8;
        }
        let _ = decode(&bad);
    }
    println!(
        "3000 damaged copies of a {}-byte trace: {errors} rejected, {skipped} decoded with the damaged \
         frame skipped and named; largest allocation in this process {} bytes",
        bytes.len(),
        LARGEST.load(Ordering::Relaxed)
    );
}

/// A file made frame by frame: preamble, HEADER, one CALLSITES frame (span `s` with a `str`
/// field, callsite 0), a STREAM frame, then `rest`.
fn file(rest: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = FrameWriter::new(Vec::new()).unwrap();
    let mut h = Payload::new();
    h.varint(1).str("p").str("host").varint(0).str("tsc");
    h.varint(1000).varint(1_700_000_000_000_000_000).varint(3).varint(1).varint(0);
    h.bytes(&1u128.to_le_bytes()).varint(0);
    out.frame(frame::HEADER, &[&h.0]).unwrap();
    let mut c = Payload::new();
    c.varint(0).varint(0).varint(1).byte(1).str("s").str("m").str("f.rs").varint(1);
    c.varint(1).str("text").byte(FieldType::Str as u8).str("");
    out.frame(frame::CALLSITES, &[&c.0]).unwrap();
    let mut s = Payload::new();
    s.varint(0).varint(1).varint(0).varint(7).str("t");
    out.frame(frame::STREAM, &[&s.0]).unwrap();
    for (kind, payload) in rest {
        out.frame(*kind, &[payload]).unwrap();
    }
    out.get_mut().clone()
}

/// A chunk of stream 0: header fields, then records.
fn chunk(first_id: u64, depth: u64, dropped: u64, records: u64, body: &[u8]) -> Vec<u8> {
    let mut c = Payload::new();
    c.varint(1).varint(2000).varint(first_id).varint(depth).varint(dropped).varint(records).bytes(body);
    c.0
}

fn data(chunks: &[Vec<u8>]) -> Vec<u8> {
    let mut p = Payload::new();
    p.varint(0);
    for c in chunks {
        p.varint(c.len() as u64).bytes(c);
    }
    p.0
}

/// A SPAN_BEGIN of callsite 0 with a string, and a SPAN_END.
fn span_records(text: &str) -> Vec<u8> {
    let mut r = Payload::new();
    r.byte(0x01).varint(0).varint(2).str(text).byte(0x02).varint(2);
    r.0
}

fn single(bytes: &[u8]) -> (waffle_decode::model::Process, Warning) {
    let (p, warnings) = decode(bytes).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    (p, warnings[0].clone())
}

#[test]
fn hostile_lengths_are_refused_without_allocating_them() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let good = data(&[chunk(1, 0, 0, 2, &span_records("fine"))]);
    let base = file(&[(frame::DATA, good.clone())]);
    let (p, w) = decode(&base).unwrap();
    assert!(w.is_empty() && p.threads[0].spans.len() == 1);
    let data_at = frame_starts(&base)[3];

    // A frame length of 2^31: reading stops there, with a warning at that frame.
    let mut bad = base.clone();
    bad[data_at as usize + 1..data_at as usize + 5].copy_from_slice(&(1u32 << 31).to_le_bytes());
    let (p, w) = single(&bad);
    assert_eq!(w.offset, data_at);
    assert!(w.message.contains("frame length 2147483648 exceeds"), "{w}");
    assert!(p.threads.iter().all(|t| t.spans.is_empty()));

    // A chunk body of 2^40 bytes, CRC intact: the rest of that frame is skipped, later frames
    // still read; the warning names the chunk's offset.
    let mut payload = Payload::new();
    payload.varint(0).varint(1 << 40).bytes(&chunk(1, 0, 0, 2, &span_records("x")));
    let bad = file(&[(frame::DATA, payload.0), (frame::DATA, good.clone())]);
    let (p, w) = single(&bad);
    assert_eq!(w.offset, data_at + 5 + 1, "after the frame head and the stream number");
    assert!(w.message.contains("says its body is 1099511627776 bytes"), "{w}");
    assert_eq!(p.threads[0].spans.len(), 1, "the next frame's span");

    // A string of 2^40 bytes in a record's field: that chunk ends there, the next decodes.
    let mut rec = Payload::new();
    rec.byte(0x01).varint(0).varint(2).varint(1 << 40).bytes(b"short");
    let bad =
        file(&[(frame::DATA, data(&[chunk(1, 0, 0, 1, &rec.0), chunk(3, 0, 0, 2, &span_records("ok"))]))]);
    let (p, w) = single(&bad);
    assert_eq!(w.offset, data_at + 5 + 1);
    assert!(w.message.contains("1099511627776 bytes wanted"), "{w}");
    assert_eq!(p.threads[0].spans.len(), 1);

    // ...in a thread name (STREAM) and a callsite name (CALLSITES): that frame is skipped.
    let mut stream = Payload::new();
    stream.varint(0).varint(1).varint(0).varint(7).varint(1 << 40).bytes(b"name");
    let mut sites = Payload::new();
    sites.varint(0).varint(5).varint(1).byte(1).varint(1 << 40).bytes(b"name");
    for (kind, payload) in [(frame::STREAM, stream.0), (frame::CALLSITES, sites.0)] {
        let bad = file(&[(kind, payload), (frame::DATA, good.clone())]);
        let (p, w) = single(&bad);
        assert_eq!(w.offset, data_at);
        assert!(w.message.contains("1099511627776 bytes wanted"), "{w}");
        assert_eq!(p.threads[0].spans.len(), 1);
    }

    // ...and as the label count and a label's length in the HEADER: a clear error.
    let mut h = Payload::new();
    h.varint(1).str("p").str("host").varint(1 << 40).varint(1 << 40).bytes(b"key");
    let mut out = FrameWriter::new(Vec::new()).unwrap();
    out.frame(frame::HEADER, &[&h.0]).unwrap();
    match decode(out.get_mut()) {
        Err(Error::Corrupt { offset: 10, what, .. }) => {
            assert!(what.contains("1099511627776 bytes wanted"), "{what}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn hostile_counters_and_depths_stay_bounded() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The id counter at u64::MAX: ids wrap rather than overflow.
    let bad = file(&[(
        frame::DATA,
        data(&[chunk(u64::MAX, 0, 0, 4, &[span_records("a"), span_records("b")].concat())]),
    )]);
    let (p, w) = decode(&bad).unwrap();
    assert!(w.is_empty(), "{w:?}");
    let ids: Vec<u64> = p.threads[0].spans.iter().map(|s| s.id).collect();
    assert_eq!(ids, [u64::MAX, 0]);

    // Drop counts whose sum overflows: saturated.
    let c = chunk(1, 0, u64::MAX, 2, &span_records("a"));
    let (p, _) = decode(&file(&[(frame::DATA, data(&[c.clone(), c]))])).unwrap();
    assert_eq!(p.dropped, u64::MAX);

    // Chunk headers claiming 65,536 open spans, then none, over and over: stand-ins for lost
    // begins are limited by the file's size, with a warning at the chunk that asked too much.
    let mut chunks = Vec::new();
    for _ in 0..200 {
        chunks.push(chunk(1, 1 << 16, 0, 0, &[]));
        chunks.push(chunk(1, 0, 0, 0, &[]));
    }
    let bad = file(&[(frame::DATA, data(&chunks))]);
    let (p, w) = decode(&bad).unwrap();
    let standins = p.threads[0].spans.len();
    assert!(standins <= 4096 + bad.len(), "{standins} stand-ins from {} bytes", bad.len());
    assert!(w.iter().any(|w| w.message.contains("stand-ins for lost begins are not made")), "{w:?}");

    // A calibration of 2^64 ns per tick: times saturate instead of overflowing.
    let mut h = Payload::new();
    h.varint(1).varint(u64::MAX).varint(1).varint(u64::MAX);
    let bad = file(&[(frame::DATA, data(&[chunk(1, 0, 0, 2, &span_records("a"))])), (frame::CLOCK, h.0)]);
    let (p, w) = decode(&bad).unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(p.threads[0].spans[0].start_ns, u64::MAX);
}
