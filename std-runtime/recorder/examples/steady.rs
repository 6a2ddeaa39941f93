//! Records at a steady rate for a given time: `threads` threads, each beginning `tick` spans
//! with `work` spans inside them (a tick every millisecond, or less often for low rates), so
//! that `spans_per_sec` spans a second are recorded in all. The live-export soak test follows its file with `waffle-decode --follow`
//! while a backend goes away and comes back.
//!
//! ```text
//! cargo run --release -p waffle-std --example steady -- steady.bin 60 2000 2
//! ```
//!
//! Arguments: the file, seconds (60), spans per second (2000), threads (2). It prints the
//! number of spans it recorded when it stops.

use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "steady.bin".into());
    let mut number = |default: u64| args.next().map_or(default, |a| a.parse().expect("a whole number"));
    let (secs, rate, threads) = (number(60), number(2000), number(2).max(1));
    let session = waffle_std::Config::new(&path).process_name("steady").start().expect("start recording");
    // Each thread: one `tick` holding `work` spans, `per_tick` spans in all, every `period`.
    let per_tick = (rate / threads / 1000).max(2);
    let period = Duration::from_micros(per_tick * threads * 1_000_000 / rate.max(1));
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let start = Instant::now();
                    let (mut spans, mut tick) = (0u64, 0u64);
                    while start.elapsed() < Duration::from_secs(secs) {
                        {
                            let _tick = waffle::span!("tick", thread = t, n = tick);
                            for i in 0..per_tick - 1 {
                                let _work = waffle::span!("work", i = i);
                            }
                        }
                        spans += per_tick;
                        tick += 1;
                        // Sleep to the next tick of the schedule.
                        let due = start + period * tick as u32;
                        if let Some(wait) = due.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                    }
                    spans
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a recording thread")).sum()
    });
    let stats = session.stop().expect("stop recording");
    println!("{total} spans recorded, {} records dropped", stats.dropped);
}
