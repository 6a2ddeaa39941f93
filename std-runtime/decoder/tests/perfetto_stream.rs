//! The Perfetto export streamed from files (two passes, records never held) and the export of
//! the decoded model (the same writer, fed from the model) give the same trace: the same
//! tracks, slices, instants, arguments and flow arrows, on real traces full of causality
//! (links, correlations, messages between two files as directed correlations, contexts
//! entered on other threads, detached spans, some detached after their children began), on
//! traces that lost records, and on a cut file.
//!
//! Over 400 lines because it carries its own reader of Perfetto output (`shown`) and the check
//! of the referring-only sink (`referring`) beside the scenarios they serve; they can move to
//! `tests/common/` once another test needs them.

#[path = "../../recorder/tests/common/mod.rs"]
mod common;
#[path = "../../recorder/examples/dispatch.rs"]
mod dispatch;

use common::{block_on, YieldOnce};
use prost::Message;
use std::{
    collections::{BTreeMap, HashMap},
    path::{Path, PathBuf},
    process::Command,
};
use waffle::{
    wire::{
        envelope::{FrameCrc, FrameHead, FILE_HEAD_LEN},
        FRAME_HEAD_LEN,
    },
    Context, EventId, Instrument,
};
use waffle_export::{perfetto, Files, Format};

#[path = "common/perfetto_pb.rs"]
mod pb;

/// A trace as trace_processor would show it, with nothing that depends on the order of
/// packets or on numbering: per track (named by what it shows), its slices and instants in
/// order; and the arrows flows draw, between named slices and instants.
#[derive(Debug, PartialEq)]
struct Shown {
    tracks: BTreeMap<String, Vec<String>>,
    arrows: Vec<(String, String)>,
    /// Flows that break the time-order rules: only garbled input (times gone wrong) may have
    /// them, and then both exports must have the same.
    broken: Vec<String>,
    /// The earliest and the latest time of a track event, in Unix ns.
    span: (u64, u64),
}

/// BOOTTIME, the trace processor's time.
const BOOTTIME: u32 = 6;

