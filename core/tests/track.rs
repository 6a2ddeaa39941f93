//! Byte-level tests of device tracks: the bytes a track's definition, a sync and a slice put in
//! a chunk, through a test runtime, and the reserved schemas they carry
//! (`docs/wire-format.md`, "Reserved fields"). Timestamps are real clock ticks, parsed as any
//! varint; every other byte is compared exactly.

use std::ptr::NonNull;
use std::sync::Mutex;

use waffle::callsite::{self, Kind};
use waffle::queue::StreamSlot;
use waffle::runtime::{self, Hooks};
use waffle::wire::{self, reserved::track as names, FieldType};

/// The runtime state is global: the tests run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());
static PENDING: Mutex<Option<&'static StreamSlot>> = Mutex::new(None);

fn acquire() -> Option<&'static StreamSlot> {
    let slot = PENDING.lock().unwrap().take()?;
    slot.try_claim()?;
    Some(slot)
}

fn release(_slot: &'static StreamSlot) {}

static HOOKS: Hooks = Hooks { acquire, release };

/// First id of the test stream: stream 1 of salt 0.
const FIRST_ID: u64 = waffle::ids::stream_id_base(0, 1);

fn leak(len: usize) -> NonNull<[u8]> {
    NonNull::from(Box::leak(vec![0u8; len].into_boxed_slice()))
}

/// Runs `f` on a thread of a new session whose only slot is returned with `f`'s result.
fn record<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> (R, Vec<u8>) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: two distinct leaked allocations, used by nothing but this slot, forever.
    let slot: &'static StreamSlot =
        Box::leak(Box::new(unsafe { StreamSlot::new(leak(4096), leak(1024), 1, FIRST_ID) }));
    waffle::local::set_flush_ticks(u64::MAX);
    *PENDING.lock().unwrap() = Some(slot);
    let epoch = runtime::install(&HOOKS);
    let r = std::thread::spawn(f).join();
    runtime::uninstall(epoch);
    let r = r.unwrap_or_else(|e| std::panic::resume_unwind(e));
    let mut bytes = Vec::new();
    while slot.drain_with(|b| bytes.extend_from_slice(b)) > 0 {}
    (r, bytes)
}

fn callsite_id(name: &str) -> u32 {
    let found: Vec<_> = callsite::all().iter().enumerate().filter(|(_, c)| c.name == name).collect();
    assert_eq!(found.len(), 1, "callsites named `{name}`");
    found[0].0 as u32
}

fn varint(v: u64) -> Vec<u8> {
    let mut b = [0u8; 10];
    let n = wire::write_varint(&mut b, v);
    b[..n].to_vec()
}

/// Reads a varint at `*pos` and moves past it.
fn take(bytes: &[u8], pos: &mut usize) -> u64 {
    let (v, n) = wire::read_varint(&bytes[*pos..]).expect("varint");
    *pos += n;
    v
}

/// Expects `expected` at `*pos` and moves past it.
fn expect(bytes: &[u8], pos: &mut usize, expected: &[u8], what: &str) {
    assert_eq!(&bytes[*pos..*pos + expected.len()], expected, "{what} at byte {pos} of {bytes:02x?}");
    *pos += expected.len();
}

#[test]
fn the_reserved_schemas_are_the_ones_specified() {
    let define = &callsite::all()[callsite_id("track") as usize];
    assert_eq!(define.kind, Kind::Event);
    let schema: Vec<_> = define.fields.iter().map(|f| (f.name, f.ty)).collect();
    assert_eq!(schema, [("track.name", FieldType::Str), ("track.rate", FieldType::U64)]);
    let sync = &callsite::all()[callsite_id("track.sync") as usize];
    let schema: Vec<_> = sync.fields.iter().map(|f| (f.name, f.ty)).collect();
    assert_eq!(schema, [("track.id", FieldType::U64), ("track.ticks", FieldType::U64)]);
    assert_eq!((names::DEFINE, names::SYNC), ("track", "track.sync"));
    assert_eq!(names::SLICE, ["track.id", "track.begin", "track.end"]);
}

