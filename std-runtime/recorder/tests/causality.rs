//! Causal links, correlation, contexts across threads, traceparent and async spans, decoded.

mod common;

use common::YieldOnce;
use std::{
    collections::{HashMap, HashSet},
    future::Future,
    task::{Context as TaskContext, Poll},
};
use waffle::{Context, EventId, Instrument, SpanId};
use waffle_read::model::{Item, Trace};

fn path(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("waffle-causality-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn decode(p: &std::path::Path) -> Trace {
    let d = waffle_read::decode::decode_files(&[p]).unwrap();
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    d.trace
}

/// Names of spans and events by id, with their links, parents and threads.
struct Seen {
    name: String,
    parent: Option<u64>,
    links: Vec<u64>,
    correlation: Option<u64>,
    thread: usize,
    detached: bool,
    ended: bool,
}

fn by_id(t: &Trace) -> HashMap<u64, Seen> {
    t.index()
        .into_iter()
        .map(|(id, r)| {
            let v = t.describe(r);
            let (detached, ended) = match r.item {
                Item::Span(i) => (t.thread(r).spans[i].detached, t.thread(r).spans[i].ended),
                Item::Event(_) => (false, true),
            };
            let seen = Seen {
                name: v.callsite.name.to_string(),
                parent: v.parent,
                links: v.links.to_vec(),
                correlation: v.correlation,
                thread: r.thread,
                detached,
                ended,
            };
            (id, seen)
        })
        .collect()
}

#[waffle::instrument]
async fn migrating_job(n: u64) -> u64 {
    {
        let _a = waffle::span!("before_await", n);
    }
    YieldOnce(false).await;
    let _b = waffle::span!("after_await", n);
    n * 2
}

#[waffle::instrument(skip_all)]
async fn tokio_job(n: u64) -> u64 {
    let mut acc = 0;
    for round in 0..4u64 {
        {
            // A thread-bound span cannot be held across an `.await` (its guard is not `Send`).
            let _p = waffle::span!("phase", n, round);
            acc += round;
        }
        tokio::task::yield_now().await;
    }
    acc + n
}

#[test]
fn links_contexts_and_async_spans_decode_to_the_graph_they_made() {
    let file = path("graph.bin");
    let session = waffle_std::start(&file).unwrap();

    // Links within a thread (local form), across threads (full form), nulls ignored.
    let cause: EventId = waffle::event!("input has NaN", rank = 1u64);
    let other: SpanId = std::thread::spawn(|| waffle::span!("remote work").id()).join().unwrap();
    let none: Option<EventId> = None;
    let (allreduce_id, ctx, traceparent) = {
        let span = waffle::span!(
            "allreduce",
            caused_by = [cause, none],
            caused_by = [other],
            correlate = ("allreduce", 7u64),
            count = 3u64
        );
        let ctx = Context::current();
        assert_eq!(ctx.span_id(), span.id(), "the open span is the current context");
        (span.id(), ctx, ctx.to_traceparent())
    };
    let symptom = waffle::event!("symptom", caused_by = [allreduce_id, EventId::NULL]);

    // Context carried to worker threads: their spans are children of the dispatcher's span.
    let workers: Vec<SpanId> = (0..3)
        .map(|_| {
            std::thread::spawn(move || {
                let _g = ctx.enter();
                assert_eq!(Context::current().span_id(), ctx.span_id());
                let w = waffle::span!("process_task");
                let inner = waffle::span!("inner");
                assert_eq!(Context::current().span_id(), inner.id());
                w.id()
            })
            .join()
            .unwrap()
        })
        .collect();
    // A context from a traceparent header, as another process would receive it.
    let remote = Context::from_traceparent(&traceparent).unwrap();
    assert_eq!(remote, ctx);
    assert_eq!(remote.trace_id(), waffle::runtime::trace_id());
    let from_remote = std::thread::spawn(move || {
        let _g = remote.enter();
        waffle::span!("from_header").id()
    })
    .join()
    .unwrap();

    // An async span whose future moves to another thread between polls.
    let mut fut = Box::pin(migrating_job(21));
    let waker = common::noop_waker();
    assert!(fut.as_mut().poll(&mut TaskContext::from_waker(&waker)).is_pending());
    let out = std::thread::spawn(move || {
        let waker = common::noop_waker();
        match fut.as_mut().poll(&mut TaskContext::from_waker(&waker)) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("second poll completes"),
        }
    })
    .join()
    .unwrap();
    assert_eq!(out, 42);

    // Many async spans on tokio's multi-thread runtime.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    let sums: Vec<u64> = rt.block_on(async {
        let tasks: Vec<_> = (0..16).map(|n| tokio::spawn(tokio_job(n))).collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    assert_eq!(sums, (0..16).map(|n| n + 6).collect::<Vec<_>>());
    // A future instrumented by hand and dropped before completion still ends its span.
    drop(YieldOnce(false).instrument(waffle::span!("cancelled")));
    drop(rt);
    session.stop().unwrap();

    let trace = decode(&file);
    let p = &trace.processes[0];
    assert_eq!(p.header.trace_id, ctx.trace_id().to_u128());
    let seen = by_id(&trace);

    let a = &seen[&allreduce_id.to_u64()];
    assert_eq!(a.name, "allreduce");
    assert_eq!(a.links, vec![cause.to_u64(), other.to_u64()], "null causes are skipped");
    assert_eq!(a.correlation, Some(7));
    assert_eq!(seen[&symptom.to_u64()].links, vec![allreduce_id.to_u64()]);

    for w in &workers {
        let s = &seen[&w.to_u64()];
        assert_eq!((s.name.as_str(), s.parent), ("process_task", Some(allreduce_id.to_u64())));
        assert_ne!(s.thread, a.thread);
    }
    assert_eq!(seen[&from_remote.to_u64()].parent, Some(allreduce_id.to_u64()));
    let inners: Vec<_> = seen.values().filter(|s| s.name == "inner").collect();
    assert_eq!(inners.len(), 3);
    assert!(inners.iter().all(|s| workers.iter().any(|w| Some(w.to_u64()) == s.parent)));

    // The migrating job: one detached span, ended, children on two threads.
    let jobs: Vec<(&u64, &Seen)> = seen.iter().filter(|(_, s)| s.name == "migrating_job").collect();
    assert_eq!(jobs.len(), 1);
    let (&job_id, job) = jobs[0];
    assert!(job.detached && job.ended);
    let before = seen.values().find(|s| s.name == "before_await").unwrap();
    let after = seen.values().find(|s| s.name == "after_await").unwrap();
    assert_eq!((before.parent, after.parent), (Some(job_id), Some(job_id)));
    assert_ne!(before.thread, after.thread, "the future moved threads");

    // Tokio: every phase is a child of its own job; every job detached and ended.
    let tokio_jobs: HashSet<u64> = seen
        .iter()
        .filter(|(_, s)| s.name == "tokio_job")
        .map(|(&id, s)| {
            assert!(s.detached && s.ended);
            id
        })
        .collect();
    assert_eq!(tokio_jobs.len(), 16);
    let phases: Vec<&Seen> = seen.values().filter(|s| s.name == "phase").collect();
    assert_eq!(phases.len(), 64);
    let mut per_job: HashMap<u64, usize> = HashMap::new();
    for ph in &phases {
        let parent = ph.parent.expect("phase has a parent");
        assert!(tokio_jobs.contains(&parent), "phase parented to its job");
        *per_job.entry(parent).or_default() += 1;
    }
    assert!(per_job.values().all(|&n| n == 4));
    let cancelled = seen.values().find(|s| s.name == "cancelled").unwrap();
    assert!(cancelled.detached && cancelled.ended);
}