fn shown(bytes: &[u8]) -> Shown {
    let trace = pb::Trace::decode(bytes).expect("a Trace");
    let mut names: HashMap<(u32, u64), String> = HashMap::new();
    let mut arg_names: HashMap<(u32, u64), String> = HashMap::new();
    let mut descriptors: HashMap<u64, pb::Track> = HashMap::new();
    let mut last_ts: HashMap<u32, u64> = HashMap::new();
    // Per sequence its defaults (clock, track), and per (sequence, clock) from its snapshot:
    // whether it is incremental, its reading now, and BOOTTIME minus it.
    let mut defaults: HashMap<u32, (Option<u32>, Option<u64>)> = HashMap::new();
    let mut clocks: HashMap<(u32, u32), (bool, u64, i128)> = HashMap::new();
    // (track, ts, kind, name, args, flows out, flows in), in file order.
    let mut events = vec![];
    for p in trace.packet {
        let seq = p.seq.expect("a sequence");
        if let Some(d) = &p.defaults {
            defaults.insert(seq, (d.clock, d.event.as_ref().and_then(|e| e.track)));
        }
        if let Some(snapshot) = &p.clocks {
            // The trace processor reads nothing else of a packet with a clock snapshot.
            let boot = snapshot.clocks.iter().find(|c| c.id == Some(BOOTTIME)).expect("BOOTTIME").timestamp;
            for c in snapshot.clocks.iter().filter(|c| (64..128).contains(&c.id.unwrap())) {
                let offset = i128::from(boot.unwrap()) - i128::from(c.timestamp.unwrap());
                clocks.insert(
                    (seq, c.id.unwrap()),
                    (c.incremental == Some(true), c.timestamp.unwrap(), offset),
                );
            }
            continue;
        }
        let (clock, default_track) = defaults.get(&seq).copied().unwrap_or_default();
        if let Some(i) = p.interned {
            for n in i.names {
                names.insert((seq, n.iid.unwrap()), n.name.unwrap());
            }
            for n in i.arg_names {
                arg_names.insert((seq, n.iid.unwrap()), n.name.unwrap());
            }
        }
        if let Some(t) = p.track {
            assert!(descriptors.insert(t.uuid.unwrap(), t).is_none(), "a track described twice");
        }
        let Some(ev) = p.event else { continue };
        let ts = match p.clock.or(clock) {
            Some(id) if (64..128).contains(&id) => {
                let (incremental, now, offset) =
                    clocks.get_mut(&(seq, id)).expect("the clock's snapshot first");
                *now = if *incremental { *now + p.timestamp.unwrap() } else { p.timestamp.unwrap() };
                u64::try_from(i128::from(*now) + *offset).unwrap()
            }
            None | Some(BOOTTIME) => p.timestamp.unwrap(),
            Some(other) => panic!("timestamps on clock {other}"),
        };
        let last = last_ts.entry(seq).or_default();
        assert!(ts >= *last, "time goes back on sequence {seq}");
        *last = ts;
        let mut args: Vec<String> = ev
            .args
            .iter()
            .map(|a| {
                let value = match a {
                    pb::Arg { bool_value: Some(v), .. } => format!("{v}"),
                    pb::Arg { uint_value: Some(v), .. } => format!("{v}u"),
                    pb::Arg { int_value: Some(v), .. } => format!("{v}i"),
                    pb::Arg { double_value: Some(v), .. } => format!("{v:?}"),
                    pb::Arg { string_value: Some(v), .. } => format!("{v:?}"),
                    _ => panic!("an argument without a value"),
                };
                format!("{}={value}", arg_names[&(seq, a.name_iid.unwrap())])
            })
            .collect();
        args.sort();
        let name = ev.name_iid.map(|i| names[&(seq, i)].clone());
        events.push((
            ev.track.or(default_track).expect("a track"),
            ts,
            ev.kind.unwrap(),
            name,
            args.join(" "),
            ev.flow_ids,
            ev.terminating,
        ));
    }
    // Tracks by what they show: processes by name and pid, threads by tid and name within
    // theirs, detached spans' tracks by name and begin time within theirs.
    let mut first_ts: HashMap<u64, u64> = HashMap::new();
    for e in &events {
        first_ts.entry(e.0).or_insert(e.1);
    }
    let times = events.iter().map(|e| e.1);
    let span = (times.clone().min().unwrap_or(0), times.max().unwrap_or(0));
    let key = |uuid: u64| -> String {
        let d = &descriptors[&uuid];
        let process = |uuid: u64| {
            let p = descriptors[&uuid].process.as_ref().expect("a process track");
            format!("{} (pid {})", p.name.as_deref().unwrap_or(""), p.pid.unwrap())
        };
        match (&d.process, &d.thread) {
            (Some(_), _) => process(uuid),
            (_, Some(t)) => {
                format!("{} / thread {} {:?}", process(d.parent.unwrap()), t.tid.unwrap(), t.name)
            }
            _ => format!("{} / {:?} at {:?}", process(d.parent.unwrap()), d.name, first_ts.get(&uuid)),
        }
    };
    let mut tracks: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut stacks: HashMap<u64, Vec<String>> = HashMap::new();
    let mut flowing = vec![];
    for (track, ts, kind, name, args, out, into) in events {
        let k = key(track);
        let stack = stacks.entry(track).or_default();
        let line = match kind {
            1 => {
                let name = name.expect("a named slice");
                stack.push(name.clone());
                format!("{ts} begin {name} [{args}] depth {}", stack.len())
            }
            2 => format!("{ts} end {} [{args}]", stack.pop().expect("an open slice")),
            3 => format!("{ts} instant {} [{args}] in {:?}", name.expect("a named instant"), stack.last()),
            other => panic!("event type {other}"),
        };
        if !out.is_empty() || !into.is_empty() {
            flowing.push((ts, format!("{k}: {line}"), out, into));
        }
        tracks.entry(k).or_default().push(line);
    }
    assert!(stacks.values().all(Vec::is_empty), "slices never ended");
    // trace_processor's flow rules, in time order (ties in file order).
    flowing.sort_by_key(|f| f.0);
    let (mut active, mut freed, mut arrows) = (HashMap::new(), std::collections::HashSet::new(), vec![]);
    let mut broken = vec![];
    let mut uses: HashMap<u64, usize> = HashMap::new();
    for (_, what, out, into) in &flowing {
        for f in out.iter().chain(into) {
            *uses.entry(*f).or_default() += 1;
        }
        for f in out {
            if freed.contains(f) {
                broken.push(format!("flow used at {what} after it ended"));
            } else if let Some(from) = active.insert(*f, what.clone()) {
                arrows.push((from, what.clone()));
            }
        }
        for f in into {
            match active.remove(f) {
                Some(from) => arrows.push((from, what.clone())),
                None => broken.push(format!("flow ends at {what} before it starts")),
            }
            freed.insert(*f);
        }
    }
    // A chain through spans matched by order is never terminated (its id is used by nothing
    // else); every other flow ends.
    let open = active.into_values().filter(|from| !from.contains("waffle.matched_by_order="));
    broken.extend(open.map(|from| format!("flow from {from} never ends")));
    assert!(uses.values().all(|&n| n >= 2), "a flow id on a single event");
    arrows.sort();
    broken.sort();
    Shown { tracks, arrows, broken, span }
}

