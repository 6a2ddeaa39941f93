//! A thread pool that keeps causality: each task's context travels with it through the channel,
//! so the worker's span is a child of the dispatcher's span although they run on different
//! threads.
//!
//! ```text
//! cargo run --example dispatch -- dispatch.bin && waffle-decode dispatch.bin -o dispatch.pftrace
//! ```
//!
//! The dispatcher opens `dispatch_task`, takes [`waffle::Context::current`] and sends it with
//! the work item; the worker enters it with [`waffle::Context::enter`] before opening
//! `process_task`.

use std::sync::{mpsc, Arc, Mutex};

/// A unit of work and the context it was dispatched from.
pub struct Task {
    /// Which task.
    pub id: u64,
    /// Numbers to add up.
    pub data: Vec<u64>,
    /// The dispatcher's context: its `dispatch_task` span.
    pub ctx: waffle::Context,
}

/// Dispatches `tasks` tasks to a pool of `workers` threads and returns each task's result
/// (the sum of its data), by task id.
pub fn run_pool(tasks: u64, workers: usize) -> Vec<u64> {
    let (send, recv) = mpsc::channel::<Task>();
    let recv = Arc::new(Mutex::new(recv));
    let (done_send, done_recv) = mpsc::channel::<(u64, u64)>();
    let pool: Vec<_> = (0..workers)
        .map(|w| {
            let (recv, done) = (recv.clone(), done_send.clone());
            std::thread::Builder::new()
                .name(format!("worker-{w}"))
                .spawn(move || loop {
                    let task = match recv.lock().map(|r| r.recv()) {
                        Ok(Ok(task)) => task,
                        _ => break, // the channel is closed: no more work
                    };
                    let _g = task.ctx.enter();
                    let _w = waffle::span!("process_task", task = task.id);
                    let _ = done.send((task.id, task.data.iter().sum()));
                })
                .expect("spawn a worker")
        })
        .collect();
    drop(done_send);

    for id in 0..tasks {
        let _d = waffle::span!("dispatch_task", task = id);
        let ctx = waffle::Context::current();
        let data = (0..=id).collect();
        send.send(Task { id, data, ctx }).expect("the pool is running");
    }
    drop(send);
    for worker in pool {
        worker.join().expect("a worker panicked");
    }
    let mut results = vec![0; tasks as usize];
    for (id, sum) in done_recv {
        results[id as usize] = sum;
    }
    results
}

#[allow(dead_code)] // the test includes this file as a module and calls `run_pool` only
fn main() -> Result<(), waffle_std::Error> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "dispatch.bin".into());
    let session = waffle_std::start(&path)?;
    let results = run_pool(12, 3);
    session.stop()?;
    println!("12 tasks on 3 workers, sums {results:?}; wrote {path}");
    Ok(())
}
