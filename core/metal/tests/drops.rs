//! A queue that fills before it is drained drops whole chunks and counts them, in the chunk
//! heads and in END, as the std runtime does; and a stream cut short (a UART capture that
//! stopped) still decodes up to the cut, with a warning naming the offset. Its own test binary:
//! the runtime is installed once per process.

use std::path::Path;
use waffle_metal::{Config, Trace};
use waffle_read::decode::decode_reader;

/// One stream with a queue of 512 bytes and chunks of at most 64.
static TRACE: Trace<1, 512, 64> = Trace::new();

struct Bytes(Vec<u8>);

impl waffle_metal::Output for Bytes {
    type Error = std::convert::Infallible;

    fn write(&mut self, bytes: &[u8]) -> Result<(), Self::Error> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

const EVENTS: u64 = 400;

#[test]
fn a_full_queue_drops_and_counts_and_a_cut_stream_decodes_to_the_cut() {
    // On a host the clock is the TSC whatever `Config::clock` says; a nominal rate of 10^12
    // ticks per second makes the flush deadline (1 ms of ticks) long enough that chunks are
    // pushed when staging is full, as on a microcontroller, not after every record.
    let config = Config::new("drops", &["main"], || 0, || 0, 1_000_000_000_000);
    TRACE.start(config).unwrap();
    let mut output = Bytes(Vec::new());
    for i in 0..EVENTS {
        if i == 40 {
            waffle::flush();
            TRACE.drain(&mut output).unwrap(); // a first DATA frame, before the queue fills
        }
        // Each event is 4 to 5 bytes: 400 of them are far more than 512 bytes of queue.
        let id = waffle::event!("tick", i);
        assert!(!id.is_null(), "an event takes its id even when its chunk is dropped later");
    }
    TRACE.finish(&mut output).unwrap();
    let dropped = TRACE.dropped(0);
    assert!(dropped > 0, "the queue held at most 512 bytes");

    let (process, warnings) = decode_reader(&output.0[..], Path::new("drops.bin")).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(process.complete);
    assert_eq!(process.dropped, dropped, "END and the chunk heads say what the slot counted");
    let events = &process.threads[0].events;
    assert_eq!(events.len() as u64 + dropped, EVENTS, "every event is either in the file or counted");
    // What survived is the first 40, then the chunks the queue took before it filled (it
    // refused the rest), with their own ids and values.
    for (k, e) in events.iter().enumerate().take(40) {
        assert_eq!(e.id, 1 + k as u64);
        assert_eq!(format!("{:?}", e.fields), format!("{:?}", [waffle_read::model::Value::U64(k as u64)]));
    }

    // Cut inside the last DATA frame: the events before it decode, and a warning names the
    // offset where the damage starts; the file is not complete.
    let end_len = 9 + 1 + 1 + 2; // envelope, count, one stream and its drops (two bytes)
    let cut = output.0.len() - end_len - 10;
    let (process, warnings) = decode_reader(&output.0[..cut], Path::new("cut.bin")).unwrap();
    assert!(!process.complete);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].message.contains("ends inside a frame"), "{warnings:?}");
    assert!(warnings[0].offset < cut as u64);
    // The queue hands its bytes over in up to two pieces (before and after it wraps), so the
    // last drain may have written two DATA frames: at least the first drain's 40 survive.
    let kept = process.threads[0].events.len();
    assert!((40..events.len()).contains(&kept), "{kept} of {}", events.len());
}