/// Both exports of `files`, shown; also checks the streamed export's summary and warnings
/// against the model's, and (`exact_times`, for files whose threads' times never run
/// backwards) that the model's export spans exactly the model's times. Garbled deltas can make
/// a thread's time run backwards, and the writer then holds a packet at its sequence's last
/// time, so its first time may be later than the model's earliest.
fn both(files: &[PathBuf], exact_times: bool) -> (Shown, Shown) {
    assert_referring_learns_the_same(files);
    let decoded = waffle_read::decode::decode_files(files).expect("decode");
    let mut model = Vec::new();
    perfetto::write(&decoded.trace, &mut model).expect("write the model");
    let mut read = 0u64;
    let export = Files::scan(files, Format::Perfetto, &mut |n| read += n).expect("scan");
    assert_eq!(export.warnings(), decoded.warnings);
    let stats: Vec<_> = decoded.trace.processes.iter().map(waffle_read::decode::ProcessStats::of).collect();
    assert_eq!(export.processes(), stats);
    let mut streamed = Vec::new();
    export.write(&mut streamed, &mut |n| read += n).expect("write the stream");
    let size: u64 = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum();
    assert_eq!(read, 2 * size, "progress counts every byte of both passes");
    let (streamed, model) = (shown(&streamed), shown(&model));
    // Times are the model's Unix ns, through the sequences' clocks: the earliest item begins
    // the trace, and the trace ends with the latest end (or item, if later).
    let threads = decoded.trace.processes.iter().flat_map(|p| &p.threads);
    let begins = threads
        .clone()
        .flat_map(|t| t.spans.iter().map(|s| s.start_ns).chain(t.events.iter().map(|e| e.ts_ns)));
    let ends = threads.flat_map(|t| t.spans.iter().map(|s| s.end_ns).chain(t.events.iter().map(|e| e.ts_ns)));
    if let (Some(first), Some(last), true) = (begins.min(), ends.max(), exact_times) {
        assert_eq!(model.span, (first, last), "the model's export is on the model's times");
    }
    (streamed, model)
}

/// What a sink that is not handed every item learns of a file, next to what the same file's
/// every item says: the number of spans and events, the ids that exist, and per referenced id
/// its children that do not sit inside it on their track and whether it is detached.
mod referring {
    use std::collections::BTreeMap;
    use waffle_read::decode::stream::{FileEnd, Header, Item, Sink};

    #[derive(Debug, Default, PartialEq)]
    pub struct Learned {
        pub spans: u64,
        pub events: u64,
        pub ids: Vec<u64>,
        /// id -> (children off its track, detached)
        pub refs: BTreeMap<u64, (u32, bool)>,
    }

    impl Learned {
        fn child(&mut self, parent: u64, n: u32) {
            self.refs.entry(parent).or_default().0 += n;
        }
    }

    /// Handed every item: follows each thread's open spans itself.
    #[derive(Default)]
    pub struct Every {
        pub learned: Learned,
        /// Per thread, its open spans: (id, items held, parent if it holds this one).
        stacks: Vec<Vec<(u64, u32, Option<u64>)>>,
    }

    impl Every {
        fn item(&mut self, t: usize, r: &Item<'_>) -> Option<u64> {
            if r.id != 0 {
                self.learned.ids.push(r.id);
            }
            let stack = &mut self.stacks[t];
            let parent = r.parent?;
            match stack.iter_mut().rev().find(|e| e.0 == parent) {
                Some(e) => {
                    e.1 += 1;
                    Some(parent)
                }
                None => {
                    self.learned.child(parent, 1);
                    None
                }
            }
        }
    }