#[test]
fn a_definition_a_sync_and_a_slice_are_three_events() {
    let ((ids, launch), bytes) = record(|| {
        let gpu = waffle::Track::new("GPU 0", 1_000_000_000);
        let sync = gpu.sync(300);
        let launch = waffle::event!("trk_launch");
        let n = 7u64;
        let slice = waffle::track_slice!(gpu, "trk_kernel", 1_000u32, 1_300u32, launched_by = launch, n);
        waffle::flush();
        ([gpu.id(), sync.to_u64(), slice.to_u64()], launch.to_u64())
    });
    assert_eq!(ids, [FIRST_ID, FIRST_ID + 1, FIRST_ID + 3]);
    assert_eq!(launch, FIRST_ID + 2);
    let slice_site = &callsite::all()[callsite_id("trk_kernel") as usize];
    let schema: Vec<_> = slice_site.fields.iter().map(|f| (f.name, f.ty)).collect();
    assert_eq!(
        schema,
        [
            ("track.id", FieldType::U64),
            ("track.begin", FieldType::U64),
            ("track.end", FieldType::U64),
            ("n", FieldType::Dynamic)
        ]
    );

    let mut pos = 0;
    let len = take(&bytes, &mut pos);
    assert_eq!(len as usize, bytes.len() - pos, "one chunk");
    assert_eq!(take(&bytes, &mut pos), 1, "generation");
    take(&bytes, &mut pos); // base ts
    assert_eq!(take(&bytes, &mut pos), FIRST_ID);
    expect(&bytes, &mut pos, &[0x00, 0x00, 0x05], "depth 0, dropped 0, 5 records");
    let track_id = varint(FIRST_ID);
    // EVENT "track": callsite, ts delta, "GPU 0" as str, 1e9 as varint.
    expect(&bytes, &mut pos, &[0x03], "EVENT tag");
    assert_eq!(take(&bytes, &mut pos), callsite_id("track") as u64);
    take(&bytes, &mut pos);
    expect(&bytes, &mut pos, &[0x05, b'G', b'P', b'U', b' ', b'0'], "track.name");
    expect(&bytes, &mut pos, &[0x80, 0x94, 0xeb, 0xdc, 0x03], "track.rate 1 000 000 000");
    // EVENT "track.sync": the track's id (a 5-byte varint here), device ticks 300.
    expect(&bytes, &mut pos, &[0x03], "EVENT tag");
    assert_eq!(take(&bytes, &mut pos), callsite_id("track.sync") as u64);
    take(&bytes, &mut pos);
    expect(&bytes, &mut pos, &track_id, "track.id");
    expect(&bytes, &mut pos, &[0xac, 0x02], "track.ticks 300");
    // The launching event, no fields.
    expect(&bytes, &mut pos, &[0x03], "EVENT tag");
    assert_eq!(take(&bytes, &mut pos), callsite_id("trk_launch") as u64);
    take(&bytes, &mut pos);
    // The slice: track id, begin, end, then the user's field (dynamic: type code 1 first).
    expect(&bytes, &mut pos, &[0x03], "EVENT tag");
    assert_eq!(take(&bytes, &mut pos), callsite_id("trk_kernel") as u64);
    take(&bytes, &mut pos);
    expect(&bytes, &mut pos, &track_id, "track.id");
    expect(&bytes, &mut pos, &[0xe8, 0x07], "track.begin 1 000");
    expect(&bytes, &mut pos, &[0x94, 0x0a], "track.end 1 300");
    expect(&bytes, &mut pos, &[0x01, 0x07], "n = 7, dynamic u64");
    // Its launcher: LINK_LOCAL, source - target = 1.
    expect(&bytes, &mut pos, &[0x04, 0x01], "LINK_LOCAL to the launch");
    assert_eq!(pos, bytes.len(), "nothing after the link");
}

#[test]
fn a_track_made_while_nothing_records_records_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let gpu = waffle::Track::new("GPU 1", 1_000);
    assert!(!gpu.is_recording());
    assert_eq!(gpu.id(), 0);
    assert!(gpu.sync(5).is_null());
    assert!(waffle::track_slice!(gpu, "trk_idle", 1u64, 2u64).is_null());
    assert_eq!(waffle::Track::from_id(42).id(), 42);
}
