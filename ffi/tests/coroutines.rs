//! C++20 coroutines (`waffle::task`, `waffle::sync_wait`) and `waffle::async`: `tests/cpp/
//! coroutines.cpp` is compiled with g++ and clang++ (`-std=c++20 -Wall -Wextra -Werror`), run,
//! and its trace decoded into one tree across threads, which must be exactly the tree its
//! scenarios make: every span ends once, wherever it ended, and what a task records nests in the
//! spans it holds open, on whichever thread resumed it. The C++17 API stays as it was: the other
//! C++ tests build the same headers with `-std=c++17`.

mod common;

use common::{command, compile, decode, run_ok, scratch, which, Link};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use waffle_read::model::Trace;

const FLAGS: &[&str] = &["-std=c++20", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O2", "-g"];

/// What `coroutines.cpp` records, across threads: siblings in text order (tasks run at once on
/// the pool, so their order in time is not fixed). The pool's eight tasks follow (`expected`).
const TREE: &str = r#"
async
  doubled x=21
  doubled x=4
awaited
  outer
    ! inner returned v=42
    inner
cancel
  abandoned
    waiting
failed
  ! caught
  failing
    about to throw
pool
"#;

/// [`TREE`] and, under `pool`, task `i`'s work for each of the eight: a part, a nested task and
/// what it returned.
fn expected() -> String {
    let mut tree = TREE.trim_start_matches('\n').to_owned();
    for i in 0..8 {
        let got = i * 10;
        write!(tree, "  work i={i}\n    ! done i={i} got={got}\n    nested i={i}\n      ! leaf i={i}\n    part i={i}\n")
            .unwrap();
    }
    tree
}

/// The trace's items as one tree by parent across all threads, siblings sorted by their text;
/// a span that did not end says so. Also: how many threads recorded, and the names of the
/// spans with children recorded on a thread other than their own.
fn tree(trace: &Trace) -> (String, usize, HashSet<String>) {
    let p = &trace.processes[0];
    // id -> (parent, line, thread)
    let mut items: HashMap<u64, (Option<u64>, String, usize)> = HashMap::new();
    for (t, thread) in p.threads.iter().enumerate() {
        for s in &thread.spans {
            let fields: String = s.fields().map(|(k, v)| format!(" {k}={v}")).collect();
            let ended = if s.ended { "" } else { " (not ended)" };
            items.insert(s.id, (s.parent, format!("{}{fields}{ended}", s.name()), t));
        }
        for e in &thread.events {
            let fields: String = e.fields().map(|(k, v)| format!(" {k}={v}")).collect();
            items.insert(e.id, (e.parent, format!("! {}{fields}", e.name()), t));
        }
    }
    let mut children: BTreeMap<Option<u64>, Vec<u64>> = BTreeMap::new();
    for (&id, (parent, _, _)) in &items {
        let parent = parent.filter(|p| items.contains_key(p));
        children.entry(parent).or_default().push(id);
    }
    for ids in children.values_mut() {
        ids.sort_by(|a, b| items[a].1.cmp(&items[b].1));
    }
    fn walk(
        out: &mut String,
        items: &HashMap<u64, (Option<u64>, String, usize)>,
        children: &BTreeMap<Option<u64>, Vec<u64>>,
        at: Option<u64>,
        depth: usize,
    ) {
        for id in children.get(&at).map_or(&[][..], Vec::as_slice) {
            writeln!(out, "{}{}", "  ".repeat(depth), items[id].1).unwrap();
            walk(out, items, children, Some(*id), depth + 1);
        }
    }
    let mut out = String::new();
    walk(&mut out, &items, &children, None, 0);
    let threads: HashSet<usize> = items.values().map(|i| i.2).collect();
    let hopped = items
        .values()
        .filter_map(|(parent, _, t)| parent.and_then(|p| items.get(&p)).filter(|i| i.2 != *t))
        .map(|i| i.1.clone())
        .collect();
    (out, threads.len(), hopped)
}

fn run_with(compiler: &str, name: &str) {
    let dir = scratch(name);
    let exe = dir.join(name);
    let source = common::ffi_dir().join("tests/cpp/coroutines.cpp");
    compile(compiler, FLAGS, &[source], &exe, Link::Shared, &[]);
    let trace_file = dir.join("trace.bin");
    run_ok(command(&exe).arg(&trace_file));
    let trace = decode(&[trace_file]);
    let (text, threads, hopped) = tree(&trace);
    let expected = expected();
    assert!(text == expected, "{compiler}: the tree differs.\n--- actual\n{text}--- expected\n{expected}");
    // The main thread, one of the pool's at least, and std::async's own.
    assert!(threads >= 3, "{compiler}: only {threads} threads recorded");
    // Spans begun on one thread whose children a resumed task recorded on another (the pool's
    // threads take turns, so which of the others hop varies).
    for name in ["pool", "outer", "abandoned", "failing", "async"] {
        assert!(hopped.contains(name), "{compiler}: no child of {name} on another thread: {hopped:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn tasks_keep_their_spans_across_threads_with_gcc() {
    run_with(&common::cxx(), "coroutines-gcc");
}

#[test]
fn tasks_keep_their_spans_across_threads_with_clang() {
    match which("clang++") {
        Some(clang) => run_with(clang.to_str().unwrap(), "coroutines-clang"),
        // scripts/test.sh installs clang (and requires it); a bare `cargo test` without it
        // checks with the default compiler only.
        None if std::env::var_os("WAFFLE_REQUIRE_CLANG").is_some() => {
            panic!("clang++ is not installed, and WAFFLE_REQUIRE_CLANG is set")
        }
        None => eprintln!("clang++ is not installed: coroutines checked with {} only", common::cxx()),
    }
}
