//! Follow mode inside the traced program: [`Live`] is the writer `waffle_std::Config::live`
//! hands a copy of the trace to, from the collector thread, a pass's whole frames per write.
//!
//! A write never waits: the bytes go into a bounded hand-off and a thread of our own decodes
//! them (the same pass as `waffle-decode --follow`) and feeds the sender. When the hand-off is
//! full, the DATA and TAIL frames of that write are dropped and counted
//! ([`Summary::lost_frames`]); the frames that describe the file (header, callsites, streams,
//! clock, end) are always kept, so what follows still decodes. Dropping the writer (the
//! recorder does at stop, after the END frame) waits for the rest to be sent, within
//! [`Options::stop_wait`] if the backend is down; a summary goes to stderr if anything was lost
//! or the backend was away.

use std::{
    collections::VecDeque,
    io::{self, Read, Write},
    path::Path,
    sync::{Arc, Condvar, Mutex, MutexGuard},
    thread,
};

use waffle_wire::{envelope::FrameHead, frame, FRAME_HEAD_LEN};

use super::{queue, sink, FileSummary, Options, Summary};
use crate::{
    decode::run, reader::FrameReader, send::poster::Poster, send::Endpoint, spans::one_pass::OnePass,
};

/// Bytes the hand-off holds before it drops records.
const HANDOFF_BYTES: usize = 64 << 20;

struct Inner {
    chunks: VecDeque<Vec<u8>>,
    bytes: usize,
    closed: bool,
    lost_frames: u64,
}

/// The hand-off from the collector thread to the decoding thread.
struct Handoff {
    inner: Mutex<Inner>,
    wake: Condvar,
}

