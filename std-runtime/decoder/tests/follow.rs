//! Follow mode against a fake OTLP (and Zipkin) backend on 127.0.0.1 (`common/otlp_sink.rs`):
//! `waffle-decode --follow` on a file a session in this process is writing (spans arrive
//! within two seconds of their end, before the session stops; every span of the file arrives;
//! the process exits 0 once the file is closed), on a backend that goes away and comes back
//! (every span arrives or is a counted drop), on a thread that blocks after its spans (they
//! arrive while it is blocked, once each, with the parents the file export gives them), on a
//! file cut inside a frame that grows later, on two closed files at once, and on a file that
//! never appears; to Zipkin; and `Config::live`, the same from the collector thread.

#[path = "common/children.rs"]
mod children;
#[path = "common/otlp_sink.rs"]
mod otlp_sink;

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::process::Child;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use children::{decode, dir, finish};

use otlp_sink::OtlpSink;
use waffle_export::follow::{self, Options};

/// One recording session at a time in this process.
static SESSION: Mutex<()> = Mutex::new(());

/// `waffle-decode --follow ARGS...`.
fn follow(args: &[&str]) -> Child {
    decode(&[&["--follow"], args].concat())
}

/// The span ids in `path`, as the file decoder reads them (16 hex digits).
fn recorded(path: &Path) -> HashSet<String> {
    let (process, _) = waffle_read::decode::decode_file(path).unwrap();
    process.threads.iter().flat_map(|t| &t.spans).map(|s| format!("{:016x}", s.id)).collect()
}

