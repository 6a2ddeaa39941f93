//! A program instrumented with `tracing` alone, recorded by waffle through one line of setup.
//!
//! ```sh
//! WAFFLE_OUTPUT=demo.bin cargo run -p waffle-tracing --example tracing_demo
//! waffle-decode demo.bin -o demo.pftrace
//! ```
//!
//! Nested spans (`#[instrument]`ed functions inside a span entered per epoch), events with
//! fields, a `follows_from` (each epoch caused by the data loading), and an `#[instrument]`ed
//! async fn whose future is polled first here and then on a worker thread.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, Waker},
};
use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt};

fn main() {
    // The one line: everything below is plain `tracing`.
    tracing_subscriber::registry().with(waffle_tracing::layer()).init();

    let run = tracing::info_span!("train", epochs = 2u64).entered();
    let data = tracing::info_span!("load_data", shards = 2u64);
    data.in_scope(|| tracing::info!(rows = 1024u64, source = "synthetic", "loaded"));
    for epoch in 0..2u64 {
        let span = tracing::info_span!("epoch", epoch);
        span.follows_from(&data);
        let _entered = span.enter();
        let loss = forward(epoch);
        tracing::info!(loss, "epoch done");
    }

    // Evaluation: an async task that moves to another thread between polls.
    let mut task = Box::pin(evaluate(2));
    let first = task.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    assert!(first.is_pending());
    let worker = std::thread::Builder::new().name("worker".into());
    let score = worker.spawn(move || block_on(task)).expect("spawn").join().expect("worker");
    drop(run);
    println!("score {score}");
}

#[tracing::instrument]
fn forward(epoch: u64) -> f64 {
    (0..2u64).map(|layer| matmul(layer, epoch)).sum()
}

#[tracing::instrument(level = "debug")]
fn matmul(layer: u64, epoch: u64) -> f64 {
    1.0 / (1 + layer + 2 * epoch) as f64
}

#[tracing::instrument]
async fn evaluate(batches: u64) -> f64 {
    let mut score = 0.0;
    for batch in 0..batches {
        score += tracing::info_span!("batch", batch).in_scope(|| 0.5 * batch as f64);
        YieldOnce(false).await;
    }
    score
}

/// Pending once (waking itself), then ready: an `.await` that hands the task back.
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

/// Polls `fut` on this thread until it is ready (its futures wake themselves at once).
fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            return v;
        }
    }
}
