//! TAIL frames (records a thread had staged and not pushed) as the decoder resolves them, on
//! hand-made files: superseded by the later DATA chunk that holds the same records (no record
//! twice), decoded at the end of the file or before END, decoded before a different chunk of
//! its stream, replaced by a newer copy of the same chunk. Each file is decoded to the model and
//! exported to Perfetto both from the model and in two streamed passes: all three see the same
//! spans, and the streamed first pass counts what the model holds. A sink that decodes TAILs
//! when it reads them (`Sink::EAGER_TAILS`, as follow mode does) sees the same spans too.

#[path = "common/hand_made.rs"]
mod hand_made;
#[path = "common/perfetto_pb.rs"]
mod pb;

use hand_made::{chunk, data, file, Bytes};
use prost::Message;
use std::{collections::HashMap, path::PathBuf};
use waffle::wire::{frame, FramePayload, TailHead};
use waffle_export::{perfetto, Files, Format};
use waffle_read::decode::{
    decode_files, run,
    stream::{FileEnd, Header, Item},
    ProcessStats, Sink,
};
use waffle_read::reader::FrameReader;

/// A SPAN_BEGIN of callsite 0 (span `s`, whose `text` field names it here).
fn begin(text: &str) -> Vec<u8> {
    let mut r = Bytes::default();
    r.bytes(&[0x01]).varint(0).varint(2).str(text);
    r.0
}

/// A SPAN_END.
fn end() -> Vec<u8> {
    vec![0x02, 0x02]
}

/// A TAIL payload of stream 0: one chunk.
fn tail(chunk: Vec<u8>) -> Vec<u8> {
    [TailHead { stream: 0 }.encode(), chunk].concat()
}

/// A span as the model shows it: its `text`, its parent's `text`, whether it ended.
type Seen = (String, Option<String>, bool);

/// Decodes `frames` (after the hand-made preamble) every way; returns the model's spans, in
/// order, and checks the warnings are none and both Perfetto exports show the same slices.
fn decode(name: &str, frames: &[(u8, Vec<u8>)]) -> (Vec<Seen>, bool) {
    let path: PathBuf = std::env::temp_dir().join(format!("waffle-tail-{}-{name}.bin", std::process::id()));
    std::fs::write(&path, file(frames)).unwrap();
    let decoded = decode_files(&[&path]).expect("decode");
    assert!(decoded.warnings.is_empty(), "{name}: {:?}", decoded.warnings);
    let p = &decoded.trace.processes[0];
    let text = |s: &waffle_read::model::Span| format!("{:?}", s.fields[0]);
    let by_id: HashMap<u64, String> =
        p.threads.iter().flat_map(|t| &t.spans).map(|s| (s.id, text(s))).collect();
    let spans: Vec<Seen> = p
        .threads
        .iter()
        .flat_map(|t| &t.spans)
        .map(|s| (text(s), s.parent.and_then(|id| by_id.get(&id).cloned()), s.ended))
        .collect();

    // Decoded by a sink that takes TAILs as they come, and by the same sink holding them.
    for eager in [kept::<true>(&path), kept::<false>(&path)] {
        assert_eq!(eager, spans, "{name}: a sink with eager TAILs");
    }

    // Perfetto from the model, and streamed in two passes from the file.
    let mut model = Vec::new();
    perfetto::write(&decoded.trace, &mut model).unwrap();
    let export = Files::scan(&[&path], Format::Perfetto, &mut |_| {}).expect("first pass");
    assert_eq!(export.processes(), vec![ProcessStats::of(p)], "{name}: the first pass counts the model's");
    let mut streamed = Vec::new();
    export.write(&mut streamed, &mut |_| {}).expect("second pass");
    let (a, b) = (slices(&model), slices(&streamed));
    assert_eq!(a, b, "{name}: the model's and the streamed export");
    assert_eq!(a.len(), spans.len(), "{name}: one slice per span");
    (spans, p.complete)
}

/// Each span's text, parent and whether it ended, in begin order; with `EAGER`, TAIL frames are
/// decoded when read.
#[derive(Default)]
struct Kept<const EAGER: bool>(Vec<(u64, String, Option<u64>, bool)>);