impl Handoff {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Reads the hand-off as one byte stream, waiting for more until it is closed.
struct HandoffReader {
    handoff: Arc<Handoff>,
    chunk: Vec<u8>,
    pos: usize,
}

impl Read for HandoffReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.chunk.len() {
            let mut g = self.handoff.lock();
            loop {
                if let Some(chunk) = g.chunks.pop_front() {
                    g.bytes -= chunk.len();
                    (self.chunk, self.pos) = (chunk, 0);
                    break;
                }
                if g.closed {
                    return Ok(0);
                }
                g = self.handoff.wake.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        }
        let n = out.len().min(self.chunk.len() - self.pos);
        out[..n].copy_from_slice(&self.chunk[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// The frames of `bytes` (whole frames) that are not records; how many were.
fn without_records(bytes: &[u8]) -> (Vec<u8>, u64) {
    let (mut kept, mut dropped, mut at) = (Vec::new(), 0, 0);
    while bytes.len() - at >= FRAME_HEAD_LEN {
        let mut head = [0u8; FRAME_HEAD_LEN];
        head.copy_from_slice(&bytes[at..at + FRAME_HEAD_LEN]);
        let Ok(head) = FrameHead::decode(head) else { break };
        let end = (at + head.frame_len() as usize).min(bytes.len());
        if head.kind == frame::DATA || head.kind == frame::TAIL {
            dropped += 1;
        } else {
            kept.extend_from_slice(&bytes[at..end]);
        }
        at = end;
    }
    (kept, dropped)
}

/// Where the summary of a [`Live`] lands once it has finished.
#[derive(Clone, Default)]
pub struct LiveReport(Arc<Mutex<Option<Summary>>>);

impl LiveReport {
    /// The summary, once the session has stopped and the rest was sent.
    pub fn get(&self) -> Option<Summary> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The writer `waffle_std::Config::live` takes: see the module docs.
pub struct Live {
    handoff: Arc<Handoff>,
    started: bool,
    thread: Option<thread::JoinHandle<()>>,
    report: LiveReport,
}

/// A [`Live`] sending to `target` (`otlp=http://127.0.0.1:4318`, or `zipkin=URL`) with the
/// default options.
pub fn live(target: &str) -> Result<Live, String> {
    live_with(target.parse()?, Options::default())
}

/// A [`Live`] sending to `target` as `options` say.
pub fn live_with(target: Endpoint, options: Options) -> Result<Live, String> {
    let inner = Inner { chunks: VecDeque::new(), bytes: 0, closed: false, lost_frames: 0 };
    let handoff = Arc::new(Handoff { inner: Mutex::new(inner), wake: Condvar::new() });
    let report = LiveReport::default();
    let (h, r) = (handoff.clone(), report.clone());
    let thread = thread::Builder::new()
        .name("waffle-live".into())
        .spawn(move || run(h, target, &options, &r))
        .map_err(|e| format!("cannot start the live export thread: {e}"))?;
    Ok(Live { handoff, started: false, thread: Some(thread), report })
}

impl Live {
    /// Where the summary will be once the session stops.
    pub fn report(&self) -> LiveReport {
        self.report.clone()
    }
}

/// The decoding thread: the hand-off decoded into the queue, sent, summed up.
fn run(handoff: Arc<Handoff>, target: Endpoint, options: &Options, report: &LiveReport) {
    let say = |line: String| eprintln!("waffle: live export: {line}");
    let queue = queue::Queue::new(options.buffer_spans, options.batch_spans);
    let protocol = target.protocol;
    let poster = Poster::new(target, queue::one_attempt(options));
    let path = Path::new("(live)");
    let (mut summary, file) = thread::scope(|s| {
        let sender = s.spawn(|| queue::send(&queue, poster, options, &say));
        let mut pass = OnePass::new();
        let mut writer = sink::LiveWriter::new(Some(queue.clone()), protocol, None);
        let input = HandoffReader { handoff: handoff.clone(), chunk: Vec::new(), pos: 0 };
        let result = FrameReader::new(input, path)
            .and_then(|r| run::decode(r, path, &mut pass.assembler(&mut writer)));
        let mut file = FileSummary { source: path.to_owned(), ..FileSummary::default() };
        match result {
            Ok(warnings) => file.warnings = warnings,
            Err(e) => file.error = Some(e.to_string()),
        }
        super::record(&mut file, &pass, &writer);
        queue.close();
        (sender.join().expect("the sender thread panicked"), file)
    });
    summary.files = vec![file];
    summary.lost_frames = handoff.lock().lost_frames;
    if summary.lost() > 0 || summary.lost_frames > 0 || summary.outages > 0 {
        say(summary.to_string());
    }
    *report.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(summary);
}

impl Write for Live {
    /// Takes a copy of whole frames (the first write starts with the file head); never waits.
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut g = self.handoff.lock();
        let first = !std::mem::replace(&mut self.started, true);
        if first || g.bytes + bytes.len() <= HANDOFF_BYTES {
            g.bytes += bytes.len();
            g.chunks.push_back(bytes.to_vec());
        } else {
            let (kept, dropped) = without_records(bytes);
            g.lost_frames += dropped;
            g.bytes += kept.len();
            g.chunks.push_back(kept);
        }
        self.handoff.wake.notify_one();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Live {
    /// The trace is closed: the rest is decoded and sent (see the module docs).
    fn drop(&mut self) {
        self.handoff.lock().closed = true;
        self.handoff.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use waffle_wire::envelope::encode_frame;

    #[test]
    fn a_full_handoff_keeps_the_frames_that_describe_the_trace() {
        let frames: Vec<(u8, usize)> = vec![
            (frame::CALLSITES, 20),
            (frame::DATA, 300),
            (frame::STREAM, 9),
            (frame::TAIL, 40),
            (frame::END, 4),
        ];
        let bytes: Vec<u8> =
            frames.iter().flat_map(|&(k, n)| encode_frame(k, &vec![1; n]).unwrap()).collect();
        let (kept, dropped) = without_records(&bytes);
        let want: Vec<u8> = [frame::CALLSITES, frame::STREAM, frame::END]
            .iter()
            .flat_map(|&k| encode_frame(k, &vec![1; frames.iter().find(|f| f.0 == k).unwrap().1]).unwrap())
            .collect();
        assert_eq!((kept, dropped), (want, 2));
    }
}