/// The number after `label` in the summary line.
fn figure(stderr: &str, label: &str) -> u64 {
    let line = stderr.lines().find(|l| l.starts_with("followed to")).expect("a summary line");
    let at = line.find(label).unwrap_or_else(|| panic!("no `{label}` in {line}")) + label.len();
    line[at..].split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

#[test]
fn spans_arrive_while_the_file_is_written_and_the_follow_ends_with_it() {
    let _one = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let sink = OtlpSink::start();
    let d = dir("written");
    let path = d.join("run.bin");
    // Started before the file exists: it is waited for.
    let child = follow(&[path.to_str().unwrap(), "--send", &sink.target(), "--batch-delay", "100"]);
    std::thread::sleep(Duration::from_millis(200));
    let session = waffle_std::Config::new(&path).start().unwrap();
    // A thread that keeps recording (a thread that blocks has its last records sent when it
    // records again, or at stop: see the module docs of `follow`) says when each step ended.
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        for i in 0..40u64 {
            let id = waffle::span!("step", i = i).id();
            tx.send((format!("{:016x}", id.to_u64()), Instant::now())).unwrap();
            let busy = Instant::now();
            while busy.elapsed() < Duration::from_millis(50) {
                let _filler = waffle::span!("filler");
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    });
    let mut late = Vec::new();
    for (id, ended) in rx {
        match sink.wait_for(&id, Duration::from_secs(5)) {
            Some(at) => late.push(at.saturating_duration_since(ended)),
            None => panic!("span {id} did not arrive within 5 s while the session runs"),
        }
    }
    worker.join().unwrap();
    let worst = late.iter().max().unwrap();
    assert!(*worst < Duration::from_secs(2), "a span arrived {worst:?} after its end");
    session.stop().unwrap();
    let out = finish(child, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let received: HashSet<String> = sink.received().into_keys().collect();
    assert_eq!(received, recorded(&path), "{stderr}");
    assert!(sent_of(&stderr) > 40, "{stderr}");
    assert_eq!(figure(&stderr, "dropped "), 0, "{stderr}");
    assert!(stderr.contains("end to sent: p50"), "{stderr}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_backend_that_goes_away_gets_every_span_or_a_counted_drop() {
    let _one = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let sink = OtlpSink::start();
    sink.set_away(true);
    let d = dir("away");
    let path = d.join("run.bin");
    let session = waffle_std::Config::new(&path).start().unwrap();
    let target = sink.target();
    let child =
        follow(&[path.to_str().unwrap(), "--send", &target, "--batch-delay", "50", "--buffer-spans", "100"]);
    // 500 spans while the backend is away: at most 100 are held, the rest dropped.
    for i in 0..500u64 {
        let _span = waffle::span!("away", i = i);
        if i % 50 == 0 {
            std::thread::sleep(Duration::from_millis(40));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    sink.set_away(false);
    // 200 more once it is back, slowly enough that none is dropped.
    for i in 0..200u64 {
        let _span = waffle::span!("back", i = i);
        if i % 20 == 0 {
            std::thread::sleep(Duration::from_millis(30));
        }
    }
    session.stop().unwrap();
    let out = finish(child, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("is not answering") && stderr.contains("is back after"), "{stderr}");
    assert!(stderr.contains("the buffer of 100 spans is full"), "{stderr}");
    let recorded = recorded(&path);
    let received: HashSet<String> = sink.received().into_keys().collect();
    let (sent, dropped) = (sent_of(&stderr), figure(&stderr, "dropped "));
    assert!(received.is_subset(&recorded));
    assert_eq!(received.len() as u64, sent, "{stderr}");
    assert!(dropped >= 300, "{stderr}");
    assert_eq!(sent + dropped, recorded.len() as u64, "{stderr}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// The spans the summary line says were sent.
fn sent_of(stderr: &str) -> u64 {
    let line = stderr.lines().find(|l| l.starts_with("followed to")).unwrap();
    let before = &line[..line.find(" spans sent").unwrap()];
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_blocked_thread_has_its_spans_sent_while_it_is_blocked_and_once() {
    let _one = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let sink = OtlpSink::start();
    let d = dir("blocked");
    let path = d.join("run.bin");
    let session = waffle_std::Config::new(&path).start().unwrap();
    let child = follow(&[path.to_str().unwrap(), "--send", &sink.target(), "--batch-delay", "20"]);
    let (ids_tx, ids_rx) = std::sync::mpsc::channel::<Vec<String>>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        let hex = |id: waffle::SpanId| format!("{:016x}", id.to_u64());
        for round in 0..5u64 {
            let mut ids = Vec::new();
            {
                let outer = waffle::span!("round", round = round);
                for i in 0..3u64 {
                    ids.push(hex(waffle::span!("inner", i = i).id()));
                }
                ids.push(hex(outer.id()));
            }
            // Blocks until the spans arrived: only a TAIL copy has them.
            ids_tx.send(ids).unwrap();
            go_rx.recv().unwrap();
        }
    });
    for ids in ids_rx.iter() {
        for id in ids {
            assert!(sink.wait_for(&id, Duration::from_secs(3)).is_some(), "{id} not sent while blocked");
        }
        if go_tx.send(()).is_err() {
            break;
        }
    }
    worker.join().unwrap();
    session.stop().unwrap();
    let out = finish(child, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !stderr.contains("warning"), "{stderr}");
    let received = sink.received();
    assert!(received.values().all(|&(_, n)| n == 1), "sent twice: {received:?}");
    let (process, _) = waffle_read::decode::decode_file(&path).unwrap();
    let hex = |id: u64| format!("{id:016x}");
    let file: std::collections::HashMap<String, (String, String)> = process
        .threads
        .iter()
        .flat_map(|t| &t.spans)
        .map(|s| (hex(s.id), (s.callsite.name.to_string(), s.parent.map_or(String::new(), hex))))
        .collect();
    assert_eq!(file.len(), 20);
    assert_eq!(sink.shapes(), file);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn closed_files_and_a_frame_cut_at_the_end_of_a_growing_file() {
    let d = dir("cut");
    let whole = d.join("whole.bin");
    {
        let _one = SESSION.lock().unwrap_or_else(|e| e.into_inner());
        let session = waffle_std::start(&whole).unwrap();
        for i in 0..100u64 {
            let _s = waffle::span!("cut", i = i);
        }
        session.stop().unwrap();
    }
    let bytes = std::fs::read(&whole).unwrap();
    // Files already closed are followed to their END at once: two of them, as two ranks.
    let twin = d.join("twin.bin");
    std::fs::copy(&whole, &twin).unwrap();
    let sink = OtlpSink::start();
    let child = follow(&[whole.to_str().unwrap(), twin.to_str().unwrap(), "--send", &sink.target()]);
    let out = finish(child, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(sink.received().into_keys().collect::<HashSet<_>>(), recorded(&whole));
    // The same ids twice: each sent twice (follow mode resolves nothing).
    assert!(sink.received().values().all(|&(_, n)| n == 2), "{stderr}");
    assert_eq!(sent_of(&stderr), 200, "{stderr}");
    let path = d.join("growing.bin");
    // Cut in the middle of the file: almost surely inside a frame.
    let cut = bytes.len() / 2 + 3;
    std::fs::write(&path, &bytes[..cut]).unwrap();
    let sink = OtlpSink::start();
    let child = follow(&[path.to_str().unwrap(), "--send", &sink.target(), "--batch-delay", "20"]);
    std::thread::sleep(Duration::from_millis(400));
    assert!(child.id() > 0);
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&bytes[cut..]).unwrap();
    let out = finish(child, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let received: HashSet<String> = sink.received().into_keys().collect();
    assert_eq!(received, recorded(&whole));
    assert_eq!(sent_of(&stderr), 100);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_file_that_never_appears_and_bad_arguments_are_clear_errors() {
    let d = dir("missing");
    let path = d.join("never.bin");
    let started = Instant::now();
    let out = finish(
        follow(&[path.to_str().unwrap(), "--send", "otlp=http://127.0.0.1:9", "--wait", "0.3"]),
        Duration::from_secs(10),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(stderr.contains("never.bin: no such file after waiting 0.3 s (--wait)"), "{stderr}");
    for (args, says) in [
        (vec!["--send", "otlp=http://127.0.0.1:9", "-o", "x.pftrace"], "writes only Chrome JSON"),
        (vec!["--send", "otlp=http://h:1", "--send", "otlp=http://h:2"], "one backend"),
    ] {
        let mut all = vec![path.to_str().unwrap()];
        all.extend(args);
        let out = finish(follow(&all), Duration::from_secs(10));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(says), "{all:?}: {stderr}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn zipkin_is_followed_too() {
    let d = dir("zipkin");
    let path = d.join("run.bin");
    {
        let _one = SESSION.lock().unwrap_or_else(|e| e.into_inner());
        let session = waffle_std::start(&path).unwrap();
        for i in 0..30u64 {
            let _outer = waffle::span!("Outer", i = i);
            let _inner = waffle::span!("inner");
        }
        session.stop().unwrap();
    }
    let sink = OtlpSink::start();
    let out = finish(follow(&[path.to_str().unwrap(), "--send", &sink.zipkin()]), Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let (process, _) = waffle_read::decode::decode_file(&path).unwrap();
    let hex = |id: u64| format!("{id:016x}");
    let file: std::collections::HashMap<String, (String, String)> = process
        .threads
        .iter()
        .flat_map(|t| &t.spans)
        .map(|s| (hex(s.id), (s.callsite.name.to_string(), s.parent.map_or(String::new(), hex))))
        .collect();
    assert_eq!(file.len(), 60);
    assert_eq!(sink.shapes(), file);
    assert_eq!(sent_of(&stderr), 60, "{stderr}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn config_live_sends_every_span_from_the_collector_thread() {
    let _one = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let sink = OtlpSink::start();
    let d = dir("live");
    let path = d.join("run.bin");
    let options = Options { batch_delay: Duration::from_millis(50), ..Options::default() };
    let live = follow::live_with(sink.target().parse().unwrap(), options).unwrap();
    let report = live.report();
    let session = waffle_std::Config::new(&path).live(live).start().unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                for i in 0..500u64 {
                    let _outer = waffle::span!("outer", t = t, i = i);
                    let _inner = waffle::span!("inner");
                    waffle::event!("inside", i = i);
                }
            });
        }
    });
    assert!(report.get().is_none(), "finished before the stop");
    session.stop().unwrap();
    let summary = report.get().expect("the summary, once stopped");
    let recorded = recorded(&path);
    assert_eq!(recorded.len(), 4000);
    let received = sink.received();
    assert_eq!(received.keys().cloned().collect::<HashSet<_>>(), recorded);
    assert_eq!(summary.sent, 4000, "{summary}");
    assert_eq!((summary.lost(), summary.lost_frames), (0, 0), "{summary}");
    assert_eq!(summary.files[0].events, 2000);
    assert!(summary.files[0].complete);
    std::fs::remove_dir_all(&d).unwrap();
}
