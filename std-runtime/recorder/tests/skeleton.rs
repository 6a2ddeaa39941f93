//! The walking skeleton end to end: four threads record, the file decodes to exactly the tree
//! they made.

use std::collections::BTreeSet;
use waffle_read::model::{Process, Value};

#[waffle::instrument]
fn step(i: u64, dt: f64) {
    let _s = waffle::span!("stencil", cells = 4096u64);
    let _id: waffle::EventId = waffle::event!("converged", residual = 1e-9, ok = true);
    std::hint::black_box((i, dt));
}

fn record(path: &std::path::Path) -> waffle_std::Stats {
    let session = waffle_std::start(path).expect("start");
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || (0..1000).for_each(|i| step(t * 1000 + i, 0.01)));
        }
    });
    session.stop().expect("stop")
}

/// Renders a thread as an indented tree, one line per span or event.
fn render(p: &Process, thread: usize) -> Vec<String> {
    let t = &p.threads[thread];
    let mut items: Vec<(u64, u32, String)> = Vec::new();
    for s in &t.spans {
        let fields: Vec<String> = s.fields().map(|(k, v)| format!("{k}={v}")).collect();
        items.push((s.start_ns, s.depth, format!("{} {}", s.name(), fields.join(" "))));
    }
    for e in &t.events {
        let depth = t.spans.iter().find(|s| Some(s.id) == e.parent).map_or(0, |s| s.depth + 1);
        let fields: Vec<String> = e.fields().map(|(k, v)| format!("{k}={v}")).collect();
        items.push((e.ts_ns, depth, format!("! {} {}", e.name(), fields.join(" "))));
    }
    items.sort_by_key(|(ts, depth, _)| (*ts, *depth));
    items.into_iter().map(|(_, d, s)| format!("{}{}", "  ".repeat(d as usize), s.trim_end())).collect()
}

#[test]
fn four_threads_decode_to_the_exact_tree() {
    let dir = tempdir();
    let path = dir.join("trace.bin");
    let stats = record(&path);
    assert_eq!(stats.dropped, 0);

    let (p, warnings) = waffle_read::decode::decode_file(&path).expect("decode");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(p.complete);
    assert_eq!(p.header.pid, std::process::id());
    let workers: Vec<usize> = (0..p.threads.len()).filter(|&t| !p.threads[t].spans.is_empty()).collect();
    assert_eq!(workers.len(), 4, "four threads recorded");

    let mut all_i = BTreeSet::new();
    for &t in &workers {
        let th = &p.threads[t];
        assert_ne!(th.tid, 0);
        assert_eq!(th.spans.len(), 2000);
        assert_eq!(th.events.len(), 1000);
        let steps: Vec<_> = th.spans.iter().filter(|s| s.name() == "step").collect();
        assert_eq!(steps.len(), 1000);
        let first = match steps[0].fields[0] {
            Value::U64(i) => i,
            ref v => panic!("i is {v:?}"),
        };
        assert_eq!(first % 1000, 0, "each thread starts at t*1000");
        for (k, s) in steps.iter().enumerate() {
            assert!(s.ended && s.parent.is_none() && s.depth == 0);
            assert_eq!(s.fields, vec![Value::U64(first + k as u64), Value::F64(0.01)]);
            all_i.insert(first + k as u64);
            let kids: Vec<_> = th.spans.iter().filter(|c| c.parent == Some(s.id)).collect();
            assert_eq!(kids.len(), 1, "one stencil per step");
            assert_eq!(kids[0].name(), "stencil");
            assert_eq!(kids[0].fields, vec![Value::U64(4096)]);
            assert!(kids[0].start_ns >= s.start_ns && kids[0].end_ns <= s.end_ns);
            let evs: Vec<_> = th.events.iter().filter(|e| e.parent == Some(kids[0].id)).collect();
            assert_eq!(evs.len(), 1, "one converged inside each stencil");
            assert_eq!(evs[0].name(), "converged");
            assert_eq!(evs[0].fields, vec![Value::F64(1e-9), Value::Bool(true)]);
            assert!(evs[0].ts_ns >= kids[0].start_ns && evs[0].ts_ns <= kids[0].end_ns);
        }
        // The rendered tree of the first two steps, with values, as a reader sees it.
        let lines = render(&p, t);
        assert_eq!(
            lines[..6],
            [
                format!("step i={first} dt=0.01"),
                "  stencil cells=4096".to_owned(),
                "    ! converged residual=0.000000001 ok=true".to_owned(),
                format!("step i={} dt=0.01", first + 1),
                "  stencil cells=4096".to_owned(),
                "    ! converged residual=0.000000001 ok=true".to_owned(),
            ]
        );
    }
    assert_eq!(all_i, (0..4000).collect(), "every step of every thread is present once");

    // Ids are unique across the process.
    let mut ids = BTreeSet::new();
    for th in &p.threads {
        for s in &th.spans {
            assert!(ids.insert(s.id), "duplicate id {:x}", s.id);
        }
        for e in &th.events {
            assert!(ids.insert(e.id), "duplicate id {:x}", e.id);
        }
    }

    // A second session in the same process records into its own file.
    let path2 = dir.join("again.bin");
    record(&path2);
    let (p2, _) = waffle_read::decode::decode_file(&path2).expect("decode");
    let spans: usize = p2.threads.iter().map(|t| t.spans.len()).sum();
    assert_eq!(spans, 8000);
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("waffle-skeleton-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
