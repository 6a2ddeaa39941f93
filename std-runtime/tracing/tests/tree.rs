//! `tracing` spans and events recorded through the layer, decoded from the file to their exact
//! tree: names, fields, parents, links and the thread of each.

mod common;

use common::{record, span, tree};
use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, Waker},
};

#[test]
fn sync_nesting_is_the_tree_and_times_of_the_guards() {
    let (t, _) = record("sync", || {
        let outer = tracing::info_span!("outer", step = 3u64, phase = "fwd").entered();
        {
            let _inner = tracing::debug_span!("inner", k = -2i64).entered();
            tracing::info!(name: "loaded", bytes = 4096u64, "batch {}", 7);
        }
        tracing::info_span!("sibling").in_scope(|| {});
        drop(outer);
    });
    assert_eq!(
        tree(&t),
        "span outer @main step=3u phase=\"fwd\"\n\
         \x20 span inner @main k=-2i\n\
         \x20   event loaded @main level=\"INFO\" message=\"batch 7\" bytes=4096u\n\
         \x20 span sibling @main\n"
    );
    let (outer, inner) = (span(&t, "outer"), span(&t, "inner"));
    assert!(outer.start_ns <= inner.start_ns && inner.end_ns <= outer.end_ns);
    assert_eq!(inner.callsite.module, "tree", "the target is the module");
    assert!(inner.callsite.file.ends_with("tree.rs") && inner.callsite.line > 0);
}

#[test]
fn a_span_entered_on_two_threads_parents_the_work_of_both() {
    let (t, _) = record("two_threads", || {
        let job = tracing::info_span!("job", id = 1u64);
        std::thread::scope(|s| {
            for name in ["a", "b"] {
                let job = &job;
                let worker = std::thread::Builder::new().name(name.into());
                worker
                    .spawn_scoped(s, move || {
                        let _g = job.enter();
                        tracing::info_span!("part").in_scope(|| tracing::info!(name: "step", on = name));
                    })
                    .unwrap()
                    .join()
                    .unwrap();
            }
        });
    });
    assert_eq!(
        tree(&t),
        "span job @main id=1u\n\
         \x20 span part @a\n\
         \x20   event step @a level=\"INFO\" on=\"a\"\n\
         \x20 span part @b\n\
         \x20   event step @b level=\"INFO\" on=\"b\"\n"
    );
    let job = span(&t, "job");
    assert!(job.detached && job.ended);
    let parts = t.processes[0].threads.iter().flat_map(|th| &th.spans).filter(|s| s.name() == "part");
    assert!(parts.into_iter().all(|p| p.end_ns <= job.end_ns), "the job ends when its handle drops");
}

/// Pending once (waking itself), then ready: hands the future back to its poller.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            return Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[tracing::instrument]
async fn fetch(shard: u64) -> u64 {
    tracing::info_span!("before").in_scope(|| {});
    YieldOnce(false).await;
    tracing::info!(name: "resumed", shard);
    shard * 2
}

#[test]
fn an_instrumented_async_fn_polled_on_two_threads_is_one_span() {
    let (t, out) = record("async", || {
        let mut fut = Box::pin(fetch(3));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        let worker = std::thread::Builder::new().name("worker".into());
        worker
            .spawn(move || match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                Poll::Ready(v) => v,
                Poll::Pending => panic!("ready on the second poll"),
            })
            .unwrap()
            .join()
            .unwrap()
    });
    assert_eq!(out, 6);
    assert_eq!(
        tree(&t),
        "span fetch @main shard=3u\n\
         \x20 span before @main\n\
         \x20 event resumed @worker level=\"INFO\" shard=3u\n"
    );
    let (fetch, before) = (span(&t, "fetch"), span(&t, "before"));
    assert!(fetch.ended && fetch.end_ns >= before.end_ns, "ended by the worker, after both polls");
}

