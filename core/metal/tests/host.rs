//! The whole transport on the host, where each thread records a stream: a "main loop"
//! thread and an "interrupt" thread record into their own queues, the trace is drained midway
//! and finished into bytes, and `waffle-decode` reads those bytes to the exact tree (the
//! firmware under QEMU is checked by `scripts/embedded-demo.sh`).

use std::{cell::Cell, path::Path, sync::mpsc};
use waffle::{EventId, SpanId};
use waffle_metal::{Config, StartError, Trace};
use waffle_read::decode::decode_reader;
use waffle_read::model::{Thread, Value};

/// Three streams of memory, two configured: the third shows that a stream past the
/// configured ones records nothing.
static TRACE: Trace<3, 4096, 256> = Trace::new();

thread_local! {
    static STREAM: Cell<usize> = const { Cell::new(0) };
}

fn stream_of() -> usize {
    STREAM.with(Cell::get)
}

/// A output into memory.
struct Bytes(Vec<u8>);

impl waffle_metal::Output for Bytes {
    type Error = std::convert::Infallible;

    fn write(&mut self, bytes: &[u8]) -> Result<(), Self::Error> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

fn no_clock() -> u64 {
    0 // unused on a host: waffle reads the platform counter there
}

fn config() -> Config {
    let mut c = Config::new("host-firmware", &["main", "tick"], stream_of, no_clock, 1_000_000_000);
    c.host = "mps2-an386";
    c.salt = 0x5;
    c
}

#[test]
fn streams_record_into_their_own_queues_and_decode_to_the_exact_tree() {
    let mut output = Bytes(Vec::new());
    TRACE.drain(&mut output).unwrap();
    assert!(output.0.is_empty(), "nothing is written before start");
    TRACE.start(config()).unwrap();
    assert_eq!(TRACE.start(config()), Err(StartError::AlreadyStarted));
    static OTHER: Trace<1, 512, 64> = Trace::new();
    let one = Config { streams: &["main"], ..config() };
    assert_eq!(OTHER.start(one), Err(StartError::AlreadyStarted), "one trace per program");

    let (tx, rx) = mpsc::channel::<(EventId, u32)>();
    let tick = std::thread::spawn(move || {
        STREAM.with(|c| c.set(1));
        for i in 0..4u32 {
            let id = waffle::event!("sample", value = i * 10);
            tx.send((id, i)).unwrap();
        }
    });
    let outside = std::thread::spawn(|| {
        STREAM.with(|c| c.set(2));
        waffle::event!("nowhere")
    });
    tick.join().unwrap();
    assert!(outside.join().unwrap().is_null(), "a stream past the configured ones records nothing");

    let mut samples = Vec::new();
    for (k, (cause, i)) in rx.iter().enumerate() {
        assert!(!cause.is_null());
        samples.push(cause);
        let s = waffle::span!("filter", caused_by = cause, n = i);
        let _out = waffle::event!("out", y = i64::from(i as i32) - 20);
        assert!(!s.id().is_null());
        if k == 1 {
            drop(s);
            TRACE.drain(&mut output).unwrap(); // midway: the head, then what is there so far
        }
    }
    let open = waffle::span!("still-open");
    TRACE.finish(&mut output).unwrap();
    assert_eq!(open.id(), open.id());
    drop(open);
    TRACE.drain(&mut output).unwrap();
    TRACE.finish(&mut output).unwrap();
    let after = output.0.len();
    assert!(waffle::event!("after").is_null(), "recording stopped at finish");
    TRACE.drain(&mut output).unwrap();
    assert_eq!(output.0.len(), after, "nothing is written after finish");
    let bytes = output.0;

    let (process, warnings) = decode_reader(&bytes[..], Path::new("host.bin")).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(process.complete, "END was written");
    assert_eq!((process.header.name.as_str(), process.header.host.as_str()), ("host-firmware", "mps2-an386"));
    assert_eq!(process.dropped, 0);
    let thread = |name: &str| -> &Thread {
        process.threads.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no thread {name}"))
    };
    assert_eq!(process.threads.len(), 2, "{:?}", process.threads.iter().map(|t| &t.name).collect::<Vec<_>>());
    let (main, tick) = (thread("main"), thread("tick"));
    assert_eq!((main.tid, tick.tid), (0, 1));

    let values: Vec<_> = tick.events.iter().map(|e| (&*e.callsite.name, e.id, e.fields.clone())).collect();
    let expected: Vec<_> =
        (0..4u64).zip(&samples).map(|(i, id)| ("sample", id.to_u64(), vec![Value::U64(i * 10)])).collect();
    assert_eq!(format!("{values:?}"), format!("{expected:?}"));
    assert_eq!(tick.events[0].id, 0x5 << 44 | 1 << 32 | 1, "salt 5, stream 1, counter 1");

    let filters: Vec<_> = main.spans.iter().filter(|s| s.callsite.name == "filter").collect();
    assert_eq!(filters.len(), 4);
    for (i, (s, cause)) in filters.iter().zip(&samples).enumerate() {
        assert_eq!(s.links, vec![cause.to_u64()], "filter {i} is caused by sample {i}");
        assert_eq!(format!("{:?}", s.fields), format!("{:?}", [Value::U64(i as u64)]));
        assert!(s.ended && s.parent.is_none());
        let out: Vec<_> = main.events.iter().filter(|e| e.parent == Some(s.id)).collect();
        assert_eq!(out.len(), 1);
        assert_eq!(format!("{:?}", out[0].fields), format!("{:?}", [Value::I64(i as i64 - 20)]));
    }
    let open = main.spans.iter().find(|s| s.callsite.name == "still-open").unwrap();
    assert!(!open.ended, "a span open at finish stays open in the file");
    assert_eq!(SpanId::from_u64(open.id).to_u64(), open.id);
}

#[test]
fn a_config_without_streams_or_ticks_is_refused() {
    static T: Trace<1, 512, 64> = Trace::new();
    let mut c = config();
    c.streams = &[];
    assert_eq!(T.start(c), Err(StartError::Streams));
    c.streams = &["a", "b"];
    assert_eq!(T.start(c), Err(StartError::Streams), "two names for one stream of memory");
    c.streams = &["a"];
    c.ticks_per_second = 0;
    assert_eq!(T.start(c), Err(StartError::Clock));
}
