//! `waffle-decode --follow FILE -o OUT.json`: Chrome JSON appended while a session in this
//! process records. While it runs, the file read at any moment parses once `]` is added and
//! already holds the spans that ended; at the end it parses as it is and holds exactly the
//! spans (name, pid, tid; start and duration in Unix ns, but for the refined clock) the file
//! export (`waffle-decode FILE -o x.chrome.json`) writes. With `--send` too, on two closed
//! copies of one file: the backend and the file both get every span, and the copy's process
//! (whose pid is taken) gets a fresh pid. A path that cannot be created, and a format other
//! than JSON, are clear errors.

#[path = "common/children.rs"]
mod children;
#[path = "common/otlp_sink.rs"]
#[allow(dead_code)] // follow.rs uses the rest
mod otlp_sink;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use children::{decode, dir, finish};
use otlp_sink::OtlpSink;
use serde_json::Value as Json;

/// One recording session at a time in this process.
static SESSION: Mutex<()> = Mutex::new(());

/// The growing file with `]` added, parsed; a read that caught a write half done is tried
/// again, and three in a row fail the test.
fn read_growing(path: &Path) -> Vec<Json> {
    let mut last = String::new();
    for _ in 0..3 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Ok(Json::Array(events)) = serde_json::from_str(&format!("{text}]")) {
            return events;
        }
        last = text;
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("{} does not parse with `]` added:\n{last}", path.display());
}

/// A span as both outputs give it: name, pid, tid, start and duration in Unix ns.
type Slice = (String, i64, i64, i64, i64);

/// The `X` events of `events`, with `ts` counted from `origin` (Unix ns).
fn slices(events: &[Json], origin: i64) -> BTreeSet<Slice> {
    let ns = |v: &Json| (v.as_f64().unwrap() * 1000.0).round() as i64;
    events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_owned();
            (
                name,
                e["pid"].as_i64().unwrap(),
                e["tid"].as_i64().unwrap(),
                origin + ns(&e["ts"]),
                ns(&e["dur"]),
            )
        })
        .collect()
}

fn has_span(events: &[Json], id: &str) -> bool {
    events.iter().any(|e| e["ph"] == "X" && e["args"]["waffle.id"] == id)
}