#[test]
fn follows_from_is_a_causal_link() {
    let (t, _) = record("follows", || {
        let cause = tracing::info_span!("cause");
        let effect = tracing::info_span!("effect");
        effect.follows_from(&cause);
        let late = tracing::info_span!("late");
        tracing::info!(name: "between", x = 1u64);
        late.follows_from(&cause);
    });
    assert_eq!(
        tree(&t),
        "span cause @main\n\
         span effect @main <- cause\n\
         span late @main\n\
         \x20 event follows_from @main <- cause\n\
         event between @main level=\"INFO\" x=1u\n"
    );
}

#[derive(Debug)]
#[allow(dead_code)] // read by its Debug impl
struct Shape {
    w: u32,
}

#[test]
fn events_carry_every_field_type() {
    let (t, _) = record("fields", || {
        let err = std::io::Error::other("disk full");
        tracing::warn!(
            name: "fields",
            u = 7u64,
            i = -7i64,
            f = 0.5f64,
            b = true,
            s = "text",
            d = ?Shape { w: 2 },
            disp = %"shown",
            big = 1u128 << 100,
            small = 5u128,
            e = &err as &(dyn std::error::Error + 'static),
        );
        tracing::error!("plain {}", "message");
        let req = tracing::info_span!("req", status = tracing::field::Empty, path = "/x");
        req.record("status", 200u64);
    });
    let tree = tree(&t);
    let lines: Vec<&str> = tree.lines().collect();
    assert_eq!(
        lines[0],
        "event fields @main level=\"WARN\" u=7u i=-7i f=0.5f b=true s=\"text\" d=\"Shape { w: 2 }\" \
         disp=\"shown\" big=\"1267650600228229401496703205376\" small=5u e=\"disk full\""
    );
    let plain = lines[1].strip_prefix("event event ").expect("an event's default name");
    assert!(plain.contains("tree.rs:"), "{plain}");
    assert!(plain.ends_with("@main level=\"ERROR\" message=\"plain message\""), "{plain}");
    assert_eq!(&lines[2..], ["span req @main path=\"/x\"", "  event req @main status=200u"]);
}

#[test]
fn explicit_parents_win_over_the_current_span() {
    let (t, _) = record("explicit", || {
        let p = tracing::info_span!("p");
        let _other = tracing::info_span!("other").entered();
        let c = tracing::info_span!(parent: &p, "c");
        tracing::info!(name: "e", parent: &p, x = 1u64);
        tracing::info_span!("inside_other").in_scope(|| {});
        drop(c);
    });
    assert_eq!(
        tree(&t),
        "span p @main\n\
         \x20 span c @main\n\
         \x20 event e @main level=\"INFO\" x=1u\n\
         span other @main\n\
         \x20 span inside_other @main\n"
    );
}

#[test]
fn two_subscribers_alive_at_once_keep_their_spans_apart() {
    use tracing_subscriber::layer::SubscriberExt;
    let (t, _) = record("two_subscribers", || {
        let scoped = || tracing_subscriber::registry().with(waffle_tracing::layer());
        // Each registry numbers its spans from the start: the two ids are equal.
        let a = tracing::subscriber::with_default(scoped(), || tracing::info_span!("in_a"));
        let b = tracing::subscriber::with_default(scoped(), || tracing::info_span!("in_b"));
        assert_eq!(a.id(), b.id());
        a.in_scope(|| b.in_scope(|| tracing::info_span!("inner").in_scope(|| {})));
    });
    assert_eq!(tree(&t), "span in_a @main\nspan in_b @main\n  span inner @main\n");
}

#[test]
fn an_exit_out_of_order_keeps_the_spans_still_entered() {
    let (t, _) = record("out_of_order", || {
        let (a, b) = (tracing::info_span!("a"), tracing::info_span!("b"));
        let entered_a = a.enter();
        let entered_b = b.enter();
        tracing::info_span!("both").in_scope(|| {});
        drop(entered_a); // `b` stays entered
        tracing::info_span!("after_a_exit").in_scope(|| {});
        drop(entered_b);
        tracing::info_span!("top").in_scope(|| {});
    });
    assert_eq!(
        tree(&t),
        "span a @main\n\
         span b @main\n\
         \x20 span both @main\n\
         \x20 span after_a_exit @main\n\
         span top @main\n"
    );
}
