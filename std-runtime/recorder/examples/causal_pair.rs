//! One process, two sessions, one causal story: what the first file records causes work that
//! the second records.
//!
//! ```text
//! cargo run --example causal_pair -- out/
//! waffle-decode out/a.bin out/b.bin -o out/pair.pftrace    # open in ui.perfetto.dev
//! ```
//!
//! - `a.bin` (rank 0): a `step` span correlated as `step = 1`, with a `cause` event in it.
//! - `b.bin` (rank 1): an `effect` span, `caused_by` the cause and correlated as `step = 1`; a
//!   `request` span whose context a `worker` thread enters, so that the worker's `handle` span
//!   is the request's child; and a `task` span following a future that is made on the main
//!   thread and driven to completion on an `executor` thread.
//!
//! Each session salts its ids afresh, so ids never collide across the two files and the
//! decoder joins the link and the correlation across them: in Perfetto they are arrows from
//! one process track to the other.

use std::{
    future::Future,
    path::PathBuf,
    pin::Pin,
    sync::Arc,
    task::{Context as TaskContext, Poll, Wake, Waker},
};

use waffle::Instrument;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args_os().nth(1).unwrap_or_else(|| ".".into()));
    std::fs::create_dir_all(&dir)?;

    let session = waffle_std::Config::new(dir.join("a.bin")).label("rank", "0").start()?;
    let cause = {
        let _step = waffle::span!("step", correlate = ("step", 1u64), rank = 0u64);
        waffle::event!("cause", residual = f64::NAN)
    };
    session.stop()?;

    let session = waffle_std::Config::new(dir.join("b.bin")).label("rank", "1").start()?;
    {
        let _effect = waffle::span!("effect", caused_by = [cause], correlate = ("step", 1u64), rank = 1u64);
    }
    {
        let _request = waffle::span!("request", id = 7u64);
        let ctx = waffle::Context::current();
        let worker = std::thread::Builder::new().name("worker".into()).spawn(move || {
            let _in_request = ctx.enter();
            let _handle = waffle::span!("handle", id = 7u64);
        })?;
        worker.join().expect("worker thread");
    }
    // The task's span begins inside `setup` and ends on the executor, after `setup` has ended.
    let task = {
        let _setup = waffle::span!("setup");
        async {
            for part in 0..2u64 {
                {
                    // A span guard stays on its thread, so it must not live across an `.await`.
                    let _fetch = waffle::span!("fetch", part);
                    std::hint::black_box(part);
                }
                YieldOnce(false).await;
            }
        }
        .instrument(waffle::span!("task"))
    };
    let executor = std::thread::Builder::new().name("executor".into()).spawn(move || {
        let _drive = waffle::span!("drive");
        block_on(task)
    })?;
    executor.join().expect("executor thread");
    session.stop()?;
    println!("wrote {} and {}", dir.join("a.bin").display(), dir.join("b.bin").display());
    Ok(())
}

/// Polls `fut` on this thread until it completes; nothing ever needs waking.
fn block_on<F: Future>(fut: F) -> F::Output {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let waker = Waker::from(Arc::new(Noop));
    let mut cx = TaskContext::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

/// Pending on the first poll and ready on the next: an `.await` that gives the executor back.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut TaskContext<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
