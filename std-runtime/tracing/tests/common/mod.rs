//! Recording through the layer and reading the file back as an indented tree.

use std::{
    collections::HashMap,
    fmt::Write as _,
    path::PathBuf,
    sync::{Mutex, MutexGuard, OnceLock},
};
use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt};
use waffle_read::model::{Item, Trace, Value};

/// The recorder's test helpers (building examples).
#[path = "../../../recorder/tests/common/mod.rs"]
mod recorder;

/// One session at a time: the session and the subscriber are the process's.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| tracing_subscriber::registry().with(waffle_tracing::layer()).init());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fresh file path for test `name`.
pub fn path(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("waffle-tracing-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(format!("{name}.bin"))
}

/// Runs `body` on a thread named `main` inside a session writing `name`'s file; returns the
/// decoded trace (no warnings allowed) and what `body` returned.
pub fn record<R: Send>(name: &str, body: impl FnOnce() -> R + Send) -> (Trace, R) {
    let _serial = serial();
    let file = path(name);
    let session = waffle_std::start(&file).unwrap();
    let r = std::thread::scope(|s| {
        std::thread::Builder::new().name("main".into()).spawn_scoped(s, body).unwrap().join().unwrap()
    });
    drop(session);
    (decode(&file), r)
}

/// The trace in `file`, which must decode without a warning.
pub fn decode(file: &std::path::Path) -> Trace {
    let d = waffle_read::decode::decode_files(&[file]).unwrap();
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    d.trace
}

struct Node {
    line: String,
    parent: Option<u64>,
    start: u64,
    id: u64,
}

fn value(v: &Value) -> String {
    match v {
        Value::Str(s) => format!("{s:?}"),
        Value::U64(x) => format!("{x}u"),
        Value::I64(x) => format!("{x}i"),
        Value::F64(x) => format!("{x}f"),
        Value::Bool(x) => format!("{x}"),
    }
}

/// Every span and event as `kind name @thread fields <- causes`, children indented under
/// their parents, siblings in time order. A span never ended says `(open)`.
pub fn tree(t: &Trace) -> String {
    let index = t.index();
    let name_of =
        |id: u64| index.get(&id).map_or("?".to_string(), |r| t.describe(*r).callsite.name.to_string());
    let mut nodes: Vec<Node> = Vec::new();
    for (&id, &r) in &index {
        let th = t.thread(r);
        let (kind, fields, ended, start) = match r.item {
            Item::Span(i) => {
                let s = &th.spans[i];
                (
                    "span",
                    s.fields().map(|(k, v)| format!(" {k}={}", value(v))).collect::<String>(),
                    s.ended,
                    s.start_ns,
                )
            }
            Item::Event(i) => {
                let e = &th.events[i];
                (
                    "event",
                    e.fields().map(|(k, v)| format!(" {k}={}", value(v))).collect::<String>(),
                    true,
                    e.ts_ns,
                )
            }
        };
        let v = t.describe(r);
        let mut line = format!("{kind} {} @{}{fields}", v.callsite.name, th.name);
        for l in v.links {
            let _ = write!(line, " <- {}", name_of(*l));
        }
        if !ended {
            line.push_str(" (open)");
        }
        nodes.push(Node { line, parent: v.parent.filter(|p| index.contains_key(p)), start, id });
    }
    nodes.sort_by_key(|n| (n.start, n.id));
    let mut children: HashMap<Option<u64>, Vec<usize>> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        children.entry(n.parent).or_default().push(i);
    }
    let mut out = String::new();
    let mut todo: Vec<(usize, usize)> =
        children.get(&None).into_iter().flatten().rev().map(|&i| (i, 0)).collect();
    while let Some((i, depth)) = todo.pop() {
        let _ = writeln!(out, "{}{}", "  ".repeat(depth), nodes[i].line);
        if let Some(c) = children.get(&Some(nodes[i].id)) {
            todo.extend(c.iter().rev().map(|&c| (c, depth + 1)));
        }
    }
    out
}

/// The span named `name` (the only one).
#[allow(dead_code)]
pub fn span<'a>(t: &'a Trace, name: &str) -> &'a waffle_read::model::Span {
    let mut found =
        t.processes.iter().flat_map(|p| &p.threads).flat_map(|th| &th.spans).filter(|s| s.name() == name);
    let s = found.next().unwrap_or_else(|| panic!("no span {name}"));
    assert!(found.next().is_none(), "more than one span {name}");
    s
}

/// The binary of this crate's example `name`, built now if `cargo test` did not build it or
/// its source is newer.
#[allow(dead_code)]
pub fn example(name: &str) -> PathBuf {
    recorder::example_of("waffle-tracing", "tracing", name)
}

/// What `examples/tracing_demo.rs` records, with the line in an event's name as `N`.
#[allow(dead_code)]
pub const DEMO_TREE: &str = "\
span train @main epochs=2u
  span load_data @main shards=2u
    event event std-runtime/tracing/examples/tracing_demo.rs:N @main level=\"INFO\" message=\"loaded\" rows=1024u source=\"synthetic\"
  span epoch @main epoch=0u <- load_data
    span forward @main epoch=0u
      span matmul @main layer=0u epoch=0u
      span matmul @main layer=1u epoch=0u
    event event std-runtime/tracing/examples/tracing_demo.rs:N @main level=\"INFO\" message=\"epoch done\" loss=1.5f
  span epoch @main epoch=1u <- load_data
    span forward @main epoch=1u
      span matmul @main layer=0u epoch=1u
      span matmul @main layer=1u epoch=1u
    event event std-runtime/tracing/examples/tracing_demo.rs:N @main level=\"INFO\" message=\"epoch done\" loss=0.5833333333333333f
  span evaluate @main batches=2u
    span batch @main batch=0u
    span batch @worker batch=1u
";

/// `tree` with the line numbers of `file:LINE` event names replaced by `N`.
#[allow(dead_code)]
pub fn without_lines(tree: &str, file: &str) -> String {
    let mark = format!("{file}:");
    tree.lines()
        .map(|l| match l.find(&mark) {
            Some(at) => {
                let (head, tail) = l.split_at(at + mark.len());
                format!("{head}N{}\n", tail.trim_start_matches(|c: char| c.is_ascii_digit()))
            }
            None => format!("{l}\n"),
        })
        .collect()
}
