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
use waffle::wire::{frame, Calibration, Clock, FramePayload};
use waffle_read::decode::decode_reader;
use waffle_read::reader::{FrameReader, Warning};
use waffle_read::Error;
use waffle_std::frames::FrameWriter;

#[path = "common/hand_made.rs"]
mod hand_made;
use hand_made::{chunk, data, file, header, span_records, Bytes};

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
fn decode(bytes: &[u8]) -> Result<(waffle_read::model::Process, Vec<Warning>), Error> {
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

fn single(bytes: &[u8]) -> (waffle_read::model::Process, Warning) {
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
    let mut payload = Bytes::default();
    payload.varint(0).varint(1 << 40).bytes(&chunk(1, 0, 0, 2, &span_records("x"))[1..]);
    let bad = file(&[(frame::DATA, payload.0), (frame::DATA, good.clone())]);
    let (p, w) = single(&bad);
    assert_eq!(w.offset, data_at + 5 + 1, "after the frame head and the stream number");
    assert!(w.message.contains("says its body is 1099511627776 bytes"), "{w}");
    assert_eq!(p.threads[0].spans.len(), 1, "the next frame's span");

    // A string of 2^40 bytes in a record's field: that chunk ends there, the next decodes.
    let mut rec = Bytes::default();
    rec.bytes(&[0x01]).varint(0).varint(2).varint(1 << 40).bytes(b"short");
    let bad =
        file(&[(frame::DATA, data(&[chunk(1, 0, 0, 1, &rec.0), chunk(3, 0, 0, 2, &span_records("ok"))]))]);
    let (p, w) = single(&bad);
    assert_eq!(w.offset, data_at + 5 + 1);
    assert!(w.message.contains("1099511627776 bytes wanted"), "{w}");
    assert_eq!(p.threads[0].spans.len(), 1);

    // ...in a thread name (STREAM) and a callsite name (CALLSITES): that frame is skipped, and
    // the warning names the frame and the byte of its payload where the string was to start.
    let mut stream = Bytes::default();
    stream.varint(0).varint(1).varint(0).varint(7).varint(1 << 40).bytes(b"name");
    let mut sites = Bytes::default();
    sites.varint(0).varint(5).varint(1).bytes(&[1]).varint(1 << 40).bytes(b"name");
    for (kind, payload) in [(frame::STREAM, stream.0), (frame::CALLSITES, sites.0)] {
        let bad = file(&[(kind, payload), (frame::DATA, good.clone())]);
        let (p, w) = single(&bad);
        assert_eq!(w.offset, data_at);
        let name = frame::name(kind);
        assert!(w.message.contains(&format!("{name} payload at byte 10: ends inside a value")), "{w}");
        assert_eq!(p.threads[0].spans.len(), 1);
    }

    // ...and as the label count and a label's length in the HEADER: a clear error.
    let mut h = Bytes::default();
    h.varint(1).str("p").str("host").varint(1 << 40).varint(1 << 40).bytes(b"key");
    let mut out = FrameWriter::new(Vec::new()).unwrap();
    out.frame(frame::HEADER, &[&h.0]).unwrap();
    LARGEST.store(0, Ordering::Relaxed);
    match decode(out.get_mut()) {
        Err(Error::Corrupt { offset: 10, what, .. }) => {
            assert!(what.contains("HEADER payload at byte 20: ends inside a value"), "{what}")
        }
        other => panic!("{other:?}"),
    }
    // Not even a preallocation for the claimed labels: nothing near 2^40 pairs, nor serde's
    // 1 MiB cap (postcard gives no size hint when fewer bytes than items remain).
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(largest < 4096, "decoding a {}-byte file allocated {largest} bytes at once", out.get_mut().len());
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
    let clock = Clock {
        calibration: Calibration { anchor_ticks: 1, anchor_unix_ns: u64::MAX, ticks: 1, ns: u64::MAX },
    };
    let bad = file(&[
        (frame::DATA, data(&[chunk(1, 0, 0, 2, &span_records("a"))])),
        (frame::CLOCK, clock.encode()),
    ]);
    let (p, w) = decode(&bad).unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(p.threads[0].spans[0].start_ns, u64::MAX);
}

#[test]
fn bad_codes_and_calibrations_are_named() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let good = data(&[chunk(1, 0, 0, 2, &span_records("fine"))]);
    let data_at = frame_starts(&file(&[]))[3];
    // Callsites 5 (fine), 6 (kind 9): 5 is kept, 6 and after are not.
    let site = |kind: u8, ty: u8| {
        let mut b = Bytes::default();
        b.bytes(&[kind]).str("n").str("m").str("f").varint(1).varint(1).str("k").bytes(&[ty]).str("");
        b.0
    };
    let mut sites = Bytes::default();
    sites.varint(0).varint(5).varint(3).bytes(&site(1, 1)).bytes(&site(9, 1)).bytes(&site(1, 1));
    let (_, w) = single(&file(&[(frame::CALLSITES, sites.0), (frame::DATA, good.clone())]));
    assert_eq!(w.offset, data_at);
    assert!(w.message.contains("CALLSITES payload at byte 16: callsite 6 has unknown kind 9"), "{w}");
    assert!(w.message.contains("the callsites before it are kept"), "{w}");
    // A field type code of 6.
    let mut sites = Bytes::default();
    sites.varint(0).varint(5).varint(1).bytes(&site(1, 6));
    let (_, w) = single(&file(&[(frame::CALLSITES, sites.0), (frame::DATA, good.clone())]));
    assert!(w.message.contains("a field of callsite 5 has unknown type code 6"), "{w}");

    // A CLOCK whose interval is zero: a warning, and the header's calibration stays.
    let zero = Clock { calibration: Calibration { anchor_ticks: 1, anchor_unix_ns: 1, ticks: 0, ns: 1 } };
    let (p, w) = single(&file(&[(frame::DATA, good.clone()), (frame::CLOCK, zero.encode())]));
    assert!(w.message.contains("CLOCK payload: clock calibration with a zero interval; ignored"), "{w}");
    // Tick 2001, by the header's calibration (anchor 1000, 3 ticks a ns).
    assert_eq!(p.threads[0].spans[0].start_ns, 1_700_000_000_000_000_333);
    // ...and in the HEADER: the file is refused.
    let mut out = FrameWriter::new(Vec::new()).unwrap();
    let mut h = header();
    h.calibration.ns = 0;
    out.frame(frame::HEADER, &[&h.encode()]).unwrap();
    match decode(out.get_mut()) {
        Err(Error::Corrupt { offset: 10, what, .. }) => assert!(what.contains("zero interval"), "{what}"),
        other => panic!("{other:?}"),
    }

    // An END claiming 2^40 entries: a warning, nothing allocated for them.
    let mut end = Bytes::default();
    end.varint(1 << 40).varint(0).varint(5);
    let (p, w) = single(&file(&[(frame::DATA, good), (frame::END, end.0)]));
    assert!(w.message.contains("END payload at byte 8: ends inside a value"), "{w}");
    assert!(!p.complete);
}