#[test]
fn the_growing_file_parses_with_a_closing_bracket_and_ends_as_the_file_export() {
    let _one = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let d = dir("grow");
    let (path, out) = (d.join("run.bin"), d.join("live.json"));
    let child =
        decode(&["--follow", path.to_str().unwrap(), "-o", out.to_str().unwrap(), "--batch-delay", "100"]);
    std::thread::sleep(Duration::from_millis(200));
    let session = waffle_std::Config::new(&path).start().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        for i in 0..30u64 {
            let id = waffle::span!("step", i = i).id();
            tx.send((format!("{:016x}", id.to_u64()), Instant::now())).unwrap();
            let busy = Instant::now();
            while busy.elapsed() < Duration::from_millis(50) {
                let _filler = waffle::span!("filler");
                waffle::event!("tick");
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    });
    // Each read of the file serves every span that ended before it: looking for them one at a
    // time, the reads (each parses the whole file, which grows) fell behind the spans on a
    // loaded machine and measured their own backlog rather than the follower.
    let (mut reads, mut worst) = (0, Duration::ZERO);
    let (mut pending, mut done): (Vec<(String, Instant)>, bool) = (Vec::new(), false);
    while !(done && pending.is_empty()) {
        loop {
            match rx.try_recv() {
                Ok(span) => pending.push(span),
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    done = true;
                    break;
                }
            }
        }
        let events = read_growing(&out);
        reads += 1;
        pending.retain(|(id, ended)| {
            if has_span(&events, id) {
                worst = worst.max(ended.elapsed());
                return false;
            }
            assert!(ended.elapsed() < Duration::from_secs(5), "span {id} not in the file 5 s after its end");
            true
        });
        std::thread::sleep(Duration::from_millis(20));
    }
    worker.join().unwrap();
    // From the span's end: the recorder's staging and drain, the tail's poll (20 ms), the
    // batch delay (100 ms) and this loop's (20 ms); 3 s leaves room for a loaded machine.
    assert!(worst < Duration::from_secs(3), "a span reached the file {worst:?} after its end");
    assert!(!std::fs::read_to_string(&out).unwrap().trim_end().ends_with(']'), "closed before the end");
    session.stop().unwrap();
    let done = finish(child, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    assert!(stderr.contains("wrote ") && stderr.contains("live.json (chrome"), "{stderr}");

    let Json::Array(live) = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap() else {
        panic!("not a JSON array")
    };
    let origin = live.iter().find(|e| e["name"] == "waffle_origin").expect("the origin event");
    let origin: i64 = origin["args"]["unix_ns"].as_str().unwrap().parse().unwrap();
    let whole = d.join("whole.chrome.json");
    let exported =
        finish(decode(&[path.to_str().unwrap(), "-o", whole.to_str().unwrap()]), Duration::from_secs(20));
    assert!(exported.status.success(), "{}", String::from_utf8_lossy(&exported.stderr));
    let doc: Json = serde_json::from_str(&std::fs::read_to_string(&whole).unwrap()).unwrap();
    let file_origin: i64 = doc["otherData"]["waffle_origin_unix_ns"].as_str().unwrap().parse().unwrap();
    assert!(origin <= file_origin, "the session starts before its first record");
    let want = slices(doc["traceEvents"].as_array().unwrap(), file_origin);
    let got = slices(&live, origin);
    assert!(want.len() > 30 * 20, "{} spans exported", want.len());
    assert_eq!(got.len(), want.len());
    // Same rows and names, in the same order on each; times equal but for the clock: spans
    // here were timed with the header's calibration (measured over 2 ms at start, shared
    // anchor), the file export with the CLOCK frame written at stop. Allowed: 0.1 % of the
    // time since the anchor (a rate error the 2 ms measurement can have), and 1 µs.
    let mut drift = 0;
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((&g.0, g.1, g.2), (&w.0, w.1, w.2), "{g:?} against {w:?}");
        let near = |a: i64, b: i64, span: i64| (a - b).abs() <= 1_000 + span / 1_000;
        assert!(near(g.3, w.3, w.3 - origin), "start {g:?} against {w:?}");
        assert!(near(g.4, w.4, w.4), "duration {g:?} against {w:?}");
        drift = drift.max((g.3 - w.3).abs());
    }
    // Events are instants, as in the file export; process and thread rows are named.
    let instants = |events: &[Json]| events.iter().filter(|e| e["ph"] == "i" && e["name"] == "tick").count();
    assert_eq!(instants(&live), instants(doc["traceEvents"].as_array().unwrap()));
    assert!(live.iter().any(|e| e["ph"] == "M" && e["name"] == "process_name"));
    assert!(live.iter().any(|e| e["ph"] == "M" && e["name"] == "thread_name"));
    eprintln!("{reads} reads of the growing file; worst span end to file {worst:?}; clock drift {drift} ns");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn with_send_the_backend_and_the_file_both_get_every_span_of_two_files() {
    let d = dir("send");
    let first = d.join("first.bin");
    {
        let _one = SESSION.lock().unwrap_or_else(|e| e.into_inner());
        let session = waffle_std::start(&first).unwrap();
        for i in 0..100u64 {
            let _s = waffle::span!("both", i = i);
        }
        session.stop().unwrap();
    }
    let twin = d.join("twin.bin");
    std::fs::copy(&first, &twin).unwrap();
    let (process, _) = waffle_read::decode::decode_file(&first).unwrap();
    let ids: HashSet<String> =
        process.threads.iter().flat_map(|t| &t.spans).map(|s| format!("{:016x}", s.id)).collect();
    assert_eq!(ids.len(), 100);
    let sink = OtlpSink::start();
    let out = d.join("both.json");
    let (a, b, o) = (first.to_str().unwrap(), twin.to_str().unwrap(), out.to_str().unwrap());
    let done =
        finish(decode(&["--follow", a, b, "--send", &sink.target(), "-o", o]), Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    assert_eq!(sink.received().into_keys().collect::<HashSet<_>>(), ids, "{stderr}");
    assert!(sink.received().values().all(|&(_, n)| n == 2), "{stderr}");
    let Json::Array(events) = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap() else {
        panic!("not a JSON array")
    };
    let mut written: HashMap<String, Vec<i64>> = HashMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let id = e["args"]["waffle.id"].as_str().unwrap().to_owned();
        written.entry(id).or_default().push(e["pid"].as_i64().unwrap());
    }
    assert_eq!(written.keys().cloned().collect::<HashSet<_>>(), ids);
    let pid = i64::from(process.header.pid);
    for pids in written.values_mut() {
        pids.sort_unstable();
        assert!(pids.len() == 2 && pids[0] == pid && pids[1] > 1 << 22, "{pids:?}");
    }
    let named = events.iter().filter(|e| e["ph"] == "M" && e["name"] == "process_name").count();
    assert_eq!(named, 2);
    assert!(stderr.contains("(chrome, 200 spans and events)"), "{stderr}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_output_that_cannot_be_created_or_is_not_json_is_a_clear_error() {
    let d = dir("bad");
    let path = d.join("never.bin");
    let missing = d.join("no-such-dir").join("live.json");
    for (out, says) in [
        (missing.to_str().unwrap(), "no-such-dir/live.json: No such file or directory"),
        ("x.pftrace", "x.pftrace: --follow writes only Chrome JSON"),
    ] {
        let args = ["--follow", path.to_str().unwrap(), "-o", out, "--wait", "5"];
        let started = Instant::now();
        let done = finish(decode(&args), Duration::from_secs(10));
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert!(!done.status.success(), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(started.elapsed() < Duration::from_secs(4), "waited for the input first");
    }
    assert!(!missing.exists() && !Path::new("x.pftrace").exists());
    std::fs::remove_dir_all(&d).unwrap();
}
