//! `Config::live`: the writer gets a copy of the trace from the collector thread, in writes of
//! whole frames (the first starting with the file head), which put together are the file byte
//! for byte; a writer that fails is dropped and the file goes on, complete. The writer is
//! dropped at stop, after the END frame. (Sending from such a writer is the decoder's
//! `follow::live`, tested there.)

use std::io::{self, Write};
use std::sync::{Arc, Mutex};

use waffle::wire::{
    envelope::{FrameHead, FILE_HEAD_LEN},
    frame, FRAME_HEAD_LEN,
};

/// One session at a time in this process.
static SESSION: Mutex<()> = Mutex::new(());

/// Keeps every write; notes when it is dropped.
#[derive(Default)]
struct Tee {
    writes: Arc<Mutex<Vec<Vec<u8>>>>,
    dropped: Arc<Mutex<bool>>,
    fail_after: Option<usize>,
}

impl Write for Tee {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut writes = self.writes.lock().unwrap();
        if self.fail_after.is_some_and(|n| writes.len() >= n) {
            return Err(io::Error::other("the copy's sink is gone"));
        }
        writes.push(bytes.to_vec());
        Ok(bytes.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Tee {
    fn drop(&mut self) {
        if Arc::strong_count(&self.dropped) == 2 {
            *self.dropped.lock().unwrap() = true;
        }
    }
}

/// The kinds of the whole frames in `bytes`; fails on a cut one.
fn kinds(mut bytes: &[u8]) -> Vec<u8> {
    let mut kinds = Vec::new();
    while !bytes.is_empty() {
        let head = FrameHead::decode(bytes[..FRAME_HEAD_LEN].try_into().unwrap()).unwrap();
        let len = head.frame_len() as usize;
        assert!(bytes.len() >= len, "a write ends inside a frame");
        kinds.push(head.kind);
        bytes = &bytes[len..];
    }
    kinds
}

fn record(path: &std::path::Path, copy: Tee) {
    let session = waffle_std::Config::new(path).live(copy).start().unwrap();
    std::thread::scope(|s| {
        for t in 0..3u64 {
            s.spawn(move || {
                for i in 0..2000u64 {
                    let _s = waffle::span!("live", t = t, i = i);
                    if i % 500 == 0 {
                        std::thread::sleep(std::time::Duration::from_millis(3));
                    }
                }
            });
        }
    });
    session.stop().unwrap();
}

#[test]
fn the_writer_gets_the_file_in_whole_frames() {
    let _one = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::env::temp_dir().join(format!("waffle-live-{}.bin", std::process::id()));
    let copy = Tee::default();
    let (writes, dropped) = (copy.writes.clone(), copy.dropped.clone());
    record(&path, copy);
    assert!(*dropped.lock().unwrap(), "the writer is dropped at stop");
    let writes = writes.lock().unwrap();
    assert!(writes.len() >= 3, "{} writes", writes.len());
    assert_eq!(writes.concat(), std::fs::read(&path).unwrap(), "the copy is the file");
    let mut all = kinds(&writes[0][FILE_HEAD_LEN..]);
    assert_eq!(all[0], frame::HEADER);
    for w in &writes[1..] {
        all.extend(kinds(w));
    }
    assert_eq!(all.last(), Some(&frame::END));
    assert!(all.iter().filter(|&&k| k == frame::DATA).count() > 1);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_failing_writer_is_dropped_and_the_file_goes_on() {
    let _one = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::env::temp_dir().join(format!("waffle-live-failing-{}.bin", std::process::id()));
    let copy = Tee { writes: Arc::default(), dropped: Arc::default(), fail_after: Some(1) };
    let (writes, dropped) = (copy.writes.clone(), copy.dropped.clone());
    record(&path, copy);
    assert!(*dropped.lock().unwrap());
    assert_eq!(writes.lock().unwrap().len(), 1, "nothing is written after the failure");
    let (process, warnings) = waffle_read::decode::decode_file(&path).unwrap();
    assert!(warnings.is_empty() && process.complete, "{warnings:?}");
    let spans: usize = process.threads.iter().map(|t| t.spans.len()).sum();
    assert_eq!(spans, 6000);
    std::fs::remove_file(&path).unwrap();
}