impl<const EAGER: bool> Sink for Kept<EAGER> {
    type Span = usize;
    const EAGER_TAILS: bool = EAGER;
    fn process(&mut self, _source: &str, _header: &Header) {}
    fn thread(&mut self, _thread: usize, _stream: u32) {}
    fn thread_named(&mut self, _thread: usize, _tid: u64, _name: &str) {}
    fn span_begin(&mut self, _thread: usize, s: &Item<'_>) -> usize {
        let text = format!("{:?}", s.fields.iter().next().unwrap().to_value());
        self.0.push((s.id, text, s.parent, false));
        self.0.len() - 1
    }
    fn event(&mut self, _thread: usize, _event: &Item<'_>) {}
    fn span_end(&mut self, _thread: usize, span: usize, _ticks: u64, ended: bool) {
        self.0[span].3 = ended;
    }
    fn detach(&mut self, _thread: usize, _span: usize, _id: u64) {}
    fn detached_end(&mut self, _thread: usize, span: usize, _ticks: u64, ended: bool) {
        self.0[span].3 = ended;
    }
    fn finish(&mut self, _end: &FileEnd) {}
}

/// The spans of `path` as a [`Kept`] sink sees them, shaped as the model's are compared.
fn kept<const EAGER: bool>(path: &std::path::Path) -> Vec<Seen> {
    let mut sink = Kept::<EAGER>::default();
    let warnings = run::decode(FrameReader::open(path).unwrap(), path, &mut sink).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let by_id: HashMap<u64, String> = sink.0.iter().map(|(id, text, _, _)| (*id, text.clone())).collect();
    let parent = |p: &Option<u64>| p.and_then(|id| by_id.get(&id).cloned());
    sink.0.iter().map(|(_, text, p, ended)| (text.clone(), parent(p), *ended)).collect()
}

/// The names of the slices a Perfetto trace begins, sorted (`s`: every span here has it).
fn slices(bytes: &[u8]) -> Vec<String> {
    let trace = pb::Trace::decode(bytes).expect("a Trace");
    let mut names: HashMap<(u32, u64), String> = HashMap::new();
    let mut out = vec![];
    for p in trace.packet {
        let seq = p.seq.unwrap_or(0);
        for n in p.interned.map(|i| i.names).unwrap_or_default() {
            names.insert((seq, n.iid.unwrap()), n.name.unwrap());
        }
        if let Some(ev) = p.event.filter(|e| e.kind == Some(1)) {
            let args: Vec<_> = ev.args.iter().filter_map(|a| a.string_value.clone()).collect();
            out.push(format!("{}{args:?}", names[&(seq, ev.name_iid.unwrap())]));
        }
    }
    out.sort();
    out
}

fn seen(text: &str, parent: Option<&str>, ended: bool) -> Seen {
    let q = |s: &str| format!("{:?}", waffle_read::model::Value::Str(s.into()));
    (q(text), parent.map(q), ended)
}

#[test]
fn a_tail_superseded_by_its_chunk_is_not_decoded_twice() {
    let copy = tail(chunk(1, 0, 0, 1, &begin("a")));
    let full = data(&[chunk(1, 0, 0, 3, &[begin("a"), begin("b"), end()].concat())]);
    let (spans, _) = decode("superseded", &[(frame::TAIL, copy), (frame::DATA, full)]);
    assert_eq!(spans, vec![seen("a", None, false), seen("b", Some("a"), true)]);
}

#[test]
fn a_tail_at_the_end_of_the_file_or_before_end_is_decoded() {
    let copy = || tail(chunk(1, 0, 0, 2, &[begin("a"), begin("b")].concat()));
    let (spans, complete) = decode("eof", &[(frame::TAIL, copy())]);
    assert_eq!(spans, vec![seen("a", None, false), seen("b", Some("a"), false)]);
    assert!(!complete);
    let end = waffle::wire::End::default().encode();
    let (spans, complete) = decode("end", &[(frame::TAIL, copy()), (frame::END, end)]);
    assert_eq!(spans, vec![seen("a", None, false), seen("b", Some("a"), false)]);
    assert!(complete);
}

#[test]
fn a_tail_followed_by_another_chunk_is_decoded_first() {
    // The chunk after the copied one: first id 2, `a` open beneath it.
    let copy = tail(chunk(1, 0, 0, 1, &begin("a")));
    let next = data(&[chunk(2, 1, 0, 3, &[begin("b"), end(), end()].concat())]);
    let (spans, _) = decode("other", &[(frame::TAIL, copy), (frame::DATA, next)]);
    assert_eq!(spans, vec![seen("a", None, true), seen("b", Some("a"), true)]);
}

#[test]
fn a_newer_tail_of_the_same_chunk_replaces_the_older() {
    let older = tail(chunk(1, 0, 0, 1, &begin("a")));
    let newer = tail(chunk(1, 0, 0, 2, &[begin("a"), begin("b")].concat()));
    let (spans, _) = decode("newer", &[(frame::TAIL, older), (frame::TAIL, newer)]);
    assert_eq!(spans, vec![seen("a", None, false), seen("b", Some("a"), false)]);
}