    impl Sink for Every {
        type Span = ();
        fn process(&mut self, _: &str, _: &Header) {
            self.stacks.clear();
        }
        fn thread(&mut self, _: usize, _: u32) {
            self.stacks.push(Vec::new());
        }
        fn thread_named(&mut self, _: usize, _: u64, _: &str) {}
        fn span_begin(&mut self, t: usize, r: &Item<'_>) {
            self.learned.spans += 1;
            let holder = self.item(t, r);
            self.stacks[t].push((r.id, 0, holder));
        }
        fn event(&mut self, t: usize, r: &Item<'_>) {
            self.learned.events += 1;
            self.item(t, r);
        }
        fn span_end(&mut self, t: usize, _: (), _: u64, _: bool) {
            self.stacks[t].pop();
        }
        fn detach(&mut self, t: usize, _: (), id: u64) {
            let stack = &mut self.stacks[t];
            let Some(pos) = stack.iter().rposition(|e| e.0 == id) else { return };
            let (_, held, holder) = stack.remove(pos);
            let e = self.learned.refs.entry(id).or_default();
            (e.0, e.1) = (e.0 + held, true);
            if let Some(h) = holder {
                if let Some(p) = stack.iter_mut().rev().find(|e| e.0 == h) {
                    p.1 -= 1;
                    self.learned.child(h, 1);
                }
            }
        }
        fn detached_end(&mut self, _: usize, _: (), _: u64, _: bool) {}
        fn finish(&mut self, _: &FileEnd) {}
    }

    /// Handed only the items that refer elsewhere.
    #[derive(Default)]
    pub struct Referring {
        pub learned: Learned,
    }

    impl Sink for Referring {
        type Span = ();
        const FIELDS: bool = false;
        const EVERY_ITEM: bool = false;
        fn process(&mut self, _: &str, _: &Header) {}
        fn thread(&mut self, _: usize, _: u32) {}
        fn thread_named(&mut self, _: usize, _: u64, _: &str) {}
        fn span_begin(&mut self, _: usize, r: &Item<'_>) {
            self.learned.spans += 1;
            if let (Some(p), false) = (r.parent, r.held) {
                self.learned.child(p, 1);
            }
        }
        fn event(&mut self, _: usize, r: &Item<'_>) {
            self.learned.events += 1;
            if let (Some(p), false) = (r.parent, r.held) {
                self.learned.child(p, 1);
            }
        }
        fn span_end(&mut self, _: usize, _: (), _: u64, _: bool) {
            panic!("span ends are not told to a sink not handed every item");
        }
        fn detach(&mut self, _: usize, _: (), _: u64) {}
        fn detached_end(&mut self, _: usize, _: (), _: u64, _: bool) {}
        fn skipped(&mut self, _: usize, (first, end): (u64, u64), spans: u64, events: u64) {
            self.learned.spans += spans;
            self.learned.events += events;
            self.learned.ids.extend((first..end).filter(|&id| id != 0));
        }
        fn detached_from(&mut self, _: usize, id: u64, items: u32, holder: Option<u64>) {
            let e = self.learned.refs.entry(id).or_default();
            (e.0, e.1) = (e.0 + items, true);
            if let Some(h) = holder {
                self.learned.child(h, 1);
            }
        }
        fn finish(&mut self, _: &FileEnd) {}
    }
}

/// A sink handed only the items that refer elsewhere learns what one handed every item does.
fn assert_referring_learns_the_same(files: &[PathBuf]) {
    use waffle_read::decode::run::decode_path;
    for file in files {
        let (mut every, mut referring) = (referring::Every::default(), referring::Referring::default());
        let w1 = decode_path(file, &mut every).expect("decode");
        let w2 = decode_path(file, &mut referring).expect("decode");
        assert_eq!(w1, w2, "{}: warnings", file.display());
        let (mut a, mut b) = (every.learned, referring.learned);
        a.ids.sort_unstable();
        b.ids.sort_unstable();
        // Ids that only count when they are referred to; zero counts are no reference.
        a.refs.retain(|_, r| *r != (0, false));
        b.refs.retain(|_, r| *r != (0, false));
        assert_eq!(a, b, "{}", file.display());
    }
}

