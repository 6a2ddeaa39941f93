//! Threads that begin a span and block: on a channel, on a lock, in a sleep. None of them
//! records again, so their spans reach the file only through the collector's copies of what
//! they staged (TAIL frames). The tests kill this process (SIGKILL, SIGTERM, SIGINT) once it
//! says `READY` and check that the file holds every `blocked_*` span.
//!
//! ```text
//! cargo run -p waffle-std --example blocked -- blocked.bin
//! ```
//!
//! It prints `READY` after 20 ms (20 drain intervals) of all four threads blocked, then waits
//! up to a minute for a signal; left alone, it ends normally and closes the file.

use std::{
    sync::{mpsc, Mutex},
    time::Duration,
};

fn main() {
    let path = std::env::args().nth(1).unwrap_or_else(|| "blocked.bin".into());
    let session = waffle_std::start(&path).expect("start recording");
    let (_keep, rx) = mpsc::channel::<()>();
    static LOCK: Mutex<()> = Mutex::new(());
    let held = LOCK.lock().unwrap();
    let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new().name(name.into()).spawn(f).expect("spawn");
    };
    spawn(
        "recv",
        Box::new(move || {
            let _span = waffle::span!("blocked_recv", n = 1u64);
            let _ = rx.recv(); // never sent: the sender lives in main
        }),
    );
    spawn(
        "lock",
        Box::new(|| {
            let _span = waffle::span!("blocked_lock", n = 2u64);
            let _guard = LOCK.lock(); // held by main
        }),
    );
    spawn(
        "sleep",
        Box::new(|| {
            let _span = waffle::span!("blocked_sleep", n = 3u64);
            std::thread::sleep(Duration::from_secs(60));
        }),
    );
    let _span = waffle::span!("blocked_main", n = 4u64);
    std::thread::sleep(Duration::from_millis(20));
    println!("READY");
    std::thread::sleep(Duration::from_secs(60));
    drop(held);
    drop(session);
}
