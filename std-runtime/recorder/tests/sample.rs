//! Head sampling (`Config::sample`, `WAFFLE_SAMPLE`), decoded: a fraction of roots kept, each
//! whole (children, events, detached spans, contexts entered on other threads), none partial;
//! every cause a recorded item names is recorded; and across processes, a child started with a
//! `traceparent` follows its sampled flag.

mod common;

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    process::Command,
    sync::{mpsc, Mutex},
};
use waffle::{Context, EventId, Instrument};
use waffle_read::model::{Trace, Value};

/// One session at a time in this binary (sessions are process-wide).
static SESSION: Mutex<()> = Mutex::new(());

fn path(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("waffle-sample-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn decode(p: &Path) -> Trace {
    let d = waffle_read::decode::decode_files(&[p]).unwrap();
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    d.trace
}

/// Every span and event as (name, field `i`), with how often each was seen.
fn items(t: &Trace) -> HashMap<(String, u64), usize> {
    let mut seen = HashMap::new();
    let i_of = |fields: &[Value]| match fields.first() {
        Some(Value::U64(i)) => *i,
        _ => u64::MAX,
    };
    for th in t.processes.iter().flat_map(|p| &p.threads) {
        for s in &th.spans {
            *seen.entry((s.name().to_owned(), i_of(&s.fields))).or_insert(0) += 1;
        }
        for e in &th.events {
            *seen.entry((e.name().to_owned(), i_of(&e.fields))).or_insert(0) += 1;
        }
    }
    seen
}

/// What each root does: children, an event, a detached span polled on another thread, its
/// context entered on another thread, a cause named from the previous root's event.
const INSIDE: [&str; 7] = ["root", "child", "grandchild", "ev", "task", "inner", "remote"];

type Job = (u64, Context, std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>);

#[test]
fn a_fraction_of_roots_is_kept_each_whole_with_its_causes() {
    let _one = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let p = path("fraction.bin");
    let trace_id = waffle::TraceId::from_u128(0x5a3f_0000_0000_0000_0000_0000_0000_0001);
    let session = waffle_std::Config::new(&p).trace_id(trace_id).sample(0.25).start().unwrap();
    let (tx, rx) = mpsc::channel::<Job>();
    let worker = std::thread::spawn(move || {
        for (i, ctx, fut) in rx {
            common::block_on(fut);
            let _in = ctx.enter();
            let _r = waffle::span!("remote", i);
        }
    });
    let n = 2000u64;
    let mut kept = Vec::new();
    let mut marks = Vec::new();
    let mut flags_agree = true;
    let mut previous_event = EventId::NULL;
    for i in 0..n {
        let root = waffle::span!("root", i);
        {
            let _c = waffle::span!("child", i, caused_by = previous_event);
            let _g = waffle::span!("grandchild", i);
            previous_event = waffle::event!("ev", i);
        }
        let task = async move {
            let _s = waffle::span!("inner", i);
        }
        .instrument(waffle::span!("task", i));
        let ctx = Context::current();
        flags_agree &=
            ctx.write_traceparent().as_str().ends_with(if ctx.is_sampled() { "-01" } else { "-00" });
        flags_agree &= ctx.is_sampled() != root.id().is_sampled_out() && ctx.span_id() == root.id();
        kept.push(!root.id().is_sampled_out());
        drop(root);
        tx.send((i, ctx, Box::pin(task))).unwrap();
        // A root naming a cause follows it.
        let effect = waffle::span!("effect", i, caused_by = previous_event);
        assert_eq!(effect.id().is_sampled_out(), previous_event.is_sampled_out(), "root {i}");
        drop(effect);
        // A top-level event is a root of its own; a binding's link after it goes with it.
        let mark = waffle::event!("mark", i);
        waffle::link_raw(&previous_event, None);
        marks.push(!mark.is_sampled_out());
    }
    drop(tx);
    worker.join().unwrap();
    session.stop().unwrap();
    assert!(flags_agree, "a context's sampled flag is its root's decision");

    let t = decode(&p);
    let labels = &t.processes[0].header.labels;
    assert!(labels.iter().any(|(k, v)| k == "waffle.sample" && v == "0.25"), "{labels:?}");
    let seen = items(&t);
    let kept_n = kept.iter().filter(|&&k| k).count() as f64;
    let (mean, sd) = (n as f64 * 0.25, (n as f64 * 0.25 * 0.75).sqrt());
    assert!((kept_n - mean).abs() < 5.0 * sd, "kept {kept_n} roots of {n}");
    let marks_n = marks.iter().filter(|&&k| k).count() as f64;
    assert!((marks_n - mean).abs() < 5.0 * sd, "kept {marks_n} top-level events of {n}");
    for (i, &k) in kept.iter().enumerate() {
        let i = i as u64;
        for name in INSIDE.iter().chain(&["effect"]) {
            let count = seen.get(&(name.to_string(), i)).copied().unwrap_or(0);
            assert_eq!(count, usize::from(k), "{name} of root {i} (kept: {k})");
        }
    }
    for (i, &k) in marks.iter().enumerate() {
        assert_eq!(
            seen.get(&("mark".to_owned(), i as u64)).copied().unwrap_or(0),
            usize::from(k),
            "mark {i}"
        );
    }
    let all = kept_n as usize * (INSIDE.len() + 1) + marks_n as usize;
    assert_eq!(seen.values().sum::<usize>(), all, "nothing else");
    // Every link in the file names a recorded item; the effects' links all survive.
    let index = t.index();
    let mut links = 0;
    for r in index.values() {
        let v = t.describe(*r);
        for l in v.links {
            assert!(index.contains_key(l), "{} links to {l:016x}, not in the trace", v.callsite.name);
        }
        if v.callsite.name == "effect" {
            assert_eq!(v.links.len(), 1);
        }
        links += v.links.len();
    }
    // `child` of a kept root keeps its link when the previous root was kept too; `mark` when
    // it was kept and its root too.
    let both = kept.windows(2).filter(|w| w[0] && w[1]).count();
    let marked = kept.iter().zip(&marks).filter(|(&r, &m)| r && m).count();
    assert_eq!(links, kept_n as usize + both + marked);
    assert!(t.processes[0].threads.iter().all(|th| th.dropped == 0));
    let _ = std::fs::remove_file(&p);
}

/// Run as a child process by the tests below (`SAMPLE_CHILD_OUT` names its file): a session
/// from the environment (`WAFFLE_TRACEPARENT`, `WAFFLE_SAMPLE`), 100 roots with a child each.
#[test]
fn child_process() {
    let Ok(out) = std::env::var("SAMPLE_CHILD_OUT") else { return };
    let session = waffle_std::Config::new(out).start().unwrap();
    for i in 0..100u64 {
        let _r = waffle::span!("root", i);
        let _c = waffle::span!("child", i);
    }
    session.stop().unwrap();
}

/// Runs [`child_process`] in a new process with `env`, recording to [`path`]`(name)`; returns
/// its trace and its stderr.
fn run_child(name: &str, env: &[(&str, &str)]) -> (Trace, String) {
    let p = path(name);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_process", "--test-threads=1", "--nocapture"]).env("SAMPLE_CHILD_OUT", &p);
    for v in ["WAFFLE_OUTPUT", "WAFFLE_SAMPLE", "WAFFLE_TRACEPARENT", "WAFFLE_TRACE_ID"] {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (decode(&p), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_child_process_follows_the_sampled_flag_of_its_traceparent() {
    let _one = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let p = path("parent.bin");
    let session = waffle_std::Config::new(&p).sample(0.5).start().unwrap();
    let (mut kept, mut dropped) = (None, None);
    for _ in 0..200 {
        let root = waffle::span!("spawner");
        let ctx = Context::current();
        let slot = if ctx.is_sampled() { &mut kept } else { &mut dropped };
        slot.get_or_insert((ctx, ctx.write_traceparent().as_str().to_owned()));
        drop(root);
        if kept.is_some() && dropped.is_some() {
            break;
        }
    }
    session.stop().unwrap();
    let (kept, dropped) = (kept.unwrap(), dropped.unwrap());
    assert!(dropped.1.ends_with("-00") && kept.1.ends_with("-01"));

    // Unsampled parent: the child decides nothing and records nothing, even asked to keep all.
    let (t, _) = run_child("unsampled.bin", &[("WAFFLE_TRACEPARENT", &dropped.1), ("WAFFLE_SAMPLE", "1")]);
    assert!(items(&t).is_empty(), "{:?}", items(&t));
    assert_eq!(t.processes[0].header.trace_id, dropped.0.trace_id().to_u128());
    // Sampled parent: every root kept, even with a local rate of 0, under the parent's span.
    let (t, _) = run_child("sampled.bin", &[("WAFFLE_TRACEPARENT", &kept.1), ("WAFFLE_SAMPLE", "0")]);
    let seen = items(&t);
    assert!((0..100)
        .all(|i| seen.get(&("root".into(), i)) == Some(&1) && seen.get(&("child".into(), i)) == Some(&1)));
    assert_eq!(t.processes[0].header.parent, kept.0.span_id().to_u64());
    let labels = &t.processes[0].header.labels;
    assert!(!labels.iter().any(|(k, _)| k == "waffle.sample"), "{labels:?}");
    for f in [p, path("unsampled.bin"), path("sampled.bin")] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn waffle_sample_from_the_environment_and_a_bad_value() {
    let (t, _) = run_child("none.bin", &[("WAFFLE_SAMPLE", "0")]);
    assert!(items(&t).is_empty());
    let labels = &t.processes[0].header.labels;
    assert!(labels.iter().any(|(k, v)| k == "waffle.sample" && v == "0"), "{labels:?}");

    let (t, _) = run_child("tenth.bin", &[("WAFFLE_SAMPLE", "0.1")]);
    let seen = items(&t);
    let roots: HashSet<u64> = seen.keys().filter(|(n, _)| n == "root").map(|(_, i)| *i).collect();
    let children: HashSet<u64> = seen.keys().filter(|(n, _)| n == "child").map(|(_, i)| *i).collect();
    assert_eq!(roots, children, "whole roots");
    assert!(roots.len() < 50, "kept {} of 100 at 0.1", roots.len());
    // The decoder's summary says the file is a sample.
    let out = Command::new(common::decoder_binary())
        .arg(path("tenth.bin"))
        .arg("-o")
        .arg(path("tenth.chrome.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains(", head-sampled: roots kept at rate 0.1"), "{stderr}");
    // And `why` says that a chain may stop short at a dropped root.
    let out = Command::new(common::decoder_binary())
        .arg("why")
        .arg(path("tenth.bin"))
        .args(["--event", "child"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("was head-sampled (waffle.sample=0.1)"), "{stdout}");

    let (t, stderr) = run_child("bad.bin", &[("WAFFLE_SAMPLE", "lots")]);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("WAFFLE_SAMPLE")).collect();
    assert_eq!(lines, ["waffle: WAFFLE_SAMPLE=\"lots\" is not a number from 0 to 1; every span is kept"]);
    assert_eq!(items(&t).len(), 200, "sampling off: everything kept");
    for f in ["none.bin", "tenth.bin", "tenth.chrome.json", "bad.bin"] {
        let _ = std::fs::remove_file(path(f));
    }
}

/// Short-lived threads, one root each, reusing the same few slots: each is decided afresh
/// (a slot's next owner does not repeat the previous owner's decisions).
#[test]
fn threads_that_reuse_a_slot_decide_afresh() {
    let _one = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let p = path("churn.bin");
    let session = waffle_std::Config::new(&p).sample(0.5).start().unwrap();
    let n = 400u64;
    // Each root's stream index (a sampled-out id keeps it) and whether it was kept.
    let mut decided: HashMap<u64, Vec<bool>> = HashMap::new();
    for i in 0..n {
        let id = std::thread::spawn(move || waffle::span!("root", i).id()).join().unwrap();
        decided.entry(id.to_u64() >> 32 & 0xFFF).or_default().push(!id.is_sampled_out());
    }
    session.stop().unwrap();
    let kept = decided.values().flatten().filter(|&&k| k).count() as u64;
    let (mean, sd) = (n as f64 * 0.5, (n as f64 * 0.25).sqrt());
    assert!((kept as f64 - mean).abs() < 5.0 * sd, "kept {kept} of {n}");
    let reused: Vec<&Vec<bool>> = decided.values().filter(|d| d.len() >= 4).collect();
    assert!(reused.len() >= 5, "slots were reused: {decided:?}");
    assert!(reused.iter().any(|d| d.contains(&true) && d.contains(&false)), "{reused:?}");
    assert_eq!(items(&decode(&p)).len() as u64, kept);
    let _ = std::fs::remove_file(&p);
}