fn assert_same(name: &str, files: &[PathBuf]) -> Shown {
    let (streamed, model) = both(files, true);
    for (track, lines) in &model.tracks {
        assert_eq!(streamed.tracks.get(track), Some(lines), "{name}: track {track}");
    }
    assert_eq!(streamed.tracks.len(), model.tracks.len(), "{name}: tracks");
    assert_eq!(streamed.arrows, model.arrows, "{name}: arrows");
    assert_eq!(streamed.broken, model.broken, "{name}: flows against time");
    streamed
}

/// [`assert_same`], and every flow follows the time-order rules.
fn assert_sound(name: &str, files: &[PathBuf]) -> Shown {
    let shown = assert_same(name, files);
    assert!(shown.broken.is_empty(), "{name}: {:?}", shown.broken);
    shown
}

/// The frames of a file: (kind, offset, payload length).
fn frames(bytes: &[u8]) -> Vec<(u8, usize, usize)> {
    let (mut at, mut out) = (FILE_HEAD_LEN, vec![]);
    while at + FRAME_HEAD_LEN <= bytes.len() {
        let head = FrameHead::decode(bytes[at..at + FRAME_HEAD_LEN].try_into().unwrap()).unwrap();
        out.push((head.kind, at, head.len as usize));
        at += head.frame_len() as usize;
    }
    out
}

/// Three threads with every kind of causality, in small chunks so that links and
/// correlations often land in the chunk after their item's.
fn rich(path: &Path) {
    let session = waffle_std::Config::new(path).staging_bytes(256).start().unwrap();
    let root = waffle::event!("root", note = "start");
    std::thread::scope(|s| {
        for t in 0..3u64 {
            s.spawn(move || {
                let mut prev = EventId::NULL;
                for i in 0..200u64 {
                    let name = format!("item {i}");
                    let _outer =
                        waffle::span!("outer", t, i, x = -(i as i64), f = 0.5 * i as f64, ok = i % 2 == 0);
                    let _inner = waffle::span!(
                        "inner",
                        caused_by = [root, prev, EventId::from_u64(0xdead_beef)],
                        correlate = ("round", i / 2),
                        name = name.as_str()
                    );
                    prev = waffle::event!("mark", caused_by = [prev], correlate = ("solo", t * 1000 + i), i);
                    if i % 50 == 0 {
                        let ctx = Context::current();
                        std::thread::scope(|s| {
                            s.spawn(move || {
                                let _in = ctx.enter();
                                let _helper = waffle::span!("helper", i);
                                waffle::event!("helped");
                            });
                        });
                    }
                    if i % 40 == 0 {
                        // Detached at once, and detached after a child began (its child then
                        // sits on the thread's track with an arrow from it).
                        let task = YieldOnce(false).instrument(waffle::span!("task", i));
                        let late = waffle::span!("late", i);
                        {
                            let _child = waffle::span!("child of late");
                        }
                        let late = async {
                            let _poll = waffle::span!("poll");
                        }
                        .instrument(late);
                        block_on(task);
                        block_on(late);
                    }
                }
            });
        }
    });
    session.stop().unwrap();
}

/// A producer that outruns a small queue: dropped records, stand-ins and unfinished spans.
fn lossy(path: &Path) {
    let session = waffle_std::Config::new(path)
        .queue_bytes(4 << 10)
        .staging_bytes(256)
        .drain_interval(std::time::Duration::from_millis(20))
        .start()
        .unwrap();
    std::thread::spawn(|| {
        // Long enough for several drain passes, each of which empties the queue once.
        let until = std::time::Instant::now() + std::time::Duration::from_millis(200);
        for i in 0u64.. {
            if i % 64 == 0 && std::time::Instant::now() > until {
                break;
            }
            let _a = waffle::span!("a", i);
            let _b = waffle::span!("b");
            waffle::event!("e", i);
        }
    })
    .join()
    .unwrap();
    let stats = session.stop().unwrap();
    assert!(stats.dropped > 0, "the queue was meant to overflow");
}

/// Two ranks as two files: rank 0 sends three messages (`mpi.message>` on each send span),
/// rank 1 receives them (`mpi.message<` on an event inside each receive span), in the order
/// they were sent but in chunks of their own.
fn messages(dir: &Path) -> [PathBuf; 2] {
    let files = [dir.join("sender.bin"), dir.join("receiver.bin")];
    for (rank, file) in files.iter().enumerate() {
        let session =
            waffle_std::Config::new(file).label("rank", rank.to_string()).staging_bytes(256).start().unwrap();
        for k in 0..3u64 {
            let message = 0x4d53_4700 + k;
            if rank == 0 {
                let _send =
                    waffle::span!("MPI_Send", peer = 1i64, tag = 0i64, correlate = ("mpi.message>", message));
            } else {
                let _recv = waffle::span!("MPI_Recv", peer = 0i64, tag = 0i64);
                waffle::event!("MPI message received", peer = 0i64, correlate = ("mpi.message<", message));
            }
        }
        session.stop().unwrap();
    }
    files
}

#[test]
fn streamed_and_model_exports_show_the_same_trace() {
    let dir = std::env::temp_dir().join(format!("waffle-perfetto-stream-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    // First: stream slots keep their queue size when a later session reuses them.
    let file = dir.join("lossy.bin");
    lossy(&file);
    assert_sound("lossy", &[file]);

    let file = dir.join("rich.bin");
    rich(&file);
    let shown = assert_sound("rich", std::slice::from_ref(&file));
    let arrows_into = |name: &str| shown.arrows.iter().filter(|(_, to)| to.contains(name)).count();
    assert!(arrows_into("begin late") > 0 && arrows_into("begin child of late") > 0, "late detach");
    assert!(arrows_into("begin helper") > 0 && arrows_into("begin inner") > 0);

    // Records garbled inside intact frames (the CRC made right again): whatever the decoder
    // makes of them, both exports nest, put every flow id on two events or more, and agree on
    // the summary and warnings. (They may place items differently where garbled deltas make a
    // stream's time run backwards: the model orders a thread by time, the stream keeps its
    // record order.)
    let bytes = std::fs::read(&file).unwrap();
    let data: Vec<(usize, usize)> =
        frames(&bytes).into_iter().filter(|&(kind, ..)| kind == 4).map(|(_, at, len)| (at, len)).collect();
    let mut x = 0x853c_49e6_748f_ea9bu64;
    for round in 0..25 {
        let mut damaged = bytes.clone();
        for _ in 0..3 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (at, len) = data[(x % data.len() as u64) as usize];
            let pos = at + 5 + (x >> 20) as usize % len;
            damaged[pos] ^= 1 << ((x >> 8) % 8);
            let mut crc = FrameCrc::new(damaged[at..at + 5].try_into().unwrap());
            crc.update(&damaged[at + 5..at + 5 + len]);
            damaged[at + 5 + len..at + 9 + len].copy_from_slice(&crc.tail());
        }
        let garbled = dir.join(format!("garbled-{round}.bin"));
        std::fs::write(&garbled, &damaged).unwrap();
        both(std::slice::from_ref(&garbled), false);
    }

    // Cut in the middle: spans left open end unfinished, the rest of the file is lost.
    let bytes = std::fs::read(&file).unwrap();
    let cut = dir.join("cut.bin");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    assert_sound("cut", &[cut]);

    let file = dir.join("dispatch.bin");
    let session = waffle_std::start(&file).unwrap();
    dispatch::run_pool(24, 3);
    session.stop().unwrap();
    assert_sound("dispatch", &[file]);

    // One arrow per message, from the send on one process to the receive on the other.
    let shown = assert_sound("messages", &messages(&dir));
    let sent =
        |(from, to): &(String, String)| from.contains("MPI_Send") && to.contains("MPI message received");
    assert_eq!(
        (shown.arrows.len(), shown.arrows.iter().filter(|a| sent(a)).count()),
        (3, 3),
        "{:?}",
        shown.arrows
    );

    let out = Command::new(common::example("causal_pair")).arg(&dir).output().expect("run causal_pair");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_sound("causal_pair", &[dir.join("a.bin"), dir.join("b.bin")]);

    let nan = dir.join("nan");
    let out = Command::new(common::example("nan_allreduce")).arg(&nan).output().expect("run nan_allreduce");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown = assert_sound("nan_allreduce", &[nan.join("rank0.bin"), nan.join("rank1.bin")]);
    assert!(!shown.arrows.is_empty());
    std::fs::remove_dir_all(&dir).ok();
}
